"""The replay run against in-memory queues: outcomes, dry run, failures, rate limit, time limit.

The fake DLQ behaves like moto's SQS: receives return visible messages oldest first, a released
message (visibility 0) is visible again at once.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from webhook_pipeline.envelope import Envelope, sha256_hex
from webhook_pipeline.errors import QueueOperationError
from webhook_pipeline.replay.ports import DlqMessage
from webhook_pipeline.replay.rate import RateLimiter
from webhook_pipeline.replay.report import MessageResult
from webhook_pipeline.replay.request import ReplayRequest
from webhook_pipeline.replay.run import MAX_IDLE_RECEIVES, replay

pytestmark = pytest.mark.unit


def make_envelope(delivery_id: str, source: str = "stripe", **extra: Any) -> Envelope:
    return Envelope(
        source=source,
        delivery_id=delivery_id,
        received_at=datetime(2024, 5, 1, 12, 0, tzinfo=UTC),
        event_type=extra.pop("event_type", "invoice.paid"),
        body_b64="e30=",
        body_size=2,
        body_sha256=sha256_hex(b"{}"),
        **extra,
    )


@dataclass
class FakeDlq:
    """In-memory DLQ: ``visible`` flags, receipt handles renewed on each receive."""

    bodies: dict[str, str] = field(default_factory=dict)
    visible: dict[str, bool] = field(default_factory=dict)
    handles: dict[str, str] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    fail_receive: bool = False
    _counter: itertools.count[int] = field(default_factory=itertools.count)

    def put(self, body: str) -> str:
        message_id = f"m{len(self.bodies)}"
        self.bodies[message_id] = body
        self.visible[message_id] = True
        return message_id

    def receive(self, max_messages: int, visibility_timeout: int) -> Sequence[DlqMessage]:
        self.calls.append(("receive", str(max_messages)))
        if self.fail_receive:
            raise QueueOperationError("receive failed")
        out = []
        for message_id, body in self.bodies.items():
            if len(out) == max_messages:
                break
            if self.visible[message_id]:
                self.visible[message_id] = False
                handle = f"{message_id}#{next(self._counter)}"
                self.handles[message_id] = handle
                out.append(DlqMessage(message_id, handle, body, receive_count=6))
        return out

    def _check(self, message: DlqMessage) -> None:
        if self.handles.get(message.message_id) != message.receipt_handle:
            raise QueueOperationError("stale receipt handle")

    def delete(self, message: DlqMessage) -> None:
        self.calls.append(("delete", message.message_id))
        self._check(message)
        del self.bodies[message.message_id]

    def change_visibility(self, message: DlqMessage, timeout_seconds: int) -> None:
        self.calls.append(("visibility", message.message_id))
        self._check(message)
        if timeout_seconds == 0:
            self.visible[message.message_id] = True

    def approximate_depth(self) -> int | None:
        return len(self.bodies)

    def all_visible(self) -> bool:
        return all(self.visible[m] for m in self.bodies)


@dataclass
class FakeMainQueue:
    sent: list[str] = field(default_factory=list)
    attributes: list[Mapping[str, Any]] = field(default_factory=list)
    fail_for: set[str] = field(default_factory=set)
    fail_all: bool = False

    def send(self, body: str, message_attributes: Mapping[str, Any]) -> None:
        delivery_id = Envelope.from_json(body).delivery_id
        if self.fail_all or delivery_id in self.fail_for:
            raise QueueOperationError(f"send of {delivery_id} failed")
        self.sent.append(body)
        self.attributes.append(message_attributes)

    def delivery_ids(self) -> list[str]:
        return [Envelope.from_json(b).delivery_id for b in self.sent]


class FakeClock:
    """A clock that only moves when slept on (or when told)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def fill(dlq: FakeDlq, count: int, source: str = "stripe", prefix: str = "evt") -> None:
    for i in range(count):
        dlq.put(make_envelope(f"{prefix}_{i}", source=source).to_json())


def test_replays_everything_and_empties_the_dlq() -> None:
    # Given 12 dead-lettered deliveries
    dlq, main = FakeDlq(), FakeMainQueue()
    fill(dlq, 12)
    # When replaying all
    report = replay(ReplayRequest(), dlq, main)
    # Then each is sent once, with replay_count + 1 and gate "replayed", then deleted
    assert report.to_dict() == {
        "examined": 12,
        "matched": 12,
        "replayed": 12,
        "skipped": 0,
        "failed": 0,
        "malformed": 0,
        "delete_failed": 0,
        "dry_run": False,
        "remaining": 0,
        "complete": True,
        "stopped": "drained",
    }
    assert sorted(main.delivery_ids()) == sorted(f"evt_{i}" for i in range(12))
    first = Envelope.from_json(main.sent[0])
    assert first.replay_count == 1
    assert first.gate == "replayed"
    original = make_envelope("evt_0")
    assert first.model_dump(exclude={"replay_count", "gate"}) == original.model_dump(
        exclude={"replay_count", "gate"}
    )
    assert dlq.bodies == {}


def test_receives_in_batches_of_at_most_ten() -> None:
    dlq, main = FakeDlq(), FakeMainQueue()
    fill(dlq, 25)
    replay(ReplayRequest(max_messages=23), dlq, main)
    sizes = [int(n) for op, n in dlq.calls if op == "receive"]
    assert sizes[:3] == [10, 10, 3]


def test_send_happens_before_delete() -> None:
    dlq, main = FakeDlq(), FakeMainQueue()
    fill(dlq, 1)
    order: list[str] = []
    original_send, original_delete = main.send, dlq.delete
    main.send = lambda body, attrs: (order.append("send"), original_send(body, attrs))[1]  # type: ignore[method-assign]
    dlq.delete = lambda message: (order.append("delete"), original_delete(message))[1]  # type: ignore[method-assign]
    replay(ReplayRequest(), dlq, main)
    assert order == ["send", "delete"]


def test_replay_count_increments_on_each_replay() -> None:
    dlq, main = FakeDlq(), FakeMainQueue()
    dlq.put(make_envelope("evt_1", replay_count=2, gate="replayed").to_json())
    replay(ReplayRequest(), dlq, main)
    assert Envelope.from_json(main.sent[0]).replay_count == 3


def test_message_attributes_are_forwarded() -> None:
    dlq, main = FakeDlq(), FakeMainQueue()
    attrs = {"source": {"DataType": "String", "StringValue": "stripe"}}

    class AttrDlq(FakeDlq):
        def receive(self, max_messages: int, visibility_timeout: int) -> Sequence[DlqMessage]:
            return [
                DlqMessage(m.message_id, m.receipt_handle, m.body, message_attributes=attrs)
                for m in super().receive(max_messages, visibility_timeout)
            ]

    dlq = AttrDlq()
    fill(dlq, 1)
    replay(ReplayRequest(), dlq, main)
    assert main.attributes == [attrs]


def test_dry_run_counts_lists_and_moves_nothing() -> None:
    # Given 3 matching and 2 non-matching deliveries
    dlq, main = FakeDlq(), FakeMainQueue()
    fill(dlq, 3, source="stripe")
    fill(dlq, 2, source="github", prefix="gh")
    # When dry-running a filtered replay
    request = ReplayRequest.parse({"dry_run": True, "filter": {"source": "stripe"}})
    report = replay(request, dlq, main)
    # Then nothing is sent or deleted, every message is visible again, the matches are listed
    assert (report.examined, report.matched, report.replayed, report.skipped) == (5, 3, 0, 2)
    assert report.dry_run is True
    assert main.sent == []
    assert len(dlq.bodies) == 5
    assert dlq.all_visible()
    assert [item["delivery_id"] for item in report.would_replay] == ["evt_0", "evt_1", "evt_2"]
    assert report.to_dict()["would_replay"][0]["source"] == "stripe"
    assert not any(op == "delete" for op, _ in dlq.calls)


def test_filtered_replay_moves_only_matching_messages_beyond_the_first_batches() -> None:
    # Given 15 non-matching deliveries ahead of 3 matching ones (released ones come back first)
    dlq, main = FakeDlq(), FakeMainQueue()
    fill(dlq, 15, source="github", prefix="gh")
    fill(dlq, 3, source="stripe")
    # When replaying source=stripe
    report = replay(ReplayRequest.parse({"filter": {"source": "stripe"}}), dlq, main)
    # Then the matching ones are found and moved, the others stay, visible, counted once
    assert sorted(main.delivery_ids()) == ["evt_0", "evt_1", "evt_2"]
    assert (report.examined, report.matched, report.replayed, report.skipped) == (18, 3, 3, 15)
    assert report.remaining == 15
    assert report.complete
    assert dlq.all_visible()


def test_non_matching_messages_are_released_at_once() -> None:
    dlq, main = FakeDlq(), FakeMainQueue()
    fill(dlq, 1, source="github", prefix="gh")
    fill(dlq, 1, source="stripe")
    results: list[MessageResult] = []
    replay(
        ReplayRequest.parse({"filter": {"source": "stripe"}}), dlq, main, on_message=results.append
    )
    # the release of gh_0 comes before the send of evt_0
    assert dlq.calls.index(("visibility", "m0")) < dlq.calls.index(("delete", "m1"))
    assert [r.outcome for r in results] == ["skipped", "replayed"]


def test_malformed_message_is_skipped_with_a_reason_and_left_in_the_dlq() -> None:
    dlq, main = FakeDlq(), FakeMainQueue()
    dlq.put("not json at all")
    fill(dlq, 1)
    results: list[MessageResult] = []
    report = replay(ReplayRequest(), dlq, main, on_message=results.append)
    assert (report.examined, report.replayed, report.skipped, report.malformed) == (2, 1, 1, 1)
    assert report.failed == 0
    assert dlq.bodies == {"m0": "not json at all"}
    assert dlq.all_visible()
    assert results[0].outcome == "malformed"
    assert results[0].reason is not None and "not a valid envelope" in results[0].reason


def test_send_failure_leaves_the_message_in_the_dlq_and_continues() -> None:
    # Given 3 deliveries, the send of the second one fails
    dlq, main = FakeDlq(), FakeMainQueue(fail_for={"evt_1"})
    fill(dlq, 3)
    # When replaying
    report = replay(ReplayRequest(), dlq, main)
    # Then the others move; the failed one stays in the DLQ, visible again, counted as failed
    assert (report.replayed, report.failed) == (2, 1)
    assert main.delivery_ids() == ["evt_0", "evt_2"]
    assert list(dlq.bodies) == ["m1"]
    assert dlq.all_visible()
    assert ("delete", "m1") not in dlq.calls


def test_consecutive_send_failures_stop_the_run() -> None:
    dlq, main = FakeDlq(), FakeMainQueue(fail_all=True)
    fill(dlq, 20)
    report = replay(ReplayRequest(), dlq, main, max_consecutive_failures=3)
    assert report.stopped == "send_failures"
    assert report.failed == 3
    assert not report.complete
    assert len(dlq.bodies) == 20
    assert dlq.all_visible()


def test_a_successful_send_resets_the_count_of_consecutive_failures() -> None:
    # Given failures separated by successes, never three in a row
    dlq, main = FakeDlq(), FakeMainQueue(fail_for={"evt_0", "evt_1", "evt_3", "evt_4"})
    fill(dlq, 6)
    # When replaying with a limit of three consecutive failures
    report = replay(ReplayRequest(), dlq, main, max_consecutive_failures=3)
    # Then the run is not stopped: four failures in all, at most two in a row
    assert report.stopped == "drained"
    assert (report.replayed, report.failed) == (2, 4)
    assert main.delivery_ids() == ["evt_2", "evt_5"]


def test_delete_failure_after_send_is_counted_and_harmless() -> None:
    class NoDelete(FakeDlq):
        def delete(self, message: DlqMessage) -> None:
            raise QueueOperationError("access denied")

    dlq, main = NoDelete(), FakeMainQueue()
    fill(dlq, 2)
    report = replay(ReplayRequest(), dlq, main)
    assert (report.replayed, report.delete_failed, report.failed) == (2, 2, 0)
    assert report.examined == 2  # not examined twice although the copies are still there


def test_max_messages_bounds_the_run_and_leaves_the_rest_visible() -> None:
    dlq, main = FakeDlq(), FakeMainQueue()
    fill(dlq, 12)
    report = replay(ReplayRequest(max_messages=5), dlq, main)
    assert (report.examined, report.replayed) == (5, 5)
    assert report.stopped == "max_messages"
    assert report.complete is False
    assert report.remaining == 7
    assert dlq.all_visible()


def test_receive_failure_reports_how_far_it_got() -> None:
    dlq, main = FakeDlq(fail_receive=True), FakeMainQueue()
    report = replay(ReplayRequest(), dlq, main)
    assert report.stopped == "receive_failed"
    assert report.error == "receive failed"
    assert report.to_dict()["error"] == "receive failed"


def test_receives_of_only_seen_messages_end_the_run() -> None:
    class Sticky(FakeDlq):
        """Returns the same visible message on every receive (hiding is ignored)."""

        def receive(self, max_messages: int, visibility_timeout: int) -> Sequence[DlqMessage]:
            self.calls.append(("receive", str(max_messages)))
            return [DlqMessage("m0", "h", self.bodies["m0"])]

        def change_visibility(self, message: DlqMessage, timeout_seconds: int) -> None:
            self.calls.append(("visibility", message.message_id))

    dlq, main = Sticky(), FakeMainQueue()
    dlq.put(make_envelope("gh", source="github").to_json())
    report = replay(ReplayRequest.parse({"filter": {"source": "stripe"}}), dlq, main)
    assert report.examined == 1
    assert report.stopped == "drained"
    assert sum(1 for op, _ in dlq.calls if op == "receive") == 1 + MAX_IDLE_RECEIVES


# ------------------------------------------------------------------------- rate limiting


def test_rate_limit_spaces_sends_counted_by_sleeps() -> None:
    # Given 10 deliveries and a limit of 4 per second on a fake clock
    dlq, clock = FakeDlq(), FakeClock()
    fill(dlq, 10)
    send_times: list[float] = []

    class TimedQueue(FakeMainQueue):
        def send(self, body: str, message_attributes: Mapping[str, Any]) -> None:
            send_times.append(clock())
            super().send(body, message_attributes)

    main = TimedQueue()
    # When replaying
    report = replay(ReplayRequest(rate_per_second=4), dlq, main, clock=clock, sleep=clock.sleep)
    # Then the first send is immediate and each later one waited for its token: 9 sleeps of 0.25 s
    assert report.replayed == 10
    assert len(clock.sleeps) == 9
    assert sum(clock.sleeps) == pytest.approx(9 * 0.25)
    gaps = [b - a for a, b in itertools.pairwise(send_times)]
    assert all(gap >= 0.25 - 1e-9 for gap in gaps)


def test_no_rate_limit_never_sleeps() -> None:
    dlq, main, clock = FakeDlq(), FakeMainQueue(), FakeClock()
    fill(dlq, 10)
    replay(ReplayRequest(), dlq, main, clock=clock, sleep=clock.sleep)
    assert clock.sleeps == []


def test_dry_run_is_not_rate_limited() -> None:
    dlq, main, clock = FakeDlq(), FakeMainQueue(), FakeClock()
    fill(dlq, 10)
    replay(
        ReplayRequest(rate_per_second=1, dry_run=True), dlq, main, clock=clock, sleep=clock.sleep
    )
    assert clock.sleeps == []


def test_skipped_messages_do_not_consume_tokens() -> None:
    dlq, main, clock = FakeDlq(), FakeMainQueue(), FakeClock()
    fill(dlq, 5, source="github", prefix="gh")
    fill(dlq, 2)
    request = ReplayRequest.parse({"rate_per_second": 2, "filter": {"source": "stripe"}})
    replay(request, dlq, main, clock=clock, sleep=clock.sleep)
    assert clock.sleeps == [pytest.approx(0.5)]


def test_rate_limiter_does_not_sleep_when_time_already_passed() -> None:
    clock = FakeClock()
    limiter = RateLimiter(2, clock, clock.sleep)
    assert limiter.acquire() == 0
    clock.now += 10  # slow work between sends
    assert limiter.acquire() == 0
    assert limiter.acquire() == pytest.approx(0.5)
    assert clock.sleeps == [pytest.approx(0.5)]


# ------------------------------------------------------------------------- time limit


def test_stops_before_the_callers_timeout_and_says_how_far_it_got() -> None:
    # Given a caller with 60 s left, each send taking 10 s (fake), a 25 s safety margin
    dlq, clock = FakeDlq(), FakeClock()
    fill(dlq, 10)
    deadline = clock.now + 60

    class SlowQueue(FakeMainQueue):
        def send(self, body: str, message_attributes: Mapping[str, Any]) -> None:
            clock.now += 10
            super().send(body, message_attributes)

    main = SlowQueue()
    report = replay(
        ReplayRequest(),
        dlq,
        main,
        remaining_time_ms=lambda: int((deadline - clock.now) * 1000),
        safety_margin_ms=25_000,
        clock=clock,
        sleep=clock.sleep,
    )
    # Then it sent while more than 25 s remained (at 60, 50, 40, 30 s) and stopped
    assert report.replayed == 4
    assert report.examined == 4
    assert report.stopped == "time_limit"
    assert report.complete is False
    assert report.remaining == 6
    assert dlq.all_visible()


def test_a_rate_limit_sleep_that_would_cross_the_margin_stops_the_run() -> None:
    dlq, main, clock = FakeDlq(), FakeMainQueue(), FakeClock()
    fill(dlq, 3)
    deadline = clock.now + 15
    report = replay(
        ReplayRequest(rate_per_second=0.1),  # one send per 10 s
        dlq,
        main,
        remaining_time_ms=lambda: int((deadline - clock.now) * 1000),
        safety_margin_ms=10_000,
        clock=clock,
        sleep=clock.sleep,
    )
    assert report.replayed == 1
    assert report.examined == 1
    assert clock.sleeps == []
    assert report.stopped == "time_limit"
    assert dlq.all_visible()


def test_no_time_left_at_start_touches_nothing() -> None:
    dlq, main = FakeDlq(), FakeMainQueue()
    fill(dlq, 3)
    report = replay(ReplayRequest(), dlq, main, remaining_time_ms=lambda: 5_000)
    assert report.examined == 0
    assert report.stopped == "time_limit"
    assert dlq.calls == []
