"""The provider model against the real ingest handler (real Redis, moto): identity and order come
only from what the signature covered (I8), batched deliveries, per-provider TTLs and
acknowledgements, statuses a sender must never get, and the handshake plane.

The three attacks of the provider-model issue are here with their exact inputs (cases C11-C13);
tests/e2e/test_provider_model_local_stack.py repeats them over real HTTP.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore.client
import pytest
import redis
from botocore.exceptions import ClientError
from webhook_pipeline.errors import ConfigurationError
from webhook_pipeline.ingest.claims import gate_key
from webhook_pipeline_ops.simulator.deliveries import (
    dev_secret_value,
    example_sources,
    http_api_event,
    signed_delivery,
)

from tests.helpers import metric_total
from tests.integration.ingest_harness import SECRETS_PREFIX, IngestHarness
from tests.provider_fixtures import write_provider_module

pytestmark = pytest.mark.integration

SOURCES = example_sources()


def answer(harness: IngestHarness, event: dict[str, Any]) -> tuple[int, Any]:
    response = harness.invoke(event)
    body = response["body"]
    try:
        return response["statusCode"], json.loads(body)
    except ValueError:
        return response["statusCode"], body


def sources_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "sources.toml"
    path.write_text(text)
    return str(path)


# -- attack 1 (C11): an unsigned id header of the other family --------------------------------


def svix_delivery(**extra: str) -> dict[str, Any]:
    """A genuine Standard Webhooks delivery signed in the svix-* family (Svix, Clerk, Resend)."""
    source = SOURCES["standard-webhooks"]
    d = signed_delivery(source, delivery_id="msg_A")
    headers = {k.replace("webhook-", "svix-"): v for k, v in d.headers.items()}
    return http_api_event(type(d)(d.source, "msg_A", d.body, headers | extra))


def test_c11_other_family_id_header_never_makes_a_new_delivery(ingest: IngestHarness) -> None:
    assert answer(ingest, svix_delivery()) == (202, {"status": "accepted", "delivery_id": "msg_A"})
    for _ in range(3):  # again and again within the 300 s window
        code, body = answer(ingest, svix_delivery(**{"webhook-id": "anything-new"}))
        assert (code, body["reason"]) == (401, "signature_mismatch")
    assert answer(ingest, svix_delivery())[1]["status"] == "duplicate"
    assert [e["delivery_id"] for e in ingest.envelopes()] == ["msg_A"]


def test_an_unsigned_timestamp_header_of_the_other_family_that_disagrees_is_401(
    ingest: IngestHarness,
) -> None:
    """The svix-signed delivery with a ``webhook-timestamp`` of another value (still fresh)
    is refused; with the signed value it is accepted."""
    event = svix_delivery()
    signed_ts = event["headers"]["svix-timestamp"]
    event["headers"]["webhook-timestamp"] = str(int(signed_ts) - 60)
    code, body = answer(ingest, event)
    assert (code, body.get("reason")) == (401, "signature_mismatch"), body
    assert ingest.messages() == []
    event["headers"]["webhook-timestamp"] = signed_ts
    assert answer(ingest, event) == (202, {"status": "accepted", "delivery_id": "msg_A"})


def test_c11_a_source_may_not_read_a_signed_id_elsewhere(make_ingest, tmp_path: Path) -> None:
    path = sources_file(
        tmp_path,
        '[sources.sw]\nprovider = "standard-webhooks"\ndelivery_id = { header = "x-other-id" }\n',
    )
    with pytest.raises(ConfigurationError, match="signs the delivery id"):
        make_ingest(SOURCES_FILE=path)


def test_a_body_path_indexed_one_past_the_end_of_a_list_reads_as_absent_not_a_500(
    make_ingest, tmp_path: Path
) -> None:
    path = sources_file(
        tmp_path,
        '[sources.stripe]\nprovider = "stripe"\nevent_type = { body = "items.3.type" }\n'
        'resource_key = { body = "items.3.id" }\n'
        'sequence = { body = "items.3.version", format = "int" }\n',
    )
    harness = make_ingest(SOURCES_FILE=path)
    stripe = example_sources(path)["stripe"]
    items = [{"id": f"item_{i}", "type": f"type_{i}", "version": i} for i in range(4)]
    for delivery_id, listed in (("evt_three", items[:3]), ("evt_four", items)):
        body = json.dumps({"id": delivery_id, "object": "event", "items": listed}).encode()
        delivery = signed_delivery(stripe, delivery_id=delivery_id, body=body)
        assert answer(harness, http_api_event(delivery)) == (
            202,
            {"status": "accepted", "delivery_id": delivery_id},
        )
    read = [
        (e.get("event_type"), e.get("resource_key"), e.get("sequence")) for e in harness.envelopes()
    ]
    assert read == [(None, None, None), ("type_3", "item_3", 3)]


# -- attack 2 (C12): the body parser chosen by an unsigned Content-Type -------------------------


def test_c12_shopify_body_is_json_whatever_content_type_says(ingest: IngestHarness) -> None:
    shopify = SOURCES["shopify"]
    old = signed_delivery(shopify, delivery_id="wh-1", resource="o1", sequence=1_700_000_000)
    assert answer(ingest, http_api_event(old))[0] == 202
    # The captured body resent under a fresh id with a form Content-Type.
    replay = signed_delivery(
        shopify,
        delivery_id="wh-2",
        body=old.body,
        extra_headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert answer(ingest, http_api_event(replay))[0] == 202
    first, second = ingest.envelopes()
    # Both carry the ordering fields read from the JSON body: the processor records the
    # second as stale (tests/e2e shows it), never as applied without a sequence.
    for envelope in (first, second):
        assert envelope["resource_key"] == "gid://shopify/Order/o1"
        assert envelope["sequence"] == 1_700_000_000 * 1_000_000


def test_c12_slack_user_text_never_becomes_a_delivery_id(ingest: IngestHarness) -> None:
    body = json.dumps(
        {
            "type": "event_callback",
            "event_id": "EvREAL",
            "event": {"type": "message", "text": "hi&event_id=EvX&type=x"},
        }
    ).encode()
    d = signed_delivery(
        SOURCES["slack"],
        body=body,
        extra_headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert answer(ingest, http_api_event(d)) == (
        202,
        {"status": "accepted", "delivery_id": "EvREAL"},
    )


def test_a_body_that_is_not_the_declared_format_is_400_and_touches_nothing(
    ingest: IngestHarness, redis_url: str
) -> None:
    d = signed_delivery(SOURCES["shopify"], body=b"id=1&updated_at=2020-01-01T00:00:00Z")
    code, body = answer(ingest, http_api_event(d))
    assert (code, body["reason"]) == (400, "body_not_json")
    assert redis.Redis.from_url(redis_url).keys("*") == [] and ingest.messages() == []


# -- attack 3 (C13): generic HMAC without a signed id; one id, two bodies ----------------------

UNSIGNED_GENERIC = """
[sources.unsigned]
provider = "generic-hmac"
secret = "generic-hmac"
delivery_id = { header = "X-Delivery-Id" }
event_type = { body = "type" }

[sources.unsigned.options]
header = "X-Signature"
prefix = "sha256="
timestamp_header = "X-Timestamp"
signed_template = "{timestamp}.{body}"
"""


def test_c13_unsigned_id_loads_loudly_and_one_id_with_two_bodies_is_counted(
    make_ingest,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    log_lines: list[dict[str, Any]],
) -> None:
    path = sources_file(tmp_path, UNSIGNED_GENERIC)
    harness = make_ingest(SOURCES_FILE=path)
    warning = next(x for x in log_lines if "signature does not cover" in x["message"])
    assert warning["level"] == "WARNING"
    assert warning["source"] == "unsigned" and warning["unsigned_fields"] == ["delivery_id"]
    source = example_sources(path)["unsigned"]
    captured = signed_delivery(source, delivery_id="n-1", body=b'{"type":"a","n":1}')
    real = signed_delivery(source, delivery_id="n-2", body=b'{"type":"a","n":2}')
    # The attacker resends the captured body under the sender's next id first...
    forged = signed_delivery(source, delivery_id="n-2", body=captured.body)
    assert answer(harness, http_api_event(forged))[0] == 202
    capsys.readouterr()
    # ...so the real delivery is a duplicate for the sender, but it does not go unnoticed.
    assert answer(harness, http_api_event(real)) == (
        200,
        {"status": "duplicate", "delivery_id": "n-2"},
    )
    out = capsys.readouterr().out
    assert metric_total(out, "DuplicateBodyMismatch") == 1
    line = next(x for x in log_lines if "different body" in x["message"])
    assert line["level"] == "WARNING"
    assert line["stored_sha256"] == hashlib.sha256(captured.body).hexdigest()
    assert line["received_sha256"] == hashlib.sha256(real.body).hexdigest()
    logged = out + " ".join(str(v) for line in log_lines for v in line.values())
    assert '"n":2' not in logged and '"n":1' not in logged
    # An identical duplicate is not a mismatch.
    assert answer(harness, http_api_event(forged))[0] == 200
    assert metric_total(capsys.readouterr().out, "DuplicateBodyMismatch") == 0


def test_c13_require_signed_id_refuses_the_source(make_ingest, tmp_path: Path) -> None:
    text = UNSIGNED_GENERIC.replace(
        'secret = "generic-hmac"', 'secret = "generic-hmac"\nrequire_signed_id = true'
    )
    with pytest.raises(ConfigurationError, match="require_signed_id"):
        make_ingest(SOURCES_FILE=sources_file(tmp_path, text))


def test_signed_generic_id_refuses_ids_holding_a_template_separator(ingest: IngestHarness) -> None:
    # {delivery_id}.{timestamp}.{body}: id "ord.1" could be read as "ord" + "1..." otherwise.
    d = signed_delivery(SOURCES["generic-hmac"], delivery_id="ord.1")
    code, body = answer(ingest, http_api_event(d))
    assert (code, body["reason"]) == (401, "signature_malformed")


# -- batched deliveries -------------------------------------------------------------------------


@pytest.fixture
def batch_ingest(make_ingest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> IngestHarness:
    module = write_provider_module(tmp_path / "mods", "batchy_provider", "batchy", batch=True)
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    boto3.client("secretsmanager").create_secret(
        Name=f"{SECRETS_PREFIX}batchy", SecretString="throwaway-secret"
    )
    path = sources_file(tmp_path, '[sources.batchy]\nprovider = "batchy"\n')
    return make_ingest(SOURCES_FILE=path, PROVIDER_MODULES=module)


def batch_event(events: list[dict[str, Any]]) -> dict[str, Any]:
    from webhook_pipeline_ops.simulator.deliveries import SampleDelivery

    body = json.dumps(events, separators=(",", ":")).encode() + b"\r\n"
    digest = __import__("hmac").new(b"throwaway-secret", body, "sha256").hexdigest()
    headers = {"content-type": "application/json", "X-Test-Signature": digest}
    return http_api_event(SampleDelivery("batchy", "batch", body, headers))


def events(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        {"sg_event_id": f"sg-{i}", "event": "delivered", "resource": f"m{i % 3}", "timestamp": i}
        for i in range(start, start + n)
    ]


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Redis round trips: single commands and pipeline executions."""
    trips: list[str] = []
    single, pipelined = redis.Redis.execute_command, redis.client.Pipeline.execute

    def one(self: Any, *args: Any, **kw: Any) -> Any:
        trips.append(str(args[0]))
        return single(self, *args, **kw)

    def many(self: Any, *args: Any, **kw: Any) -> Any:
        trips.append(f"pipeline x{len(self.command_stack)}")
        return pipelined(self, *args, **kw)

    monkeypatch.setattr(redis.Redis, "execute_command", one)
    monkeypatch.setattr(redis.client.Pipeline, "execute", many)
    return trips


def test_batch_of_25_with_5_seen_sends_20_envelopes_in_3_calls_and_claims_in_2_windows(
    batch_ingest: IngestHarness, aws_calls: list[tuple[str, str]], round_trips: list[str]
) -> None:
    all_events = events(25)
    seen = [all_events[i] for i in (0, 6, 12, 18, 24)]
    assert answer(batch_ingest, batch_event(seen))[0] == 202
    assert aws_calls.count(("sqs", "SendMessageBatch")) == 1
    aws_calls.clear()
    round_trips.clear()
    code, body = answer(batch_ingest, batch_event(all_events))
    assert (code, body) == (
        202,
        {"status": "accepted", "events": 25, "accepted": 20, "duplicates": 5},
    )
    assert [c for c in aws_calls if c[0] == "sqs"] == [("sqs", "SendMessageBatch")] * 3
    # claimed in windows (the first 10, then the other 15), each window's new events sent before
    # the next window is claimed (8 = 10 less the 2 seen, then 10 + 2), each call's events
    # confirmed after it, so a retry after a timeout finds them done
    assert round_trips == [
        "pipeline x10",  # claim the first window
        "pipeline x8",  # confirm its 8 new events, sent in one call
        "pipeline x15",  # claim the other 15
        "pipeline x10",  # confirm the next call's 10
        "pipeline x2",  # and the last call's 2
    ]
    envelopes = batch_ingest.envelopes()
    assert sorted(e["delivery_id"] for e in envelopes) == sorted(
        e["sg_event_id"] for e in all_events
    )
    by_id = {e["delivery_id"]: e for e in envelopes}
    event_3 = json.loads(__import__("base64").b64decode(by_id["sg-3"]["body_b64"]))
    assert event_3 == all_events[3]
    assert by_id["sg-3"]["resource_key"] == "m0" and by_id["sg-3"]["sequence"] == 3
    assert (by_id["sg-3"]["batch_index"], by_id["sg-3"]["batch_count"]) == (3, 25)


def test_batch_enqueue_failing_on_the_second_call_releases_exactly_the_unsent_claims(
    batch_ingest: IngestHarness, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = botocore.client.BaseClient._make_api_call
    calls = {"n": 0}

    def second_batch_fails(self: Any, operation: str, params: dict[str, Any]) -> Any:
        if operation == "SendMessageBatch":
            calls["n"] += 1
            if calls["n"] == 2:
                raise ClientError({"Error": {"Code": "ServiceUnavailable"}}, operation)
        return original(self, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", second_batch_fails)
    batch = events(25)
    response = batch_ingest.invoke(batch_event(batch))
    assert response["statusCode"] == 503 and "retry-after" in response["headers"]
    client = redis.Redis.from_url(redis_url)
    held = {
        e["sg_event_id"] for e in batch if client.get(gate_key("whd:", "batchy", e["sg_event_id"]))
    }
    sent = {e["delivery_id"] for e in batch_ingest.envelopes()}
    assert len(sent) == 10 and held == sent  # the 15 unsent were released
    # The sender's retry enqueues only the unsent ones.
    code, body = answer(batch_ingest, batch_event(batch))
    assert (code, body["accepted"], body["duplicates"]) == (202, 15, 10)
    assert len(sent | {e["delivery_id"] for e in batch_ingest.envelopes()}) == 25


def test_an_empty_batch_is_200_and_touches_nothing(batch_ingest: IngestHarness) -> None:
    assert answer(batch_ingest, batch_event([]))[0] == 200
    assert batch_ingest.messages() == []


def test_batch_that_is_not_an_array_is_400(batch_ingest: IngestHarness) -> None:
    code, body = answer(batch_ingest, batch_event({"sg_event_id": "x"}))  # type: ignore[arg-type]
    assert (code, body["reason"]) == (400, "batch_invalid")


# -- per-provider TTLs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [("stripe", 3 * 86_400), ("shopify", 4 * 3_600), ("slack", 3_600), ("meta", 7 * 86_400)],
)
def test_done_claim_ttl_is_the_providers_retry_horizon(
    ingest: IngestHarness, redis_url: str, source: str, expected: int
) -> None:
    d = signed_delivery(SOURCES[source])
    assert answer(ingest, http_api_event(d))[0] == 202
    ttl = redis.Redis.from_url(redis_url).ttl(gate_key("whd:", source, d.delivery_id))
    assert expected - 5 <= ttl <= expected


def test_done_claim_ttl_is_capped_and_a_source_may_set_its_own(
    make_ingest, redis_url: str, tmp_path: Path
) -> None:
    path = sources_file(
        tmp_path,
        '[sources.stripe]\nprovider = "stripe"\n'
        '[sources.github]\nprovider = "github"\ndedup_ttl_seconds = 600\n',
    )
    harness = make_ingest(SOURCES_FILE=path, DEDUP_TTL_MAX_SECONDS="86400")
    client = redis.Redis.from_url(redis_url)
    for source, expected in (("stripe", 86_400), ("github", 600)):
        d = signed_delivery(SOURCES[source])
        assert answer(harness, http_api_event(d))[0] == 202
        assert expected - 5 <= client.ttl(gate_key("whd:", source, d.delivery_id)) <= expected


# -- acknowledgements and statuses a sender must never get ---------------------------------------


@pytest.fixture
def custom_provider(
    make_ingest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., IngestHarness]:
    def build(**kw: Any) -> IngestHarness:
        name = kw.pop("name")
        module = write_provider_module(tmp_path / "mods", f"{name}_provider", name, **kw)
        monkeypatch.syspath_prepend(str(tmp_path / "mods"))
        boto3.client("secretsmanager").create_secret(
            Name=f"{SECRETS_PREFIX}{name}", SecretString="throwaway-secret"
        )
        path = tmp_path / f"{name}.toml"
        path.write_text(f'[sources.{name}]\nprovider = "{name}"\n')
        return make_ingest(SOURCES_FILE=str(path), PROVIDER_MODULES=module)

    return build


def _throttled(**_: Any) -> Any:
    from botocore.exceptions import ClientError

    raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "SendMessage")


def single_event(name: str, delivery_id: str = "e1", secret: str = "throwaway-secret") -> Any:
    from webhook_pipeline_ops.simulator.deliveries import SampleDelivery

    body = json.dumps({"id": delivery_id, "event": "x", "resource": "r", "timestamp": 1}).encode()
    digest = __import__("hmac").new(secret.encode(), body, "sha256").hexdigest()
    return http_api_event(SampleDelivery(name, delivery_id, body, {"X-Test-Signature": digest}))


def test_a_provider_declares_its_acknowledgement(custom_provider) -> None:
    harness = custom_provider(name="acky", fixed_ack=True)
    for expected in (202, 200):  # accepted, then its duplicate
        response = harness.invoke(single_event("acky"))
        assert (response["statusCode"], response["body"]) == (expected, "[accepted]")
        assert response["headers"]["content-type"] == "text/plain"


def test_a_status_the_sender_treats_as_stop_is_never_answered(custom_provider) -> None:
    # This sender would disable the endpoint on 401: a bad signature gets 503 instead.
    harness = custom_provider(name="stoppy", stop_statuses=frozenset({401}))
    response = harness.invoke(single_event("stoppy", secret="wrong"))
    assert response["statusCode"] == 503 and "retry-after" in response["headers"]
    assert harness.messages() == []


def test_no_builtin_provider_can_be_answered_a_stop_status() -> None:
    from webhook_pipeline import errors
    from webhook_pipeline.providers import all_providers

    statuses = {200, 202} | {
        cls.status for cls in vars(errors).values()
        if isinstance(cls, type) and issubclass(cls, errors.IngestError)
    }  # fmt: skip
    assert {400, 401, 404, 405, 413, 503} <= statuses
    # 404 (a disabled source) is the one the pipeline produces that a sender (Typeform) treats as
    # "disable": the service withholds it; test_saas_providers.py::
    # test_a_disabled_source_never_answers_a_stop_404 checks it for every such provider.
    for name, cls in all_providers().items():
        if cls.__module__.startswith("webhook_pipeline.providers."):
            overlap = statuses & cls.stop_statuses
            assert overlap <= {404}, (name, overlap)


# -- the handshake plane ------------------------------------------------------------------------


@pytest.fixture
def counted_redis(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    client.config_resetstat()
    yield client


def test_handshakes_touch_neither_redis_nor_aws_queues_and_are_counted(
    ingest: IngestHarness,
    counted_redis: redis.Redis,
    aws_calls: list[tuple[str, str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    from webhook_pipeline_ops.simulator.event_files import handshake_event

    ingest.invoke(http_api_event(signed_delivery(SOURCES["github"])))  # warm
    counted_redis.config_resetstat()
    aws_calls.clear()
    capsys.readouterr()
    answered = 0
    for name, source in SOURCES.items():
        if name not in ("slack", "meta"):
            continue
        for handshake in source.provider.handshakes:
            boto3.client("secretsmanager").put_secret_value(
                SecretId=f"{SECRETS_PREFIX}{name}", SecretString=dev_secret_value(source)
            )
            response = ingest.invoke(handshake_event(source, handshake, int(time.time())))
            assert response["statusCode"] == 200, (name, response)
            answered += 1
    stats = counted_redis.info("commandstats")
    assert {k for k in stats if not k.startswith(("cmdstat_config", "cmdstat_info"))} == set()
    assert [c for c in aws_calls if c[0] in ("sqs", "s3", "dynamodb")] == []
    out = capsys.readouterr().out
    lines = [json.loads(x) for x in out.splitlines() if '"HandshakeAnswered"' in x]
    assert sorted(x["provider"] for x in lines) == ["meta", "slack"] and answered == 2
    assert len(ingest.messages()) == 1  # the warm-up delivery only


def test_a_signed_handshake_with_a_bad_signature_is_401(ingest: IngestHarness) -> None:
    from webhook_pipeline_ops.simulator.event_files import handshake_event

    source = SOURCES["slack"]
    event = handshake_event(source, source.provider.handshakes[0], int(time.time()))
    event["headers"]["x-slack-signature"] = "v0=" + "0" * 64
    assert ingest.invoke(event)["statusCode"] == 401


def test_provider_modules_that_cannot_be_imported_fail_the_cold_start(make_ingest) -> None:
    with pytest.raises(ConfigurationError, match="no_such_module"):
        make_ingest(PROVIDER_MODULES="no_such_module")
    assert "no_such_module" not in sys.modules


def test_a_one_time_token_is_bound_to_its_delivery_and_a_reuse_with_another_is_401(
    custom_provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness = custom_provider(name="tokeny", replay_token=True)
    first = single_event("tokeny", "e1")
    first["headers"]["x-test-token"] = "tok-1"
    # The first attempt fails to enqueue (503, the claim released); the sender resends the very
    # same request, token included: accepted, then a duplicate, never a 401 that loses it
    monkeypatch.setattr(harness.app.service().queue.client, "send_message", _throttled)
    assert harness.invoke(first)["statusCode"] == 503
    monkeypatch.undo()
    assert harness.invoke(first)["statusCode"] == 202
    resent = harness.invoke(first)
    assert (resent["statusCode"], json.loads(resent["body"])["status"]) == (200, "duplicate")
    again = single_event("tokeny", "e2")  # another delivery, the same signed token
    again["headers"]["x-test-token"] = "tok-1"
    response = harness.invoke(again)
    assert (response["statusCode"], json.loads(response["body"])["reason"]) == (
        401,
        "replay_detected",
    )
    fresh = single_event("tokeny", "e2")
    fresh["headers"]["x-test-token"] = "tok-2"
    assert harness.invoke(fresh)["statusCode"] == 202
    assert [e["delivery_id"] for e in harness.envelopes()] == ["e1", "e2"]
