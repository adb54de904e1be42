"""``webhook-pipeline archive search``: the count and the matches, problems on stderr, usage
errors before anything is read, and the same output through Athena (``--stack``: moto's
CloudFormation outputs and Athena API, the rows of the generated SQL as DuckDB computes them over
the same fixture) as over S3 (``--local``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.athena.models import QueryResults, athena_backends
from webhook_pipeline.archive.query import ArchiveFilter
from webhook_pipeline.archive.record import encode_object, object_key
from webhook_pipeline_ops.archive.request import parse_moment
from webhook_pipeline_ops.archive.sql import search_sql
from webhook_pipeline_ops.cli import main

from tests.archive_fixture import BUCKET, T10, duckdb_athena, write_fixture

pytestmark = pytest.mark.integration

WINDOW = ["--from", "2026-03-01T10:00:00Z", "--to", "2026-03-01T12:00:00Z"]
S3_ARGS = ["archive", "search", "--region", "us-east-1", "--archive-bucket", BUCKET]
STACK = "archive-stack"
OUTPUTS = {
    "ArchiveBucketName": BUCKET,
    "ArchiveDatabaseName": "archive_db",
    "ArchiveTableName": "deliveries",
    "ArchiveWorkGroupName": "archive-wg",
}


@pytest.fixture
def archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("WEBHOOK_PIPELINE_LOCAL_DIR", str(tmp_path / "no-local-stack"))
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        write_fixture(s3, tmp_path)
        yield s3, tmp_path


def test_prints_the_count_then_one_line_per_match(archive: Any, capsys: Any) -> None:
    code = main([*S3_ARGS, *WINDOW, "--where", "data.object.amount>=1000"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out == [
        "2 deliveries",
        "2026-03-01T10:00:00.000000Z  stripe  evt_1  charge.succeeded  applied  75",
        "2026-03-01T10:10:00.000000Z  stripe  evt_2  charge.succeeded  applied  75",
    ]


def test_limit_caps_the_lines_never_the_count(archive: Any, capsys: Any) -> None:
    code = main([*S3_ARGS, *WINDOW, "--event-type", "invoice?paid", "--limit", "1", "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    assert document["count"] == 4
    assert [m["delivery_id"] for m in document["matches"]] == ["evtAx"]
    main([*S3_ARGS, *WINDOW, "--event-type", "invoice?paid", "--limit", "2"])
    assert capsys.readouterr().out.splitlines()[0] == "4 deliveries (first 2 shown)"


def test_a_corrupt_object_is_reported_by_key_and_skipped(archive: Any, capsys: Any) -> None:
    s3, _ = archive
    bad = object_key("stripe", "2026-03-01-10", T10, unique="f" * 32)
    s3.put_object(Bucket=BUCKET, Key=bad, Body=b"not gzip")
    half = encode_object([])[:0] + b"\x1f\x8b" + b"\0" * 8
    s3.put_object(Bucket=BUCKET, Key=bad.replace("ffff", "eeee"), Body=half)
    code = main([*S3_ARGS, *WINDOW, "--source", "stripe", "--delivery-id-prefix", "evt_1"])
    captured = capsys.readouterr()
    assert code == 0
    assert captured.out.splitlines()[0] == "2 deliveries"
    problems = captured.err.splitlines()
    assert f"problem: {bad} line 0: not a gzip JSON Lines object: BadGzipFile" in problems
    assert len(problems) == 2


def test_nothing_in_the_window_says_so(archive: Any, capsys: Any) -> None:
    code = main([*S3_ARGS, "--from", "2026-03-02T00:00:00Z", "--to", "2026-03-02T01:00:00Z"])
    assert code == 0
    assert capsys.readouterr().out.startswith(
        "0 deliveries: nothing archived matches in 2026-03-02"
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--from", "2026-03-01T12:00:00Z", "--to", "2026-03-01T10:00:00Z"], "must be later"),
        (["--from", "2026-03-01T10:00:00Z", "--to", "2026-03-01T10:00:00Z"], "must be later"),
        (["--source", "nosuch"], "unknown source 'nosuch'"),
        (["--where", "data..amount>1"], "at position 5"),
        (["--where", "amount>>1"], "cannot parse predicate 'amount>>1'"),
        (["--outcome", "done"], "unknown outcome 'done'"),
        (["--last", "0h"], "not a duration"),
        (["--from", "yesterday"], "not an ISO-8601 time"),
    ],
)
def test_bad_input_is_a_usage_error_before_anything_is_read(
    extra: list[str], message: str, capsys: Any
) -> None:
    # nothing listens on port 9: reading anything would be a connection error (exit code 1)
    argv = [*S3_ARGS, "--endpoint-url", "http://127.0.0.1:9", *extra]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_without_a_target_or_a_local_stack_it_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("WEBHOOK_PIPELINE_LOCAL_DIR", str(tmp_path))
    monkeypatch.delenv("WEBHOOK_PIPELINE_ARCHIVE_BUCKET", raising=False)
    assert main(["archive", "search", "--region", "us-east-1"]) == 2
    assert "give --stack NAME (Athena), --local or --archive-bucket" in capsys.readouterr().err


def test_a_running_local_stack_is_the_default(
    archive: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    _, folder = archive
    (folder / "outputs.json").write_text(json.dumps({"ArchiveBucketName": BUCKET}))
    monkeypatch.setenv("WEBHOOK_PIPELINE_LOCAL_DIR", str(folder))
    code = main(["archive", "search", "--region", "us-east-1", *WINDOW, "--source", "github"])
    assert code == 0
    assert capsys.readouterr().out.splitlines()[0] == "2 deliveries"


def _stack_with_outputs() -> None:
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {key: {"Value": value} for key, value in OUTPUTS.items()},
    }
    cfn = boto3.client("cloudformation", region_name="us-east-1")
    cfn.create_stack(StackName=STACK, TemplateBody=json.dumps(template))
    boto3.client("athena", region_name="us-east-1").create_work_group(Name="archive-wg")


def _queue_athena_answer(duck: Any, sql: str) -> None:
    """What Athena answers to ``sql``: the DuckDB rows, every value as text, a header row."""
    cursor = duck.execute(sql)
    names = [d[0] for d in cursor.description]
    rows = [{"Data": [{"VarCharValue": n} for n in names]}]
    for row in cursor.fetchall():
        rows.append({"Data": [{} if v is None else {"VarCharValue": str(v)} for v in row]})
    info = [{"Name": n, "Type": "varchar"} for n in names]
    athena_backends["123456789012"]["us-east-1"].query_results_queue.append(
        QueryResults(rows=rows, column_info=info)
    )


@pytest.mark.parametrize(
    "extra",
    [
        [],
        ["--where", "data.object.amount>=1000"],
        ["--outcome", "stale", "--outcome", "duplicate", "--json"],
        ["--event-type", "invoice_paid", "--source", "stripe"],
        ["--delivery-id-prefix", "evt_1", "--where", "commits[0].id=c1"],
    ],
)
def test_the_stack_path_through_athena_prints_what_the_local_path_prints(
    archive: Any, capsys: Any, extra: list[str]
) -> None:
    _, folder = archive
    _stack_with_outputs()
    duck = duckdb_athena(folder, "archive_db", "deliveries")
    sources = [extra[extra.index("--source") + 1]] if "--source" in extra else ["github", "stripe"]
    flt = _filter_of(extra)
    sql = search_sql(flt, "archive_db", "deliveries", sources)
    _queue_athena_answer(duck, sql)
    assert main([*S3_ARGS, *WINDOW, *extra]) == 0
    local = capsys.readouterr().out
    argv = ["archive", "search", "--region", "us-east-1", "--stack", STACK, *WINDOW, *extra]
    assert main(argv) == 0
    assert capsys.readouterr().out == local
    executions = athena_backends["123456789012"]["us-east-1"].executions.values()
    assert [(e.query, e.workgroup.name if e.workgroup else None) for e in executions] == [
        (sql, "archive-wg")
    ]


def _filter_of(extra: list[str]) -> ArchiveFilter:
    from webhook_pipeline.archive.predicate import parse_predicate

    def values(flag: str) -> tuple[str, ...]:
        return tuple(extra[i + 1] for i, a in enumerate(extra) if a == flag)

    prefix = values("--delivery-id-prefix")
    return ArchiveFilter(
        sources=values("--source"),
        start=parse_moment("--from", WINDOW[1]),
        end=parse_moment("--to", WINDOW[3]),
        event_types=values("--event-type"),
        outcomes=values("--outcome"),
        delivery_id_prefix=prefix[0] if prefix else None,
        where=tuple(parse_predicate(t) for t in values("--where")),
    )
