"""Findings of a hostile review of the ingest endpoint (black-box over HTTP against the local
stack, then reproduced here in-process through the real handler, real Redis and moto).

Each test states what the product promises and is marked ``xfail(strict=True)`` while the
product breaks the promise: it fails today (reported as xfail), and the day the product is
fixed it passes, which strict mode reports as a failure so the mark is removed.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from webhook_pipeline_ops.samples import (
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


@pytest.mark.xfail(
    strict=True,
    reason="finding: X's CRC answer HMAC-signs any crc_token under the delivery key, so a "
    "caller with no secret gets a valid x-twitter-webhooks-signature for a body of its choice",
)
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


@pytest.mark.xfail(
    strict=True,
    reason="finding: LinkedIn's challengeResponse HMAC-signs any challengeCode under the "
    "delivery key; sent back as X-LI-Signature: hmacsha256=<hex> it verifies any body",
)
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
