"""One redaction function for the credentials providers put in bodies and URLs, and the source
rules that keep a credential out of the delivery record and the envelope."""

from __future__ import annotations

import base64
import json

import pytest
from webhook_pipeline.errors import ConfigurationError
from webhook_pipeline.redaction import (
    REDACTED,
    redact_body,
    redact_headers,
    redact_query,
    redact_target,
)
from webhook_pipeline.sources import parse_sources, resolve

pytestmark = pytest.mark.unit


def test_query_values_of_the_named_parameters_are_replaced_and_every_other_byte_kept() -> None:
    query = "a=1&token=s3cr3t&b=%20x&token=again&hub%2Everify_token=v&flag&token"
    out = redact_query(query, {"token", "hub.verify_token"})
    assert (
        out
        == f"a=1&token={REDACTED}&b=%20x&token={REDACTED}&hub%2Everify_token={REDACTED}&flag&token"
    )
    assert redact_query(query, set()) == query
    assert (
        redact_target("/webhooks/mollie?x=1&token=s", {"token"})
        == f"/webhooks/mollie?x=1&token={REDACTED}"
    )
    assert redact_target("/webhooks/mollie", {"token"}) == "/webhooks/mollie"


def test_body_credentials_are_replaced_in_json_batches_and_forms() -> None:
    batch = b'{"value":[{"clientState":"k1","id":1},{"clientState":"k2","id":2}]}'
    shown = json.loads(redact_body(batch, ("clientState",), "value"))
    assert [v["clientState"] for v in shown["value"]] == [REDACTED, REDACTED]
    assert [v["id"] for v in shown["value"]] == [1, 2]
    nested = json.loads(redact_body(b'{"a":{"b":"k"},"c":"k"}', ("a.b",)))
    assert nested == {"a": {"b": REDACTED}, "c": "k"}
    form = redact_body(b"token=k&team_id=T1&text=a+b", ("token",))
    assert (
        form
        == f"token={REDACTED.replace('[', '%5B').replace(']', '%5D')}&team_id=T1&text=a+b".encode()
    )


@pytest.mark.parametrize(
    "raw", [b'{"google":"k"}', b"\xff\xfe", b"not json at all {", b"", b'{"value":[]}']
)
def test_a_body_without_the_credential_is_shown_as_the_same_bytes(raw: bytes) -> None:
    assert redact_body(raw, ("google_key",), None) == raw


def source(**table: object) -> dict[str, object]:
    return {"sources": {"s": table}}


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            {"provider": "google-ads", "event_type": {"body": "google_key"}},
            "event_type may not read a credential field",
        ),
        (
            {"provider": "gitlab", "forward_headers": ["X-Gitlab-Token"]},
            "forward_headers may not name the signature or credential header X-Gitlab-Token",
        ),
        (
            {"provider": "postmark", "forward_headers": ["authorization"]},
            "credential header Authorization",
        ),
    ],
)
def test_a_source_may_not_record_or_forward_a_credential(
    table: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        resolve(parse_sources(source(**table))["s"])


def test_dlq_peek_shows_the_body_and_the_envelope_with_the_credential_redacted() -> None:
    from webhook_pipeline.envelope import Envelope, sha256_hex, utcnow
    from webhook_pipeline.replay.ports import DlqMessage
    from webhook_pipeline_ops.dlq_peek import describe

    raw = b'{"lead_id":"L1","google_key":"gk-marker-value","is_test":true}'
    envelope = Envelope(
        source="google-ads",
        delivery_id="L1",
        received_at=utcnow(),
        body_b64=base64.b64encode(raw).decode(),
        body_size=len(raw),
        body_sha256=sha256_hex(raw),
    )
    message = DlqMessage("m-1", "rh", envelope.to_json(), 3, None, {})
    row = describe(message, show_body=True)
    assert json.loads(row["payload"]) == {"lead_id": "L1", "google_key": REDACTED, "is_test": True}
    shown = base64.b64decode(json.loads(row["body"])["body_b64"])
    assert b"gk-marker-value" not in shown and b'"lead_id":"L1"' in shown
    # the message itself is untouched (a replay moves the exact bytes)
    assert b"gk-marker-value" in base64.b64decode(json.loads(message.body)["body_b64"])


def test_a_body_with_an_escaped_lone_surrogate_is_shown_redacted_and_encodable() -> None:
    from webhook_pipeline_ops.credentials import shown_body

    raw = b'{"google_key":"K-marker","n":"x\\ud800","m":"\xc3\xa9"}'
    shown = shown_body("google-ads", raw)
    assert b"K-marker" not in shown
    shown.decode("utf-8")  # valid UTF-8: a page or a terminal can show it
    # the same document, the credential replaced (non-ASCII kept as it was received)
    assert json.loads(shown) == {"google_key": REDACTED, "n": "x\ud800", "m": "\u00e9"}
    assert "\u00e9".encode() in shown


def test_dlq_peek_shows_a_body_with_an_escaped_lone_surrogate_redacted() -> None:
    from webhook_pipeline.envelope import Envelope, sha256_hex, utcnow
    from webhook_pipeline.replay.ports import DlqMessage
    from webhook_pipeline_ops.dlq_peek import describe

    raw = b'{"lead_id":"L1","google_key":"gk-marker-value","n":"x\\udfff"}'
    envelope = Envelope(
        source="google-ads",
        delivery_id="L1",
        received_at=utcnow(),
        body_b64=base64.b64encode(raw).decode(),
        body_size=len(raw),
        body_sha256=sha256_hex(raw),
    )
    row = describe(DlqMessage("m-1", "rh", envelope.to_json(), 3, None, {}), show_body=True)
    assert json.loads(row["payload"]) == {"lead_id": "L1", "google_key": REDACTED, "n": "x\udfff"}
    shown = base64.b64decode(json.loads(row["body"])["body_b64"])
    assert b"gk-marker-value" not in shown


def test_redact_headers_lowers_names_and_redacts_credential_and_named_headers() -> None:
    headers = {
        "Authorization": "Basic dTpw",
        "Cookie": "session=1",
        "X-Telegram-Bot-Api-Secret-Token": "tok",
        "Webhook-Timestamp": "1700000000",
    }
    assert redact_headers(headers, ("x-telegram-bot-api-secret-token",)) == {
        "authorization": REDACTED,
        "cookie": REDACTED,
        "x-telegram-bot-api-secret-token": REDACTED,
        "webhook-timestamp": "1700000000",
    }
    assert redact_headers({"Webhook-Id": "msg_1"}) == {"webhook-id": "msg_1"}
