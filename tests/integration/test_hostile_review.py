"""Findings of a hostile review of the ingest endpoint (black-box over HTTP against the local
stack, then reproduced here in-process through the real handler, real Redis and moto).

Each test states what the product promises, with the exact input that once broke it: X's and
LinkedIn's unsigned challenges as signing oracles, an Adyen item re-cut at a colon into a new
delivery id, one delivery id twice in one batch answered 503, a Vonage JWT whose passed ``exp`` is
not a JSON integer.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
import uuid
from typing import Any
from urllib.parse import parse_qsl, urlencode

import pytest
from webhook_pipeline.providers.builtin.vonage import mint
from webhook_pipeline_ops.simulator.deliveries import (
    SampleDelivery,
    example_sources,
    http_api_event,
    request_event,
    signed_delivery,
)

from tests.integration.ingest_harness import IngestHarness

pytestmark = pytest.mark.integration

SOURCES = example_sources()


def delivery(source: str, **kw: Any) -> SampleDelivery:
    return signed_delivery(SOURCES[source], **kw)


def status(harness: IngestHarness, event: dict[str, Any]) -> tuple[int, Any]:
    response = harness.invoke(event)
    body = response["body"]
    try:
        return response["statusCode"], json.loads(body)
    except ValueError:
        return response["statusCode"], body


def compact(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


# -- unsigned GET challenges answered with an HMAC are a signing oracle -------------------------


def test_x_crc_challenge_does_not_sign_a_body_of_the_callers_choice(
    ingest: IngestHarness,
) -> None:
    # Given a body an attacker wrote (no secret known)
    forged = compact(
        {
            "for_user_id": "2244994945",
            "tweet_create_events": [{"id_str": uuid.uuid4().hex, "text": "forged"}],
        }
    )
    # When it sends that body as the unsigned CRC token and replays the answer as the signature
    crc = request_event("x", "GET", b"", {}, {"crc_token": forged.decode()})
    code, answer = status(ingest, crc)
    token = answer.get("response_token", "") if code == 200 and isinstance(answer, dict) else ""
    post = request_event(
        "x",
        "POST",
        forged,
        {"content-type": "application/json", "x-twitter-webhooks-signature": token},
        request_key="forged-x",
    )
    code, _ = status(ingest, post)
    # Then the forged delivery is refused and nothing is enqueued
    assert code == 401
    assert ingest.messages() == []


def test_linkedin_challenge_does_not_sign_a_body_of_the_callers_choice(
    ingest: IngestHarness,
) -> None:
    forged = compact(
        {
            "type": "ORGANIZATION_SOCIAL_ACTION_NOTIFICATIONS",
            "notifications": [{"action": "COMMENT", "id": uuid.uuid4().hex}],
        }
    )
    challenge = request_event("linkedin", "GET", b"", {}, {"challengeCode": forged.decode()})
    code, answer = status(ingest, challenge)
    digest = answer.get("challengeResponse", "") if code == 200 and isinstance(answer, dict) else ""
    post = request_event(
        "linkedin",
        "POST",
        forged,
        {"content-type": "application/json", "X-LI-Signature": f"hmacsha256={digest}"},
        request_key="forged-linkedin",
    )
    code, _ = status(ingest, post)
    assert code == 401
    assert ingest.messages() == []


@pytest.mark.parametrize(
    ("forged", "challenge_status"),
    [
        (
            compact({"type": "ORGANIZATION_SOCIAL_ACTION_NOTIFICATIONS", "id": uuid.uuid4().hex}),
            401,
        ),
        # the empty body: the code is "hmacsha256=" alone, which holds no "{" and is answered;
        # its answer is the prefix_in_hmac signature of the empty body, refused as a delivery
        (b"", 200),
    ],
    ids=["json-body", "empty-body"],
)
@pytest.mark.parametrize("prefix", ["hmacsha256=", "HMACSHA256="])
def test_linkedin_challenge_does_not_sign_a_prefixed_body_of_the_callers_choice(
    ingest: IngestHarness, forged: bytes, challenge_status: int, prefix: str
) -> None:
    # Given the prefix_in_hmac reading (accepted by the default "either"): the signed message
    # of a POST is "hmacsha256=" + body, so a challenge code of that shape would be signed
    challenge = request_event(
        "linkedin", "GET", b"", {}, {"challengeCode": prefix + forged.decode()}
    )
    code, answer = status(ingest, challenge)
    assert code == challenge_status
    if code == 401:
        assert answer == {"status": "rejected", "reason": "handshake_invalid"}
    # and whatever the answer held, replayed as the POST's signature, is refused
    digest = answer.get("challengeResponse", "") if isinstance(answer, dict) else ""
    post = request_event(
        "linkedin",
        "POST",
        forged,
        {"content-type": "application/json", "X-LI-Signature": digest},
        request_key=f"forged-linkedin-{prefix}-{len(forged)}",
    )
    assert status(ingest, post)[0] == 401
    assert ingest.messages() == []


def test_twilio_repeated_status_swapped_is_not_a_second_delivery(ingest: IngestHarness) -> None:
    # Given a status callback whose MessageStatus (half of the delivery id) is given twice:
    # Twilio signs a repeated parameter's values sorted, so the swapped order verifies too
    sid = "SM" + uuid.uuid4().hex
    plain = delivery("twilio", delivery_id=sid, event_type="delivered")
    fields = [(k, v) for k, v in parse_qsl(plain.body.decode()) if k != "MessageStatus"]
    signed = delivery(
        "twilio",
        delivery_id=sid,
        body=urlencode(
            [*fields, ("MessageStatus", "delivered"), ("MessageStatus", "undelivered")]
        ).encode(),
    )
    swapped = dataclasses.replace(
        signed,
        body=urlencode(
            [*fields, ("MessageStatus", "undelivered"), ("MessageStatus", "delivered")]
        ).encode(),
    )
    # Then neither order is read as an identity: 400 after verification, nothing enqueued
    for request in (signed, swapped):
        assert status(ingest, http_api_event(request)) == (
            400,
            {"status": "rejected", "reason": "field_ambiguous"},
        )
    assert ingest.messages() == []
    # while the same value given twice is one value (not ambiguous)
    repeated = delivery(
        "twilio",
        delivery_id=sid,
        body=urlencode([*fields, ("MessageStatus", "sent"), ("MessageStatus", "sent")]).encode(),
    )
    assert status(ingest, http_api_event(repeated))[0] == 202


# -- a signed identity that the signature does not bind -----------------------------------------


def test_adyen_item_recut_at_a_colon_is_not_a_new_delivery(ingest: IngestHarness) -> None:
    # Given a genuine item whose merchantReference holds a colon and whose originalReference
    # is empty (a payment's AUTHORISATION)
    psp = "8816178952380553"
    item = {
        "additionalData": {},
        "amount": {"currency": "EUR", "value": 1130},
        "eventCode": "AUTHORISATION",
        "eventDate": "2026-01-01T00:00:00+01:00",
        "merchantAccountCode": "TestMerchant",
        "merchantReference": "order:42",
        "originalReference": "",
        "paymentMethod": "visa",
        "pspReference": psp,
        "reason": "",
        "success": "true",
    }
    genuine = delivery(
        "adyen",
        body=compact({"live": "false", "notificationItems": [{"NotificationRequestItem": item}]}),
    )
    assert status(ingest, http_api_event(genuine))[0] == 202
    # When a captured copy is re-cut one field to the left at the colon, hmacSignature kept:
    # "P" "" "TestMerchant" "order:42" -> "P:" "TestMerchant" "order" "42" (same signed string)
    signed = json.loads(genuine.body)["notificationItems"][0]["NotificationRequestItem"]
    recut = signed | {
        "pspReference": f"{psp}:",
        "originalReference": "TestMerchant",
        "merchantAccountCode": "order",
        "merchantReference": "42",
    }
    body = compact({"live": "false", "notificationItems": [{"NotificationRequestItem": recut}]})
    event = request_event(
        "adyen", "POST", body, {"content-type": "application/json"}, request_key="recut"
    )
    code, _ = status(ingest, event)
    # Then it is not accepted as another delivery: one envelope, for the genuine id only
    assert code != 202
    assert [e["delivery_id"] for e in ingest.envelopes()] == [f"{psp}:AUTHORISATION:true"]


# -- a batch that repeats one delivery id -------------------------------------------------------


def _sendgrid_event(event_id: str, kind: str = "processed") -> dict[str, Any]:
    return {
        "email": "user@example.com",
        "event": kind,
        "sg_event_id": event_id,
        "sg_message_id": "msg-1",
        "timestamp": 1,
    }


def _hubspot_event(event_id: int, prop: str = "email") -> dict[str, Any]:
    return {
        "eventId": event_id,
        "subscriptionId": 12345,
        "portalId": 62515,
        "appId": 54321,
        "occurredAt": 1000,
        "subscriptionType": "contact.propertyChange",
        "attemptNumber": 0,
        "objectId": "1",
        "propertyName": prop,
        "propertyValue": "x",
    }


@pytest.mark.parametrize("source", ["sendgrid", "hubspot", "line"])
def test_batch_repeating_a_delivery_id_is_one_delivery_and_a_2xx(
    ingest: IngestHarness, source: str
) -> None:
    if source == "sendgrid":
        body = (
            json.dumps([_sendgrid_event("ev-rep"), _sendgrid_event("ev-rep")]) + "\r\n"
        ).encode()
    elif source == "hubspot":
        body = compact([_hubspot_event(77), _hubspot_event(77)])
    else:
        doc = json.loads(delivery("line").body)
        body = compact(doc | {"events": [doc["events"][0], doc["events"][0]]})
    d = delivery(source, body=body)
    assert len(d.delivery_ids) == 2 and len(set(d.delivery_ids)) == 1
    code, answer = status(ingest, http_api_event(d))
    # The repeat is a duplicate of an event of the same request: one envelope, and a 2xx
    assert code == 202
    if source != "line":  # LINE's acknowledgement is its own
        assert (answer["events"], answer["accepted"], answer["duplicates"]) == (2, 1, 1)
    assert len(ingest.envelopes()) == 1
    # And the POST again is all duplicates, nothing more enqueued
    code, answer = status(ingest, http_api_event(d))
    assert code == 200
    if source != "line":
        assert (answer["accepted"], answer["duplicates"]) == (0, 2)
    assert ingest.envelopes() == []  # (the first envelope was received above: none is new)


def test_a_batch_repeating_an_id_with_another_body_counts_the_mismatch(
    ingest: IngestHarness, log_lines: list[dict[str, Any]]
) -> None:
    body = compact([_hubspot_event(78), _hubspot_event(78, prop="phone")])
    d = delivery("hubspot", body=body)
    assert status(ingest, http_api_event(d))[0] == 202
    assert len(ingest.envelopes()) == 1
    mismatches = [x for x in log_lines if x["message"].startswith("duplicate delivery id with")]
    assert len(mismatches) == 1
    assert mismatches[0]["stored_sha256"] != mismatches[0]["received_sha256"]


# -- Vonage: a passed exp that is not a JSON integer --------------------------------------------


@pytest.mark.parametrize("kind", ["float", "string"])
def test_vonage_jwt_with_a_passed_exp_of_any_json_type_is_401(
    ingest: IngestHarness, kind: str
) -> None:
    provider = SOURCES["vonage"].provider
    now = int(time.time())
    d = delivery("vonage")
    past = now - 100
    claims = {
        "iat": now,
        "exp": float(past) if kind == "float" else (str(past) if kind == "string" else past),
        "jti": str(uuid.uuid4()),
        "payload_hash": hashlib.sha256(d.body).hexdigest(),
    }
    event = http_api_event(d)
    event["headers"]["authorization"] = "Bearer " + mint(claims, provider.dev_secret)
    code, _ = status(ingest, event)
    assert code == 401
    assert ingest.messages() == []
