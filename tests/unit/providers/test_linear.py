"""Linear: ``Linear-Signature: <hex>`` of the raw body; the signed timestamp is the body field
``webhookTimestamp`` (milliseconds), 60 s either way. Cross-checked with the official npm SDK
(``@linear/sdk`` ``LinearWebhookClient.verify``, run with node from tests/node; Linear has no
Python SDK, and its SDK has no signer, so the check runs one way: the SDK judges our signatures
and the same tampered, stale and future requests we refuse)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from webhook_pipeline.errors import TimestampError, VerificationError
from webhook_pipeline.fields import body_digest, parse_body

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

SECRET, NOW = "lin_wh_test", 1_700_000_000
NODE_DIR = Path(__file__).resolve().parents[2] / "node"
scheme = build("linear")


def body(**fields: object) -> bytes:
    return json.dumps(
        {"type": "Issue", "action": "update", **fields}, separators=(",", ":")
    ).encode()


def sig(data: bytes, key: str = SECRET) -> str:
    return hmac.new(key.encode(), data, hashlib.sha256).hexdigest()


def req(data: bytes, signature: str | None = None):
    return make_request(
        {"Linear-Signature": signature or sig(data), "Linear-Delivery": "d-1"}, data
    )


def test_signed_body_timestamp_in_milliseconds_verifies() -> None:
    data = body(webhookTimestamp=NOW * 1000 + 999)
    result = scheme.verify(req(data), [SECRET], NOW)
    assert (result.timestamp, result.raw_timestamp) == (NOW, str(NOW * 1000 + 999))


@pytest.mark.parametrize(
    ("offset_ms", "reason"), [(-60_001, "timestamp_stale"), (60_001, "timestamp_future")]
)
def test_sixty_seconds_either_way(offset_ms: int, reason: str) -> None:
    for ok in (-60_000, 60_000):
        scheme.verify(req(body(webhookTimestamp=NOW * 1000 + ok)), [SECRET], NOW)
    with pytest.raises(TimestampError) as err:
        scheme.verify(req(body(webhookTimestamp=NOW * 1000 + offset_ms)), [SECRET], NOW)
    assert err.value.reason == reason


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "timestamp_missing"),
        (float(NOW * 1000), "timestamp_invalid"),
        (str(NOW * 1000), "timestamp_invalid"),
        (True, "timestamp_invalid"),
        (-1, "timestamp_invalid"),
        (10**19, "timestamp_invalid"),
    ],
)
def test_the_body_timestamp_must_be_a_json_integer(value: object, reason: str) -> None:
    data = body() if value is None else body(webhookTimestamp=value)
    with pytest.raises(TimestampError) as err:
        scheme.verify(req(data), [SECRET], NOW)
    assert err.value.reason == reason


def test_the_linear_timestamp_header_is_not_what_is_checked() -> None:
    data = body(webhookTimestamp=(NOW - 3600) * 1000)
    request = make_request(
        {"Linear-Signature": sig(data), "linear-timestamp": str(NOW * 1000)}, data
    )
    with pytest.raises(TimestampError) as err:
        scheme.verify(request, [SECRET], NOW)
    assert err.value.reason == "timestamp_stale"


def test_the_signature_is_checked_before_the_body_is_trusted() -> None:
    data = body(webhookTimestamp=NOW * 1000)
    for signature, reason in (
        (sig(data, "other"), "signature_invalid"),
        (sig(data).upper(), "signature_malformed"),
        ("sha256=" + sig(data), "signature_malformed"),
    ):
        with pytest.raises(VerificationError) as err:
            scheme.verify(req(data, signature), [SECRET], NOW)
        assert err.value.reason == reason
    with pytest.raises(VerificationError) as err:
        scheme.verify(req(data.replace(b"update", b"remove"), sig(data)), [SECRET], NOW)
    assert err.value.reason == "signature_invalid"


def test_sign_body_stamps_each_attempt_and_the_stamp_is_volatile_for_the_duplicate_hash() -> None:
    first = scheme.sign_body(body(), SECRET, timestamp=NOW, delivery_id="d")
    retry = scheme.sign_body(first, SECRET, timestamp=NOW + 3600, delivery_id="d")
    assert json.loads(first)["webhookTimestamp"] == NOW * 1000
    assert json.loads(retry)["webhookTimestamp"] == (NOW + 3600) * 1000
    volatile = scheme.volatile_fields
    assert body_digest(first, parse_body(first, "json"), volatile) == body_digest(
        retry, parse_body(retry, "json"), volatile
    )
    assert body_digest(first, parse_body(first, "json"), ()) != body_digest(
        retry, parse_body(retry, "json"), ()
    )


# -- the official SDK, under node ---------------------------------------------------------------


def sdk_verdicts(requests: list[tuple[str, bytes, str, int]]) -> list[str]:
    """``LinearWebhookClient.verify`` on (secret, body, signature, now in ms) with the SDK's clock
    set to ``now``: ``"ok"`` or the SDK's error message, one per request."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the @linear/sdk cross-check cannot run")
    if not (NODE_DIR / "node_modules" / "@linear" / "sdk").is_dir():
        pytest.skip("tests/node has no node_modules: run `make install-dev` (npm ci)")
    payload = [
        {"secret": s, "body_b64": base64.b64encode(b).decode(), "signature": g, "now_ms": n}
        for s, b, g, n in requests
    ]
    out = subprocess.run(
        ["node", str(NODE_DIR / "linear_verify.mjs")],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=NODE_DIR,
    )
    return out.stdout.splitlines()


def test_the_official_sdk_accepts_our_signatures_and_refuses_what_we_refuse() -> None:
    data = scheme.sign_body(body(data={"id": "i1"}), SECRET, timestamp=NOW, delivery_id="d")
    ours = scheme.sign(data, SECRET, timestamp=NOW, delivery_id="d")["Linear-Signature"]
    [vector] = scheme.vectors
    cases = [
        (SECRET, data, ours, NOW * 1000),  # ours, fresh
        (vector.secret, vector.body, vector.headers["Linear-Signature"], NOW * 1000),
        (SECRET, data + b" ", ours, NOW * 1000),  # a changed byte
        ("other", data, ours, NOW * 1000),  # a wrong key
        (SECRET, data, ours, (NOW + 61) * 1000),  # stale
        (SECRET, data, ours, (NOW - 61) * 1000),  # future
    ]
    verdicts = sdk_verdicts(cases)
    assert verdicts[:2] == ["ok", "ok"]
    assert verdicts[2:4] == ["Invalid webhook signature"] * 2
    assert verdicts[4:] == ["Invalid webhook timestamp"] * 2
    # ... and ours agrees on every case.
    for (secret, raw, signature, now_ms), verdict in zip(cases, verdicts, strict=True):
        request = make_request({"Linear-Signature": signature}, raw)
        if verdict == "ok":
            scheme.verify(request, [secret], now_ms / 1000)
        else:
            with pytest.raises(VerificationError):
                scheme.verify(request, [secret], now_ms / 1000)
