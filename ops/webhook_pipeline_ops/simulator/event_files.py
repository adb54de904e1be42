"""Write the ingest events of ``events/`` (``webhook-pipeline events``; it writes the archive's
events too: :mod:`webhook_pipeline_ops.simulator.archive_events`).

The committed files are signed with the development secrets at a fixed time
(:data:`FIXED_TIME`), so their delivery ids and signatures never change (a test compares them
with what this module builds). Providers that sign a timestamp reject such old events as stale;
run ``webhook-pipeline events --now --out DIR`` to write copies signed at the current time for
``sam local invoke``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from webhook_pipeline.providers.model import Handshake
from webhook_pipeline.source_secrets import parse_secret
from webhook_pipeline.sources import ResolvedSource

from webhook_pipeline_ops.simulator.archive_events import build_archive_events
from webhook_pipeline_ops.simulator.deliveries import (
    EXAMPLE_HOST,
    dev_secret_value,
    example_sources,
    http_api_event,
    request_event,
    rest_api_event,
    signed_delivery,
)

FIXED_TIME = 1_767_225_600  # 2026-01-01T00:00:00Z
DEFAULT_OUT = Path(__file__).resolve().parents[3] / "events"


def _fixed(source: ResolvedSource, salt: str = "") -> str:
    """A delivery id in the provider's style that never changes between regenerations."""
    return source.provider.new_delivery_id(
        hashlib.sha256(f"{source.name}{salt}".encode()).hexdigest()
    )


def build_events(
    now: int, sources: Mapping[str, ResolvedSource] | None = None
) -> dict[str, dict[str, Any]]:
    """``{file name: API Gateway event}`` for every interesting ingest case, signed at ``now``
    (Unix seconds): one valid delivery per example source (every provider, see
    :func:`~webhook_pipeline_ops.simulator.deliveries.example_sources`), one event per provider
    handshake, and the special cases (duplicate, bad signature, stale, base64 body, REST 1.0 shape,
    unknown source)."""
    src = dict(sources if sources is not None else example_sources())
    events: dict[str, dict[str, Any]] = {}
    for name, source in src.items():
        url = f"https://{EXAMPLE_HOST}/webhooks/{name}"
        events[f"ingest-{name}.json"] = http_api_event(
            signed_delivery(
                source,
                timestamp=now,
                delivery_id=_fixed(source),
                resource=f"res_{name}",
                sequence=now,
                url=url,
            ),
            domain=EXAMPLE_HOST,
        )
        for handshake in source.provider.handshakes:
            slug = re.sub(r"[^a-z0-9]+", "-", handshake.name.lower()).strip("-")
            events[f"ingest-{name}-{slug}.json"] = handshake_event(source, handshake, now)
    events.update(_special_cases(events, src["stripe"], src["github"], now))
    return events


def _special_cases(
    events: Mapping[str, dict[str, Any]], stripe: ResolvedSource, github: ResolvedSource, now: int
) -> dict[str, dict[str, Any]]:
    """The events of the ingest cases that are no provider's: duplicate, bad signature, stale,
    base64 body, REST 1.0 shape, unknown source."""
    # The same delivery again: 200 duplicate once ingest-stripe.json was accepted.
    special = {"ingest-stripe-duplicate.json": events["ingest-stripe.json"]}
    # Signed with the wrong secret: 401 signature_invalid.
    special["ingest-bad-signature.json"] = http_api_event(
        signed_delivery(
            github,
            timestamp=now,
            secret="not-the-secret",  # noqa: S106 - deliberately wrong
            delivery_id="5a0e3c0a-0000-4000-8000-000000000001",
        )
    )
    # Signed correctly, but 10 minutes old (tolerance 300 s): 401 timestamp_stale.
    special["ingest-stale.json"] = http_api_event(
        signed_delivery(
            stripe,
            timestamp=now - 600,
            delivery_id="evt_stale_sample",
            resource="cus_1",
            sequence=now - 600,
        )
    )
    # Case C02: a body API Gateway sent base64-encoded, verified over the decoded bytes.
    special["ingest-base64-body.json"] = http_api_event(
        signed_delivery(github, timestamp=now, delivery_id=_fixed(github, "base64")),
        base64_body=True,
    )
    # REST API (payload 1.0) shape of a GitHub delivery.
    special["ingest-rest-v1.json"] = rest_api_event(
        signed_delivery(github, timestamp=now, delivery_id="0b6e4f8e-cc78-11e3-81ab-4c9367dc0958")
    )
    # No such source: 404.
    special["ingest-unknown-source.json"] = http_api_event(
        signed_delivery(github, timestamp=now, delivery_id="5a0e3c0a-0000-4000-8000-000000000002"),
        path_source="nope",
    )
    return special


def handshake_event(source: ResolvedSource, handshake: Handshake, now: int) -> dict[str, Any]:
    """The API Gateway event of ``handshake`` as ``source``'s provider sends it (signed with the
    development secret when the provider signs its challenges)."""
    secret = parse_secret(dev_secret_value(source))
    sample = handshake.sample(secret)
    headers, body = dict(sample.headers), sample.body
    if handshake.signed:
        url = f"https://{EXAMPLE_HOST}/webhooks/{source.name}"
        signed = source.provider.sign_request(
            body,
            source.provider.dev_secret,
            timestamp=now,
            delivery_id=_fixed(source, "hs"),
            url=url,
        )
        body = signed.body
        headers |= signed.headers
    return request_event(
        source.name, sample.method, body, headers, sample.query, domain=EXAMPLE_HOST
    )


def write_events(out: Path, now: int) -> list[Path]:
    """Write :func:`build_events` and the archive's events
    (:func:`~webhook_pipeline_ops.simulator.archive_events.build_archive_events`, at their own
    fixed times whatever ``now``) into ``out``; return the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, event in (build_events(now) | build_archive_events()).items():
        event.get("requestContext", {}).pop("timeEpoch", None)
        path = out / name
        path.write_text(json.dumps(event, indent=2) + "\n")
        written.append(path)
    return written


def decoded_body(event: dict[str, Any]) -> bytes:
    """The raw body bytes of an API Gateway event."""
    body = event.get("body") or ""
    return base64.b64decode(body) if event.get("isBase64Encoded") else body.encode()
