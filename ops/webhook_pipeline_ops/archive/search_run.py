"""Where ``archive search`` reads and how it prints.

Where: ``--stack NAME`` runs one Athena query (stack outputs ``ArchiveDatabaseName``,
``ArchiveTableName``, ``ArchiveWorkGroupName``; with no ``--source`` the sources are the
``source=`` prefixes of ``ArchiveBucketName``, because Athena needs the injected source
partition's values). ``--local``, or no ``--stack`` while a local stack's ``outputs.json``
exists (as ``send`` defaults to the running local stack), reads the archive bucket over S3 with
:func:`webhook_pipeline.archive.query.search`; so does ``--archive-bucket NAME`` (or
``$WEBHOOK_PIPELINE_ARCHIVE_BUCKET``) with the default AWS connection.

How: the count of every match first, then at most ``--limit`` matches, one line each
(received_at, source, delivery id, event type, outcome, body size), and the objects or lines that
could not be read on stderr (by key and line; they are skipped).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from webhook_pipeline.archive.query import ArchiveFilter, SearchResult

from webhook_pipeline_ops.aws import Aws, OpsError, local_outputs_path
from webhook_pipeline_ops.output import print_json

if TYPE_CHECKING:
    from webhook_pipeline.archive.scan import S3Settings

BUCKET_OUTPUT = "ArchiveBucketName"
BUCKET_ENV = "WEBHOOK_PIPELINE_ARCHIVE_BUCKET"
#: Record fields ``--json`` leaves out (the Athena query does not read the header maps).
NOT_SHOWN = frozenset({"headers", "signed_headers"})
ATHENA_OUTPUTS = ("ArchiveDatabaseName", "ArchiveTableName", "ArchiveWorkGroupName")
#: Worker processes of a local search per CPU, and at most.
PROCESSES_PER_CPU = 2
MAX_PROCESSES = 8


def choose_mode(args: argparse.Namespace) -> str:
    """``"athena"`` (``--stack``) or ``"s3"``; sets ``args.local`` when a local stack runs and
    nothing else was named.

    Raises
    ------
    OpsError
        Neither ``--stack``, ``--local``, a bucket nor a running local stack (exit code 2).
    """
    if args.stack:
        if args.local:
            raise OpsError("give --stack NAME or --local, not both", exit_code=2)
        return "athena"
    explicit = args.archive_bucket or os.environ.get(BUCKET_ENV)
    if not args.local and not explicit and local_outputs_path().is_file():
        args.local = True
    if not (args.local or explicit):
        raise OpsError(
            "give --stack NAME (Athena), --local or --archive-bucket NAME (no local stack "
            f"found at {local_outputs_path()})",
            exit_code=2,
        )
    return "s3"


def archive_bucket(
    aws: Aws, args: argparse.Namespace, stack_outputs: dict[str, str] | None = None
) -> str:
    """The archive bucket's name: ``--archive-bucket``, the local stack's or the stack's output
    :data:`BUCKET_OUTPUT` (``stack_outputs`` when already read), then
    ``$WEBHOOK_PIPELINE_ARCHIVE_BUCKET``."""
    name = args.archive_bucket
    if not name and args.local:
        name = aws.local_outputs.get(BUCKET_OUTPUT)
    if not name and args.stack:
        outputs = stack_outputs if stack_outputs is not None else aws._stack_outputs(args.stack)
        name = outputs.get(BUCKET_OUTPUT)
    name = name or os.environ.get(BUCKET_ENV)
    if not name:
        raise OpsError(
            f"no archive bucket: give it with --archive-bucket, --stack, --local or {BUCKET_ENV}"
        )
    return str(name)


def run_search(aws: Aws, args: argparse.Namespace, flt: ArchiveFilter, mode: str) -> SearchResult:
    """Search the archive the way ``mode`` says."""
    from webhook_pipeline.archive.query import list_sources, search

    if mode == "s3":
        processes = search_processes()
        settings = s3_settings(aws) if processes > 1 else None
        bucket = archive_bucket(aws, args)
        return search(aws.client("s3"), bucket, flt, processes=processes, settings=settings)
    from webhook_pipeline_ops.archive.athena import AthenaTarget, athena_search

    outputs = aws._stack_outputs(args.stack)
    missing = [key for key in ATHENA_OUTPUTS if not outputs.get(key)]
    if missing:
        raise OpsError(f"stack {args.stack!r} has no output {', '.join(missing)}")
    target = AthenaTarget(*(outputs[key] for key in ATHENA_OUTPUTS))
    if flt.sources:
        sources = list(flt.sources)
    else:
        sources = list_sources(aws.client("s3"), archive_bucket(aws, args, outputs))
    if not sources:
        return SearchResult()
    clients: Any = aws  # Aws.client's overloads name the typed services only
    return athena_search(clients.client("athena"), target, flt, sources)


def search_processes() -> int:
    """Worker processes of a local search: :data:`PROCESSES_PER_CPU` per CPU (they wait on S3
    half of the time), at most :data:`MAX_PROCESSES`."""
    return min(MAX_PROCESSES, PROCESSES_PER_CPU * (os.cpu_count() or 1))


def s3_settings(aws: Aws) -> S3Settings:
    """How worker processes reach the S3 of ``aws``'s clients: its endpoint and region, and the
    credentials its boto3 session resolved (frozen; the local stack's stand-ins when it has
    none and the S3 is local)."""
    from webhook_pipeline.archive.scan import S3Settings

    found = aws.session.get_credentials()
    frozen = found.get_frozen_credentials() if found is not None else None
    if frozen is not None:
        key, secret, token = frozen.access_key, frozen.secret_key, frozen.token
    elif aws.endpoint_url or aws.args.local:
        key, secret, token = "testing", "testing", None  # the local S3 takes any
    else:
        key = secret = token = None
    return S3Settings(
        region=str(aws.session.region_name),
        endpoint_url=aws.endpoint_url,
        access_key=key,
        secret_key=secret,
        token=token,
        config=dict(aws.CONFIG_OPTIONS),
    )


def describe_window(flt: ArchiveFilter) -> str:
    start = flt.start.isoformat() if flt.start else "the beginning"
    end = flt.end.isoformat() if flt.end else "now"
    return f"{start} .. {end}"


def render(result: SearchResult, flt: ArchiveFilter, *, limit: int | None, as_json: bool) -> None:
    """Print the count and the first ``limit`` matches (stdout), the problems (stderr)."""
    shown = result.records if limit is None else result.records[:limit]
    if as_json:
        print_json(
            {
                "count": len(result.records),
                "matches": [r.model_dump(exclude_none=True, exclude=set(NOT_SHOWN)) for r in shown],
                "problems": [p.__dict__ for p in result.problems],
            }
        )
    else:
        count = len(result.records)
        if count == 0:
            print(f"0 deliveries: nothing archived matches in {describe_window(flt)}")
        else:
            print(
                f"{count} deliveries"
                + (f" (first {len(shown)} shown)" if len(shown) < count else "")
            )
        for r in shown:
            print(
                f"{r.received_at}  {r.source}  {r.delivery_id}  {r.event_type or '-'}  "
                f"{r.outcome}  {r.body_size}"
            )
    for problem in result.problems:
        print(f"problem: {problem.key} line {problem.line}: {problem.reason}", file=sys.stderr)
