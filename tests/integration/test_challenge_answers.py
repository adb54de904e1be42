"""A challenge's answer replayed as a delivery's signature, through the real ingest handler:
401 ``signature_invalid`` (the signature proves nothing), never 400 ``body_not_json`` (which
would mean the signature was accepted and only the body parse stopped it), and nothing is
enqueued (invariant I2)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from webhook_pipeline_ops.simulator.deliveries import request_event

from tests.integration.ingest_harness import IngestHarness

pytestmark = pytest.mark.integration


def answered(ingest: IngestHarness, source: str, query: dict[str, str]) -> dict[str, Any]:
    response = ingest.invoke(request_event(source, "GET", b"", {}, query))
    assert response["statusCode"] == 200
    answer = json.loads(response["body"])
    assert isinstance(answer, dict)
    return answer


def post(ingest: IngestHarness, source: str, body: bytes, headers: dict[str, str]) -> Any:
    event = request_event(
        source, "POST", body, {"content-type": "application/json", **headers},
        request_key=f"replayed-{source}-{headers}",
    )  # fmt: skip
    response = ingest.invoke(event)
    return response["statusCode"], json.loads(response["body"])


REFUSED = (401, {"status": "rejected", "reason": "signature_invalid"})


def test_an_x_crc_answer_is_not_a_signature_of_the_token_as_a_body(ingest: IngestHarness) -> None:
    # Given the answer X's CRC gives anyone for a token (not JSON: it is answered)
    token = "bXktY3JjLXRva2VuLWZvci1kZXY"
    signature = answered(ingest, "x", {"crc_token": token})["response_token"]
    # When it is sent as the signature of a POST whose body is the token
    outcome = post(ingest, "x", token.encode(), {"x-twitter-webhooks-signature": signature})
    # Then the signature is refused, before any body parse, and nothing is enqueued
    assert outcome == REFUSED
    assert ingest.messages() == []


@pytest.mark.parametrize("reading", ["prefix_on_header", "prefix_in_hmac"])
def test_a_linkedin_challenge_answer_is_not_a_signature_of_the_code_as_a_body(
    ingest: IngestHarness, reading: str
) -> None:
    body = "890e4665-4dfe-4ab1-b689-ed553bceeed0"
    # prefix_in_hmac signs "hmacsha256=" + body: ask for that; prefix_on_header signs the body
    code = ("hmacsha256=" if reading == "prefix_in_hmac" else "") + body
    digest = answered(ingest, "linkedin", {"challengeCode": code})["challengeResponse"]
    header = ("hmacsha256=" if reading == "prefix_on_header" else "") + digest
    assert post(ingest, "linkedin", body.encode(), {"X-LI-Signature": header}) == REFUSED
    assert ingest.messages() == []
