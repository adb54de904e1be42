"""Reading one archive object for a search: fetching it (in a worker process with its own S3
client), and decoding only the lines of deliveries the search can select.

A search's worker processes each build their own S3 client from :class:`S3Settings` (endpoint,
region, credentials: all plain values, so they pickle), fetch their objects themselves and return
only the records kept, so an object's bytes never cross a pipe.

The pre-filter of :func:`decode_selected`: each line is parsed (by pydantic's JSON parser, the
one full validation uses) into only its ``source``, ``delivery_id`` and ``body``, and the
conditions every line of one delivery shares (source, delivery id prefix, body predicates: see
:func:`webhook_pipeline.archive.query.shares_selection`) are checked on the parsed dict; only the
lines that may be selected are validated as :class:`~.record.ArchiveRecord`. A line the
pre-filter cannot read (not JSON, not an object, a field it reads missing or of the wrong type)
is validated in full, so it is reported as a problem exactly as :func:`~.record.decode_object`
reports it. A line the pre-filter excludes (well-formed source, delivery id and body that the
filter rejects) is not validated further: a defect in one of its other fields is not reported.
What the search returns is the same either way: an excluded line belongs to a delivery the
filter does not select, valid or not.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict

from pydantic import TypeAdapter, ValidationError

from webhook_pipeline.archive.record import ArchiveRecord, LineProblem, decode_text, read_line


class BodyPredicate(Protocol):
    """A condition on a delivery's parsed body (``webhook_pipeline.archive.predicate``)."""

    def matches(self, body: Any) -> bool: ...


class Selection(Protocol):
    """The filter conditions the pre-filter reads (``query.ArchiveFilter`` has them)."""

    @property
    def sources(self) -> tuple[str, ...]: ...
    @property
    def delivery_id_prefix(self) -> str | None: ...
    @property
    def where(self) -> tuple[BodyPredicate, ...]: ...


@dataclass(frozen=True)
class S3Settings:
    """How a worker process connects to S3 (plain values: it pickles).

    Attributes
    ----------
    region : str
        AWS region name.
    endpoint_url : str | None
        A local S3 (``http://127.0.0.1:4566``), or ``None`` for AWS's.
    access_key, secret_key, token : str | None
        Credentials as the caller's boto3 session resolved them (``None``: the worker resolves
        them itself, the normal boto3 way).
    config : dict[str, Any]
        ``botocore.config.Config`` keyword arguments (timeouts, retries).
    """

    region: str
    endpoint_url: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    token: str | None = None
    config: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def client(self) -> Any:
        """A new botocore S3 client."""
        import boto3
        from botocore.config import Config

        return boto3.session.Session().client(
            "s3",
            region_name=self.region,
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            aws_session_token=self.token,
            config=Config(**self.config),
        )


_CLIENTS: dict[S3Settings, Any] = {}


class _Shared(TypedDict, total=False):
    source: object
    delivery_id: object
    body: object


#: Reads only the fields every line of one delivery shares (the others are parsed, not built).
_SHARED_FIELDS = TypeAdapter(_Shared)


def worker_client(settings: S3Settings) -> Any:
    """This process's client for ``settings`` (built on first use)."""
    client = _CLIENTS.get(settings)
    if client is None:
        client = _CLIENTS[settings] = settings.client()
    return client


def fetch_object(s3: Any, bucket: str, key: str) -> bytes | LineProblem:
    """The bytes of one object, or the problem that it is missing or unreadable."""
    try:
        data: bytes = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except Exception as exc:  # reported by key, never a crash of the reader
        return LineProblem(key, 0, f"not readable: {type(exc).__name__}")
    return data


def body_matches(body: str | None, where: Sequence[BodyPredicate]) -> bool:
    """Whether the body text (``None``: not UTF-8) parses as JSON and meets every predicate."""
    if body is None:
        return False
    try:
        parsed = json.loads(body)
    except ValueError:
        return False
    return all(p.matches(parsed) for p in where)


def excluded(flt: Selection, line: str) -> bool:
    """Whether ``line`` is certainly a line of a delivery ``flt`` does not select (``False``
    when the line cannot be read as far as the conditions need: then it is validated)."""
    try:
        doc = _SHARED_FIELDS.validate_json(line)
    except ValidationError:  # not JSON, or not an object
        return False
    if flt.sources:
        source = doc.get("source")
        if not isinstance(source, str):
            return False
        if source not in flt.sources:
            return True
    if flt.delivery_id_prefix is not None:
        delivery_id = doc.get("delivery_id")
        if not isinstance(delivery_id, str):
            return False
        if not delivery_id.startswith(flt.delivery_id_prefix):
            return True
    if flt.where:
        body = doc.get("body")
        if body is not None and not isinstance(body, str):
            return False
        return not body_matches(body, flt.where)
    return False


def decode_selected(
    key: str, data: bytes | LineProblem, flt: Selection
) -> tuple[list[ArchiveRecord], list[LineProblem]]:
    """The records of one object that may be selected (source, delivery id prefix and body
    predicates hold), and the problems of its lines (see the module docstring for which).

    Never raises: an object that is not gzip is one problem at line 0.
    """
    if isinstance(data, LineProblem):
        return [], [data]
    text = decode_text(key, data)
    if isinstance(text, LineProblem):
        return [], [text]
    screen = bool(flt.sources or flt.delivery_id_prefix is not None or flt.where)
    records: list[ArchiveRecord] = []
    problems: list[LineProblem] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or (screen and excluded(flt, line)):
            continue
        read = read_line(key, number, line)
        if isinstance(read, LineProblem):
            problems.append(read)
        else:
            records.append(read)
    return records, problems


def fetch_and_decode(
    job: tuple[S3Settings, str, str, Selection],
) -> tuple[list[ArchiveRecord], list[LineProblem]] | None:
    """One worker job: fetch ``(settings, bucket, key, flt)``'s object with this process's
    client, then :func:`decode_selected`; ``None`` when the object could not be read (the
    searching process reads it with its own client, and reports it)."""
    settings, bucket, key, flt = job
    try:
        data = worker_client(settings).get_object(Bucket=bucket, Key=key)["Body"].read()
    except Exception:  # the searching process tries again, and reports what it finds
        return None
    return decode_selected(key, data, flt)
