"""Webhook bodies as the console shows them: found, verified, size-capped, escaped.

Where a body can still be found: the claim-check object in the payload bucket (bodies over the
inline limit; kept for ``PayloadExpirationDays``) for a recorded delivery, and the envelope itself
for a message in the DLQ. Inline bodies of recorded deliveries are not kept anywhere (the record
keeps their size and SHA-256 only).

Display: a credential the provider puts in the body redacted (``webhook_pipeline.redaction``),
at most :data:`MAX_SHOWN_BYTES` of the body as text (invalid UTF-8 replaced), every
character escaped by the templates (a ``<script>`` in a body is text), and when the whole body is
JSON a collapsible tree (nested ``<details>``, built here with every string escaped).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from markupsafe import Markup, escape
from webhook_pipeline.redaction import shown_json

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

#: At most this many bytes of a body are shown (the rest is counted, not sent to the browser).
MAX_SHOWN_BYTES = 64 * 1024
#: A body larger than this is not fetched from S3 at all (HTTP API's payload limit).
MAX_FETCH_BYTES = 10 * 1024 * 1024
#: The JSON tree stops at this depth and this many nodes (the text view still has everything).
MAX_TREE_DEPTH = 12
MAX_TREE_NODES = 2_000
#: Where the ingest function puts a claim-check body:
#: ``bodies/<source>/<sha256(delivery id) hex, first 32>/<attempt token>``
#: (``webhook_pipeline.ingest.service``; an e2e test reads one back through the console).
CLAIM_CHECK_PREFIX = "bodies/{source}/{id_digest}/"


@dataclass(frozen=True)
class BodyView:
    """A body ready for a page.

    Attributes
    ----------
    where : str
        Where it was found (``s3://bucket/key`` or ``envelope``).
    size : int
        Its size in bytes.
    text : str
        At most :data:`MAX_SHOWN_BYTES` of it, decoded as UTF-8 (invalid bytes replaced);
        escaped by the template.
    truncated : bool
        Whether ``text`` is only the start.
    tree : Markup | None
        The whole body as a collapsible JSON tree (already escaped), when it is JSON and not
        truncated.
    """

    where: str
    size: int
    text: str
    truncated: bool
    tree: Markup | None


def body_view(raw: bytes, where: str, source: str | None = None) -> BodyView:
    """Prepare ``raw`` for display (see the module docstring), the credentials a provider puts
    in the body (``credential_fields``) of ``source``'s provider replaced by ``[redacted]``
    (of every provider's when ``source`` is ``None`` or unknown)."""
    from webhook_pipeline_ops.credentials import shown_body

    raw = shown_body(source, raw)
    truncated = len(raw) > MAX_SHOWN_BYTES
    text = raw[:MAX_SHOWN_BYTES].decode("utf-8", "replace")
    tree = None
    if not truncated:
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        else:
            tree = json_tree(parsed)
    return BodyView(where=where, size=len(raw), text=text, truncated=truncated, tree=tree)


def json_tree(value: Any) -> Markup:
    """``value`` (parsed JSON) as nested ``<details>`` elements, every key and string escaped."""
    budget = [MAX_TREE_NODES]

    def node(item: Any, depth: int) -> str:
        budget[0] -= 1
        if budget[0] < 0:
            return '<span class="j-more">…</span>'
        if isinstance(item, dict | list):
            if not item:
                return (
                    '<span class="j-punct">'
                    + ("{}" if isinstance(item, dict) else "[]")
                    + "</span>"
                )
            if depth >= MAX_TREE_DEPTH:
                return '<span class="j-more">… (deeper levels in the text view)</span>'
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            kind = f"{{{len(item)}}}" if isinstance(item, dict) else f"[{len(item)}]"
            rows = "".join(
                f'<li><span class="j-key">{escape(json.dumps(k) if isinstance(k, str) else k)}'
                f"</span>: {node(v, depth + 1)}</li>"
                for k, v in pairs
            )
            opened = " open" if depth < 2 else ""
            return (
                f'<details class="j-node"{opened}><summary>{kind}</summary>'
                f'<ul class="j-list">{rows}</ul></details>'
            )
        if isinstance(item, str):
            return f'<span class="j-str">{escape(shown_json(item))}</span>'
        if item is None or isinstance(item, bool):
            return f'<span class="j-lit">{escape(json.dumps(item))}</span>'
        return f'<span class="j-num">{escape(json.dumps(item))}</span>'

    return Markup(node(value, 0))  # noqa: S704 - every piece of data above went through escape()


def claim_check_prefix(source: str, delivery_id: str) -> str:
    """The S3 prefix under which the ingest function stores the delivery's claim-check bodies."""
    id_digest = hashlib.sha256(delivery_id.encode()).hexdigest()[:32]
    return CLAIM_CHECK_PREFIX.format(source=source, id_digest=id_digest)


def find_claim_check_body(
    s3: S3Client, bucket: str, source: str, delivery_id: str, size: int, sha256: str
) -> BodyView | None:
    """The delivery's body from the payload bucket, verified against its record.

    Several attempts of one delivery may each have stored an object (one per attempt token);
    the first whose size and SHA-256 match the record is returned.

    Parameters
    ----------
    s3 : botocore S3 client
    bucket : str
        The payload bucket.
    source, delivery_id : str
        The delivery.
    size : int
        ``body_size`` of the record (bytes).
    sha256 : str
        ``body_sha256`` of the record (hex).

    Returns
    -------
    BodyView | None
        ``None`` when no matching object exists (an inline body, or expired by the bucket's
        lifecycle rule) or it is over :data:`MAX_FETCH_BYTES`.

    Raises
    ------
    botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError
        S3 failed (access denied, no connection).
    """
    if size > MAX_FETCH_BYTES:
        return None
    prefix = claim_check_prefix(source, delivery_id)
    listing = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=20)
    for entry in listing.get("Contents", []):
        if int(entry.get("Size", -1)) != size:
            continue
        raw = s3.get_object(Bucket=bucket, Key=entry["Key"])["Body"].read()
        if hashlib.sha256(raw).hexdigest() == sha256:
            return body_view(raw, f"s3://{bucket}/{entry['Key']}", source)
    return None


#: A body that is not UTF-8 is shown as a hex dump of at most this many bytes.
MAX_DUMP_BYTES = 4 * 1024


@dataclass(frozen=True)
class BytesDump:
    """A body that is not UTF-8, ready for a page (every field escaped by the template).

    Attributes
    ----------
    size : int
        Its size in bytes.
    hex_lines : list[str]
        ``offset  16 bytes in hex  |printable ASCII, others as .|`` for at most
        :data:`MAX_DUMP_BYTES` bytes.
    base64 : str
        Base64 of at most :data:`MAX_SHOWN_BYTES` bytes.
    truncated : bool
        Whether the dump or the base64 is only the start.
    """

    size: int
    hex_lines: list[str]
    base64: str
    truncated: bool


def bytes_dump(raw: bytes) -> BytesDump:
    """``raw`` as a hex dump and base64 (see :class:`BytesDump`)."""
    import base64

    lines = []
    for offset in range(0, min(len(raw), MAX_DUMP_BYTES), 16):
        chunk = raw[offset : offset + 16]
        shown = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk)
        lines.append(f"{offset:08x}  {chunk.hex(' '):<47}  |{shown}|")
    return BytesDump(
        size=len(raw),
        hex_lines=lines,
        base64=base64.b64encode(raw[:MAX_SHOWN_BYTES]).decode("ascii"),
        truncated=len(raw) > MAX_DUMP_BYTES,
    )
