"""Processor domain: outcomes, ordering within a batch, body integrity, hooks (no sockets)."""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from webhook_pipeline.envelope import BodyPointer, Envelope
from webhook_pipeline.errors import (
    ConfigurationError,
    PayloadIntegrityError,
    PayloadUnavailableError,
    StoreBugError,
    TransientError,
)
from webhook_pipeline.hooks import HookEvent, HookRegistry, load_hooks_module
from webhook_pipeline.process.bodies import load_body
from webhook_pipeline.process.model import (
    DeliveryRecord,
    FailureNote,
    HookState,
    Message,
    Outcome,
    RecordResult,
    StoreResult,
    attempt_token,
)
from webhook_pipeline.process.planning import plan
from webhook_pipeline.process.service import ProcessorService
from webhook_pipeline.settings import ProcessorSettings

from tests.helpers import envelope_json

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 15, 10, 0, tzinfo=UTC)


def msg(mid: str, body: str, receive_count: int = 1) -> Message:
    return Message(message_id=mid, body=body, receive_count=receive_count)


@dataclass
class MemoryStore:
    """The DeliveryStore contract in memory: at most once per delivery; no going back."""

    deliveries: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    watermarks: dict[tuple[str, str], int] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    fail_with: dict[str, Exception] = field(default_factory=dict)
    failures: dict[str, FailureNote] = field(default_factory=dict)
    effects: list[Any] = field(default_factory=list)

    def record(self, delivery: DeliveryRecord) -> StoreResult:
        self.calls.append(f"record {delivery.delivery_id}")
        if delivery.delivery_id in self.fail_with:
            raise self.fail_with[delivery.delivery_id]
        key = (delivery.source, delivery.delivery_id)
        if key in self.deliveries:
            stored = self.deliveries[key]
            return StoreResult(
                Outcome.DUPLICATE,
                hook_state=stored.get("hook_state"),
                stored_outcome=stored["outcome"],
            )
        if delivery.resource_key is not None:
            rkey = (delivery.source, delivery.resource_key)
            current = self.watermarks.get(rkey)
            assert delivery.sequence is not None
            if current is not None and current > delivery.sequence:
                self.deliveries[key] = {"outcome": Outcome.STALE}
                return StoreResult(Outcome.STALE, watermark=current)
            self.watermarks[rkey] = delivery.sequence
        state = HookState.PENDING if delivery.hook_pending else None
        self.deliveries[key] = {"outcome": Outcome.APPLIED, "hook_state": state}
        return StoreResult(Outcome.APPLIED, hook_state=state)

    def mark_hook_done(self, source: str, delivery_id: str, effects: Any = ()) -> bool:
        self.calls.append(f"hook_done {delivery_id}")
        stored = self.deliveries[(source, delivery_id)]
        if effects and stored["hook_state"] is HookState.DONE:
            return False
        stored["hook_state"] = HookState.DONE
        self.effects.extend(effects)
        return True

    def record_failure(self, note: FailureNote) -> None:
        self.calls.append(f"failure {note.message_id}")
        if "failure-note" in self.fail_with:
            raise self.fail_with["failure-note"]
        self.failures[note.message_id] = note


class MemoryPayloads:
    def __init__(self, objects: dict[str, bytes] | None = None, error: Exception | None = None):
        self.objects = objects or {}
        self.error = error

    def get(self, pointer: BodyPointer) -> bytes:
        if self.error:
            raise self.error
        if pointer.key not in self.objects:
            raise PayloadIntegrityError("missing")
        return self.objects[pointer.key]


def make_service(
    store: MemoryStore | None = None,
    hooks: HookRegistry | None = None,
    payloads: MemoryPayloads | None = None,
    executor: ThreadPoolExecutor | None = None,
) -> ProcessorService:
    return ProcessorService(
        store=store or MemoryStore(),
        payloads=payloads or MemoryPayloads(),
        hooks=hooks or HookRegistry(),
        executor=executor,
        retention=timedelta(days=7),
        clock=lambda: NOW,
    )


def process_one(service: ProcessorService, message: Message) -> RecordResult:
    """``message`` through the entry point the handler calls, as a batch of one."""
    return service.process_batch([message])[message.message_id]


# -- ordering -----------------------------------------------------------------------------------


def test_plan_groups_by_resource_and_sorts_by_sequence() -> None:
    # Given records for two resources, one of them out of order, and one without a resource
    messages = [
        msg("m3", envelope_json("evt_3", seq=3)),
        msg("m2", envelope_json("evt_2", seq=2)),
        msg("x1", envelope_json("evt_x", resource="cus_2", seq=9)),
        msg("m4", envelope_json("evt_4", seq=4)),
        msg("n1", envelope_json("evt_n", resource=None)),
    ]
    # When
    malformed, groups = plan(messages)
    # Then
    assert malformed == []
    assert [[m.message_id for m, _ in g] for g in groups] == [["m2", "m3", "m4"], ["x1"], ["n1"]]


def test_plan_keeps_copies_of_one_delivery_in_one_group_in_arrival_order() -> None:
    body = envelope_json("evt_dup", resource=None)
    malformed, groups = plan([msg("a", body), msg("b", body)])
    assert malformed == []
    assert [[m.message_id for m, _ in g] for g in groups] == [["a", "b"]]


def test_plan_separates_malformed_with_reason() -> None:
    malformed, groups = plan([msg("bad", '{"source":"stripe"}'), msg("junk", "not json")])
    assert [r.message_id for r in malformed] == ["bad", "junk"]
    assert all(r.outcome is Outcome.MALFORMED and r.reason for r in malformed)
    assert groups == []


def test_batch_out_of_order_within_one_batch_is_applied_in_order() -> None:
    store = MemoryStore()
    service = make_service(store, executor=ThreadPoolExecutor(4))
    results = service.process_batch(
        [msg("m3", envelope_json("evt_3", seq=3)), msg("m2", envelope_json("evt_2", seq=2))]
    )
    assert {k: r.outcome for k, r in results.items()} == {
        "m3": Outcome.APPLIED,
        "m2": Outcome.APPLIED,
    }
    assert store.calls == ["record evt_2", "record evt_3"]
    assert store.watermarks[("stripe", "cus_1")] == 3


def test_sequence_3_2_4_across_batches_is_applied_stale_applied() -> None:
    store = MemoryStore()
    service = make_service(store)
    outcomes = [
        service.process_batch([msg(f"m{s}", envelope_json(f"evt_{s}", seq=s))])[f"m{s}"].outcome
        for s in (3, 2, 4)
    ]
    assert outcomes == [Outcome.APPLIED, Outcome.STALE, Outcome.APPLIED]
    assert store.watermarks[("stripe", "cus_1")] == 4


def test_equal_sequence_from_another_delivery_is_applied_and_the_watermark_stays() -> None:
    store = MemoryStore()
    service = make_service(store)
    first = process_one(service, msg("a", envelope_json("evt_a", seq=5)))
    second = process_one(service, msg("b", envelope_json("evt_b", seq=5)))
    older = process_one(service, msg("c", envelope_json("evt_c", seq=4)))
    assert (first.outcome, second.outcome, older.outcome) == (
        Outcome.APPLIED,
        Outcome.APPLIED,
        Outcome.STALE,
    )
    assert store.watermarks[("stripe", "cus_1")] == 5


def test_same_delivery_twice_in_one_batch_is_applied_then_duplicate() -> None:
    body = envelope_json("evt_dup")
    results = make_service(executor=ThreadPoolExecutor(4)).process_batch(
        [msg("a", body), msg("b", body)]
    )
    assert (results["a"].outcome, results["b"].outcome) == (Outcome.APPLIED, Outcome.DUPLICATE)


# -- record fields --------------------------------------------------------------------------------


def test_record_carries_ttl_from_retention_and_attempt_token() -> None:
    seen: list[DeliveryRecord] = []

    class Spy(MemoryStore):
        def record(self, delivery: DeliveryRecord) -> StoreResult:
            seen.append(delivery)
            return super().record(delivery)

    process_one(make_service(Spy()), msg("m1", envelope_json("evt_1"), receive_count=2))
    (record,) = seen
    assert record.expires_at == int((NOW + timedelta(days=7)).timestamp())
    assert record.attempt_token == attempt_token(msg("m1", "", receive_count=2))
    assert len(record.attempt_token) == 36
    assert record.attempt_token != attempt_token(msg("m1", "", receive_count=3))


# -- failures -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (TransientError("throttled"), Outcome.RETRY),
        (StoreBugError("ValidationException"), Outcome.BUG),
    ],
)
def test_store_errors_map_to_outcomes(error: Exception, outcome: Outcome) -> None:
    store = MemoryStore(fail_with={"evt_1": error})
    result = process_one(make_service(store), msg("m1", envelope_json("evt_1")))
    assert result.outcome is outcome
    assert not result.acknowledged
    assert result.error is error


def test_one_failing_record_does_not_fail_the_others() -> None:
    store = MemoryStore(fail_with={"evt_b": TransientError("ThrottlingException")})
    results = make_service(store, executor=ThreadPoolExecutor(4)).process_batch(
        [
            msg("a", envelope_json("evt_a", resource="r_a")),
            msg("b", envelope_json("evt_b", resource="r_b")),
            msg("c", envelope_json("evt_c", resource="r_c")),
        ]
    )
    assert [k for k, r in results.items() if not r.acknowledged] == ["b"]


# -- body integrity -------------------------------------------------------------------------------


def test_inline_body_is_decoded_and_checked() -> None:
    env = Envelope.from_json(envelope_json("evt_1", body=b'{"a":1.50}'))
    assert load_body(env, MemoryPayloads()) == b'{"a":1.50}'


@pytest.mark.parametrize(
    "over",
    [
        {"body_size": 3},
        {"body_sha256": "0" * 64},
        {"body_b64": "!!!not-base64!!!"},
    ],
)
def test_inline_body_mismatch_is_malformed(over: dict[str, Any]) -> None:
    result = process_one(make_service(), msg("m1", envelope_json("evt_1", **over)))
    assert result.outcome is Outcome.MALFORMED
    assert result.reason


def _claim_check_envelope(raw: bytes, **over: Any) -> str:
    data = json.loads(envelope_json("evt_big"))
    data.pop("body_b64")
    data.update(
        body_ref={"bucket": "payloads", "key": "bodies/stripe/evt_big"},
        body_size=len(raw),
        body_sha256=hashlib.sha256(raw).hexdigest(),
    )
    data.update(over)
    return Envelope.model_validate(data).to_json()


def test_claim_check_body_is_fetched_and_checked() -> None:
    raw = b"x" * 300_000
    seen: list[bytes] = []
    hooks = HookRegistry()
    hooks.register("stripe", None, lambda event: seen.append(event.body))
    service = make_service(hooks=hooks, payloads=MemoryPayloads({"bodies/stripe/evt_big": raw}))
    result = process_one(service, msg("m1", _claim_check_envelope(raw)))
    assert result.outcome is Outcome.APPLIED
    assert seen == [raw]


def test_claim_check_body_altered_in_s3_is_malformed() -> None:
    raw = b"x" * 1000
    payloads = MemoryPayloads({"bodies/stripe/evt_big": raw[:-1] + b"y"})
    result = process_one(make_service(payloads=payloads), msg("m1", _claim_check_envelope(raw)))
    assert result.outcome is Outcome.MALFORMED
    assert "sha256" in (result.reason or "")


def test_claim_check_object_missing_is_malformed_and_s3_outage_is_retry() -> None:
    raw = b"x" * 10
    missing = process_one(make_service(), msg("m1", _claim_check_envelope(raw)))
    outage = process_one(
        make_service(payloads=MemoryPayloads(error=PayloadUnavailableError("SlowDown"))),
        msg("m1", _claim_check_envelope(raw)),
    )
    assert (missing.outcome, outage.outcome) == (Outcome.MALFORMED, Outcome.RETRY)


# -- hooks ----------------------------------------------------------------------------------------


def test_hook_runs_after_apply_with_the_verified_event() -> None:
    events: list[HookEvent] = []
    hooks = HookRegistry()
    hooks.register("stripe", "customer.updated", events.append)
    store = MemoryStore()
    result = process_one(make_service(store, hooks), msg("m1", envelope_json("evt_1", seq=7)))
    assert (result.outcome, result.hook) == (Outcome.APPLIED, "ran")
    (event,) = events
    assert (event.idempotency_key, event.resource_key, event.sequence) == (
        "stripe:evt_1",
        "cus_1",
        7,
    )
    assert event.json() == {"id": "evt_1"}
    assert store.calls == ["record evt_1", "hook_done evt_1"]


def test_hook_not_run_for_stale_or_completed_duplicate() -> None:
    calls: list[str] = []
    hooks = HookRegistry()
    hooks.register("stripe", None, lambda e: calls.append(e.delivery_id))
    service = make_service(MemoryStore(), hooks)
    process_one(service, msg("a", envelope_json("evt_a", seq=5)))
    stale = process_one(service, msg("b", envelope_json("evt_b", seq=4)))
    dup = process_one(service, msg("c", envelope_json("evt_a", seq=5)))
    assert calls == ["evt_a"]
    assert (stale.outcome, stale.hook, dup.outcome, dup.hook) == (
        Outcome.STALE,
        None,
        Outcome.DUPLICATE,
        None,
    )


def test_hook_failure_is_retry_and_redelivery_runs_only_the_hook() -> None:
    # Given a hook that fails once
    attempts: list[str] = []

    def flaky(event: HookEvent) -> None:
        attempts.append(event.delivery_id)
        if len(attempts) == 1:
            raise RuntimeError("downstream 503")

    hooks = HookRegistry()
    hooks.register("stripe", "customer.updated", flaky)
    store = MemoryStore()
    service = make_service(store, hooks)
    # When the delivery is processed, then redelivered
    first = process_one(service, msg("m1", envelope_json("evt_1", seq=3)))
    second = process_one(service, msg("m1", envelope_json("evt_1", seq=3), receive_count=2))
    # Then the first is a retry, the second runs the hook only (no second apply)
    assert (first.outcome, first.hook) == (Outcome.RETRY, "failed")
    assert "downstream 503" in (first.reason or "")
    assert (second.outcome, second.hook) == (Outcome.DUPLICATE, "ran")
    assert attempts == ["evt_1", "evt_1"]
    assert store.deliveries[("stripe", "evt_1")] == {
        "outcome": Outcome.APPLIED,
        "hook_state": HookState.DONE,
    }
    assert store.watermarks == {("stripe", "cus_1"): 3}


def test_failures_retries_do_not_fix_are_noted_by_message_id_and_transient_ones_are_not() -> None:
    # Given a batch with a malformed message, a rejected write, a failing hook and a throttle
    def failing(event: HookEvent) -> None:
        raise RuntimeError("crm down")

    hooks = HookRegistry()
    hooks.register("stripe", "invoice.paid", failing)
    store = MemoryStore(
        fail_with={
            "evt_bug": StoreBugError("ValidationException"),
            "evt_slow": TransientError("ThrottlingException"),
        }
    )
    service = make_service(store, hooks)
    batch = [
        msg("m-bad", "not an envelope", receive_count=3),
        msg("m-bug", envelope_json("evt_bug", resource="cus_b")),
        msg("m-hook", envelope_json("evt_hook", resource="cus_h", event_type="invoice.paid")),
        msg("m-slow", envelope_json("evt_slow", resource="cus_s")),
        msg("m-ok", envelope_json("evt_ok", resource="cus_o")),
    ]
    # When it is processed
    results = service.process_batch(batch)
    # Then exactly the three non-transient failures carry a note, with their reasons
    assert set(store.failures) == {"m-bad", "m-bug", "m-hook"}
    bad, bug, hook = store.failures["m-bad"], store.failures["m-bug"], store.failures["m-hook"]
    assert (bad.outcome, bad.receive_count, bad.source, bad.delivery_id) == (
        Outcome.MALFORMED,
        3,
        None,
        None,
    )
    assert "not a valid envelope" in bad.reason
    assert (bug.outcome, bug.delivery_id) == (Outcome.BUG, "evt_bug")
    assert "ValidationException" in bug.reason
    assert (hook.outcome, hook.source) == (Outcome.RETRY, "stripe")
    assert "crm down" in hook.reason
    assert bad.failed_at == NOW
    assert results["m-slow"].outcome is Outcome.RETRY
    assert results["m-ok"].outcome is Outcome.APPLIED


def test_a_failure_note_that_cannot_be_written_changes_no_outcome() -> None:
    store = MemoryStore(fail_with={"failure-note": TransientError("ThrottlingException")})
    service = make_service(store)
    results = service.process_batch(
        [msg("m-bad", "garbage"), msg("m-ok", envelope_json("evt_ok", resource="cus_o"))]
    )
    assert results["m-bad"].outcome is Outcome.MALFORMED
    assert results["m-ok"].outcome is Outcome.APPLIED
    assert store.failures == {}


def test_hook_registry_exact_event_type_wins_and_rejects_double_registration() -> None:
    hooks = HookRegistry()

    def specific(e: HookEvent) -> None: ...

    def catch_all(e: HookEvent) -> None: ...

    hooks.hook("stripe", "customer.updated")(specific)
    hooks.hook("stripe")(catch_all)
    assert hooks.find("stripe", "customer.updated") is specific
    assert hooks.find("stripe", "invoice.paid") is catch_all
    assert hooks.find("stripe", None) is catch_all
    assert hooks.find("github", "push") is None
    with pytest.raises(ConfigurationError):
        hooks.register("stripe", "*", catch_all)


def test_hook_for_every_source_is_the_last_resort() -> None:
    hooks = HookRegistry()

    def everything(e: HookEvent) -> None: ...

    def github_only(e: HookEvent) -> None: ...

    hooks.hook("*")(everything)
    hooks.hook("github")(github_only)
    assert hooks.find("stripe", "customer.updated") is everything
    assert hooks.find("stripe", None) is everything
    assert hooks.find("github", "push") is github_only
    with pytest.raises(ConfigurationError, match="every event type"):
        hooks.register("*", "push", everything)


def test_unimportable_hooks_module_fails_loudly() -> None:
    load_hooks_module(None)
    with pytest.raises(ConfigurationError, match="no_such_hooks_module"):
        load_hooks_module("no_such_hooks_module")


# -- settings ------------------------------------------------------------------------------------


def test_settings_require_table_and_bucket(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TABLE_NAME", raising=False)
    monkeypatch.setenv("PAYLOAD_BUCKET", "payloads")
    # the error names the environment variable an operator sets, not the field
    with pytest.raises(ConfigurationError, match="variable 'TABLE_NAME': Field required"):
        ProcessorSettings.load()


def test_settings_defaults_and_botocore_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TABLE_NAME", "deliveries")
    monkeypatch.setenv("PAYLOAD_BUCKET", "payloads")
    monkeypatch.setenv("MAX_WORKERS", "16")
    monkeypatch.delenv("DELIVERY_RETENTION_DAYS", raising=False)
    settings = ProcessorSettings.load()
    config = settings.botocore_config()
    assert (settings.delivery_retention_days, settings.max_workers) == (30, 16)
    assert config.retries == {"mode": "standard", "total_max_attempts": 3}
    assert (config.connect_timeout, config.read_timeout, config.max_pool_connections) == (
        2.0,
        5.0,
        16,
    )


@pytest.mark.parametrize(
    ("name", "value"), [("DELIVERY_RETENTION_DAYS", "0"), ("MAX_WORKERS", "x")]
)
def test_settings_reject_invalid_tuning(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv("TABLE_NAME", "deliveries")
    monkeypatch.setenv("PAYLOAD_BUCKET", "payloads")
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError):
        ProcessorSettings.load()
