"""Replay from the archive (:func:`run_archive_replay`) against in-process moto: dry run counts,
redeliver only what has no record, reprocess generations, resume from the cursor, corrupt input
reported and skipped, a changed request refused."""

from __future__ import annotations

import gzip
from typing import Any

import boto3
import pytest
from webhook_pipeline.errors import InvalidReplayRequestError
from webhook_pipeline.replay.archive_job import CHUNK, ArchiveReplayTarget, run_archive_replay
from webhook_pipeline.replay.archive_request import ArchiveReplayRequest
from webhook_pipeline.replay.archive_state import JobStore, job_key

from tests.helpers import FakeContext, load_function
from tests.replay_archive_fixtures import (
    ARCHIVE_BUCKET,
    PAYLOAD_BUCKET,
    TABLE,
    WINDOW_END,
    WINDOW_START,
    ArchiveStack,
    body_bytes,
    body_of,
    make_stack,
    put_archive,
    put_delivery_record,
    put_raw_object,
    record,
)


@pytest.fixture
def stack(aws: None) -> ArchiveStack:
    return make_stack(
        {n: boto3.client(n, region_name="us-east-1") for n in ("s3", "dynamodb", "sqs")}
    )


def target(stack: ArchiveStack, inline: int = 150_000) -> ArchiveReplayTarget:
    return ArchiveReplayTarget(
        s3=stack.s3,
        dynamodb=stack.dynamodb,
        sqs=stack.sqs,
        archive_bucket=ARCHIVE_BUCKET,
        table=TABLE,
        queue_url=stack.queue_url,
        payload_bucket=PAYLOAD_BUCKET,
        inline_body_max_bytes=inline,
    )


def request(mode: str = "redeliver", **extra: Any) -> ArchiveReplayRequest:
    return ArchiveReplayRequest.parse(
        {"mode": mode, "start": WINDOW_START.isoformat(), "end": WINDOW_END.isoformat(), **extra}
    )


def archive_25(stack: ArchiveStack) -> list[str]:
    """25 deliveries in the window (each archived twice, once as a retry), one before and one
    after it, and a github delivery with the same id as a stripe one."""
    ids = [f"evt_{i:02d}" for i in range(25)]
    records = [record(d, i * 4) for i, d in enumerate(ids)]
    records += [record(d, i * 4, outcome="retry", archived_offset=0) for i, d in enumerate(ids)]
    records += [record("early", -1), record("late", 120)]
    put_archive(stack.s3, records)
    return ids


def state_keys(stack: ArchiveStack) -> list[str]:
    listed = stack.s3.list_objects_v2(Bucket=ARCHIVE_BUCKET, Prefix="replay-")
    return [o["Key"] for o in listed.get("Contents", [])]


def test_dry_run_counts_exactly_sends_nothing_writes_no_state(stack: ArchiveStack) -> None:
    ids = archive_25(stack)
    for d in ids[:7]:
        put_delivery_record(stack.dynamodb, "stripe", d, "applied")
    report = run_archive_replay(request(dry_run=True), target(stack))
    assert (report.total, report.examined, report.matched, report.sent) == (25, 25, 18, 0)
    assert dict(report.skipped) == {"already recorded": 7}
    assert [s["delivery_id"] for s in report.sample] == ids[7:]
    assert stack.drain() == []
    assert state_keys(stack) == []
    assert report.to_dict()["status"] == "complete"


def test_redeliver_sends_only_missing_records_once_even_when_run_twice(
    stack: ArchiveStack,
) -> None:
    ids = archive_25(stack)
    put_archive(stack.s3, [record("evt_03", 12, source="github")])  # same id, other source
    for d in ids[:10]:
        put_delivery_record(stack.dynamodb, "stripe", d, "applied")
    first = run_archive_replay(request(job="restore-1"), target(stack))
    sent = stack.drain()
    assert first.status == "complete"
    assert sorted((e.source, e.delivery_id) for e in sent) == sorted(
        [("stripe", d) for d in ids[10:]] + [("github", "evt_03")]
    )
    assert {e.gate for e in sent} == {"replayed"} and {e.replay_count for e in sent} == {1}
    assert all(e.reprocess is None for e in sent)
    assert all(body_bytes(e, stack.s3) == body_of(e.source, e.delivery_id) for e in sent)
    # the same job again: complete, nothing sent
    again = run_archive_replay(request(job="restore-1"), target(stack))
    assert (again.status, again.sent, stack.drain()) == ("complete", 0, [])
    # a new job after the processor recorded them: nothing sent
    for e in sent:
        put_delivery_record(stack.dynamodb, e.source, e.delivery_id, "applied")
    new = run_archive_replay(request(job="restore-2"), target(stack))
    assert (new.sent, dict(new.skipped), stack.drain()) == (0, {"already recorded": 26}, [])


def test_reprocess_keeps_its_generation_across_a_resume_and_a_new_job_gets_a_new_one(
    stack: ArchiveStack,
) -> None:
    ids = archive_25(stack)
    for d in ids[:20]:
        put_delivery_record(stack.dynamodb, "stripe", d, "applied")
    put_delivery_record(stack.dynamodb, "stripe", ids[20], "stale")
    chunks_left = iter([3, 2, 1, 0])  # remaining time: enough for two chunks, then none
    remaining = lambda: 20_000 if next(chunks_left) > 1 else 0  # noqa: E731
    first = run_archive_replay(
        request("reprocess", job="fix-1"), target(stack), remaining_time_ms=remaining
    )
    assert (first.status, first.cursor, first.sent) == ("incomplete", 2 * CHUNK, 20)
    resumed = run_archive_replay(request("reprocess", job="fix-1"), target(stack))
    assert (resumed.status, resumed.resumed_from, resumed.generation) == (
        "complete",
        2 * CHUNK,
        first.generation,
    )
    assert dict(resumed.skipped) == {"not recorded": 4, "stale": 1}
    sent = stack.drain()
    assert sorted(e.delivery_id for e in sent) == ids[:20]
    assert {e.reprocess.generation for e in sent if e.reprocess} == {first.generation}
    assert all(e.reprocess is not None and e.reprocess.job == "fix-1" for e in sent)
    other = run_archive_replay(request("reprocess", job="fix-2"), target(stack))
    assert other.generation is not None and first.generation is not None
    assert other.generation > first.generation
    assert {e.reprocess.generation for e in stack.drain() if e.reprocess} == {other.generation}
    state = JobStore(stack.s3, ARCHIVE_BUCKET).load("fix-1")
    assert state is not None
    assert (state.status, state.cursor, state.sent, state.skipped) == (
        "complete",
        25,
        20,
        {"not recorded": 4, "stale": 1},
    )


def test_corrupt_object_and_sha_mismatch_are_reported_by_id_and_skipped(
    stack: ArchiveStack,
) -> None:
    good = [record(f"ok_{i}", i) for i in range(3)]
    bad = record("tampered", 5).model_copy(update={"body": '{"id": "tampered", "x": 1}'})
    put_archive(stack.s3, [*good, bad])
    broken_key = put_raw_object(stack.s3, "stripe", 30, b"not gzip at all")
    half_line = put_raw_object(stack.s3, "stripe", 31, gzip.compress(b'{"source": "stripe"\n'))
    report = run_archive_replay(request(job="c-1"), target(stack))
    assert report.status == "complete"
    assert sorted(e.delivery_id for e in stack.drain()) == ["ok_0", "ok_1", "ok_2"]
    assert report.failed == [
        {
            "source": "stripe",
            "delivery_id": "tampered",
            "reason": "tampered: body does not match body_sha256",
        }
    ]
    assert sorted(p["key"] for p in report.corrupt_objects) == sorted([broken_key, half_line])


def test_a_changed_request_on_resume_is_refused(stack: ArchiveStack) -> None:
    archive_25(stack)
    run_archive_replay(request(job="j-1", max_deliveries=5), target(stack))
    with pytest.raises(InvalidReplayRequestError, match="another request"):
        run_archive_replay(request("reprocess", job="j-1", max_deliveries=5), target(stack))
    with pytest.raises(InvalidReplayRequestError, match="another request"):
        run_archive_replay(request(job="j-1", max_deliveries=6), target(stack))
    # the rate is not part of the request's identity: a resume may change it
    same = run_archive_replay(
        request(job="j-1", max_deliveries=5, rate_per_second=500.0), target(stack)
    )
    assert (same.status, same.sent) == ("complete", 0)
    assert len(stack.drain()) == 5


def test_a_large_body_travels_as_a_claim_check_with_its_exact_bytes(stack: ArchiveStack) -> None:
    big = body_of("stripe", "big", 5_000)
    put_archive(stack.s3, [record("big", 1, body=big), record("small", 2)])
    report = run_archive_replay(request(job="big-1"), target(stack, inline=1_000))
    sent = {e.delivery_id: e for e in stack.drain()}
    assert report.sent == 2
    assert sent["big"].body_ref is not None and sent["big"].body_b64 is None
    assert sent["big"].body_ref.key.startswith("bodies/stripe/")
    assert body_bytes(sent["big"], stack.s3) == big
    assert sent["small"].body_b64 is not None


def test_an_empty_window_says_so_and_writes_nothing(stack: ArchiveStack) -> None:
    put_archive(stack.s3, [record("early", -30)])
    report = run_archive_replay(request(job="e-1"), target(stack))
    assert (report.status, report.total, report.sent) == ("empty", 0, 0)
    assert state_keys(stack) == []


def test_the_cursor_is_checkpointed_after_each_chunk(stack: ArchiveStack) -> None:
    archive_25(stack)
    seen: list[tuple[int, int]] = []
    store = JobStore(stack.s3, ARCHIVE_BUCKET)

    def progress(report: Any) -> None:
        state = store.load("cp-1")
        assert state is not None
        seen.append((state.cursor, len(stack.drain())))

    run_archive_replay(request(job="cp-1"), target(stack), on_progress=progress)
    assert seen == [(10, 10), (20, 10), (25, 5)]
    state = store.load("cp-1")
    assert state is not None and state.candidates_key.startswith("replay-jobs/cp-1.")
    assert sorted(state_keys(stack)) == sorted([job_key("cp-1"), state.candidates_key])


def test_the_replay_function_stops_near_its_timeout_and_goes_on_when_invoked_again(
    stack: ArchiveStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = archive_25(stack)
    app = load_function(
        "replay",
        {
            "QUEUE_URL": stack.queue_url,
            "DLQ_URL": stack.queue_url,
            "ARCHIVE_BUCKET": ARCHIVE_BUCKET,
            "TABLE_NAME": TABLE,
            "PAYLOAD_BUCKET": PAYLOAD_BUCKET,
        },
        monkeypatch,
    )
    left = iter([20_000, 20_000, 9_000])  # the default margin is 10 s: two chunks, then stop
    event = {
        "from_archive": {
            "mode": "redeliver",
            "start": "2026-11-30T10:00:00Z",
            "end": "2026-11-30T12:00:00Z",
        }
    }
    first = app.lambda_handler(event, FakeContext(remaining_ms=lambda: next(left)))
    assert (first["status"], first["sent"], first["cursor"]) == ("incomplete", 20, 20)
    event["from_archive"]["job"] = first["job"]
    second = app.lambda_handler(event, FakeContext())
    assert (second["status"], second["sent"], second["resumed_from"]) == ("complete", 5, 20)
    assert sorted(e.delivery_id for e in stack.drain()) == ids
    with pytest.raises(InvalidReplayRequestError, match="mode: Field required"):
        app.lambda_handler({"from_archive": {"start": "2026-11-30T10:00:00Z"}}, FakeContext())
    # the DLQ request still works
    assert app.lambda_handler({"dry_run": True}, FakeContext())["examined"] == 0


def test_a_chunk_sqs_refuses_is_not_checkpointed_and_the_resume_sends_it(
    stack: ArchiveStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = archive_25(stack)
    original = stack.sqs.send_message_batch
    calls = {"n": 0}

    def second_call_fails(**kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("SQS unavailable")
        return original(**kwargs)

    monkeypatch.setattr(stack.sqs, "send_message_batch", second_call_fails)
    failed = run_archive_replay(request(job="refused-1"), target(stack))
    assert (failed.status, failed.cursor, failed.sent) == ("failed", CHUNK, CHUNK)
    assert "SQS unavailable" in (failed.error or "")
    state = JobStore(stack.s3, ARCHIVE_BUCKET).load("refused-1")
    assert state is not None and (state.cursor, state.status) == (CHUNK, "incomplete")
    resumed = run_archive_replay(request(job="refused-1"), target(stack))
    assert (resumed.status, resumed.resumed_from, resumed.sent) == ("complete", CHUNK, 15)
    assert sorted(e.delivery_id for e in stack.drain()) == ids


def test_a_resume_goes_on_over_the_candidates_the_job_started_with(stack: ArchiveStack) -> None:
    ids = archive_25(stack)
    for d in ids:
        put_delivery_record(stack.dynamodb, "stripe", d, "applied")
    left = iter([20_000, 0])  # one chunk, then out of time
    first = run_archive_replay(
        request("reprocess", job="frozen-1"),
        target(stack),
        remaining_time_ms=lambda: next(left),
    )
    assert (first.status, first.cursor) == ("incomplete", CHUNK)
    assert sorted(e.delivery_id for e in stack.drain()) == ids[:CHUNK]
    # the archive changes under the job: a delivery archived late sorts second in the window
    # (every later index moves by one), and the objects of the hour 11:00 are removed
    late = record("evt_00a", 0)
    put_delivery_record(stack.dynamodb, "stripe", "evt_00a", "applied")
    put_archive(stack.s3, [late])
    hour_11 = stack.s3.list_objects_v2(
        Bucket=ARCHIVE_BUCKET, Prefix="archive/source=stripe/hour=2026-11-30-11/"
    )["Contents"]
    for item in hour_11:
        stack.s3.delete_object(Bucket=ARCHIVE_BUCKET, Key=item["Key"])
    resumed = run_archive_replay(request("reprocess", job="frozen-1"), target(stack))
    assert (resumed.status, resumed.resumed_from, resumed.total) == ("complete", CHUNK, 25)
    assert resumed.generation == first.generation
    assert sorted(e.delivery_id for e in stack.drain()) == ids[CHUNK:15]  # 4 x 15 < 60 min
    assert [f["delivery_id"] for f in resumed.failed] == ids[15:]
    assert {f["reason"] for f in resumed.failed} == {"no longer in the archive"}


def test_a_second_run_of_one_job_at_once_stops_at_its_checkpoint(stack: ArchiveStack) -> None:
    archive_25(stack)
    other = JobStore(stack.s3, ARCHIVE_BUCKET)
    chunks = {"n": 0}

    def another_run_checkpoints(report: Any) -> None:
        chunks["n"] += 1
        if chunks["n"] == 1:  # another run of the job reads and writes the state meanwhile
            state = other.load("twice-1")
            assert state is not None
            other.save(state.model_copy(update={"updated_at": "2026-12-01T00:00:00+00:00"}))

    report = run_archive_replay(
        request(job="twice-1"), target(stack), on_progress=another_run_checkpoints
    )
    assert report.status == "failed"
    assert "another run of this job wrote its state" in (report.error or "")
    assert (report.cursor, report.sent) == (CHUNK, 2 * CHUNK)  # stopped at its next checkpoint
