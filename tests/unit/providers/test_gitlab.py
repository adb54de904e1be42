"""GitLab: the plain ``X-Gitlab-Token`` compared in constant time; ``Idempotency-Key`` (stable
across retries) is the delivery id; nothing is signed."""

from __future__ import annotations

import hmac

import pytest
from webhook_pipeline.errors import VerificationError
from webhook_pipeline.ingest.events import read_events
from webhook_pipeline.sources import Source, resolve

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

scheme = build("gitlab")
BODY = b'{"object_kind":"push"}'


def req(token: str | None, body: bytes = BODY, **extra: str):
    headers = {"Idempotency-Key": "908a6d9e-45fd-46c8-97e6-c4f350f219dd", **extra}
    if token is not None:
        headers["X-Gitlab-Token"] = token
    return make_request(headers, body)


def test_the_token_itself_verifies_and_any_other_value_does_not() -> None:
    assert scheme.verify(req("tok-1"), ["tok-1"], 0).secret_index == 0
    assert scheme.verify(req("tok-1"), ["tok-2", "tok-1"], 0).secret_index == 1
    for other in ("tok-", "tok-11", "TOK-1", " tok-1", "tok-1 "):
        with pytest.raises(VerificationError) as err:
            scheme.verify(req(other), ["tok-1"], 0)
        assert err.value.reason == "signature_invalid"


def test_missing_and_non_ascii_tokens() -> None:
    for token, reason in (
        (None, "signature_missing"),
        ("", "signature_missing"),
        ("tök", "signature_malformed"),
    ):
        with pytest.raises(VerificationError) as err:
            scheme.verify(req(token), ["tok"], 0)
        assert err.value.reason == reason


def test_the_comparison_is_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        seen.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)  # crypto.constant_time_equal uses it
    scheme.verify(req("tok-1"), ["tok-2", "tok-1"], 0)
    assert (b"tok-2", b"tok-1") in seen and (b"tok-1", b"tok-1") in seen


def test_the_body_is_not_signed_and_the_module_says_so() -> None:
    assert scheme.verify(req("tok", body=b"anything at all"), ["tok"], 0).secret_index == 0
    assert scheme.signs.body is False and "not signed" in scheme.signs.note


def test_idempotency_key_is_the_delivery_id_and_is_reported_unsigned() -> None:
    source = resolve(Source(name="gl", provider="gitlab"))
    request = req("tok", **{"X-Gitlab-Event": "Push Hook"})
    [event] = read_events(source, request, scheme.verify(request, ["tok"], 0))
    assert (event.delivery_id, event.event_type) == (
        "908a6d9e-45fd-46c8-97e6-c4f350f219dd",
        "Push Hook",
    )
    assert source.unsigned == ("delivery_id",)


def test_sign_sends_the_token_and_the_id() -> None:
    assert scheme.sign(BODY, "tok", timestamp=0, delivery_id="k-1") == {
        "X-Gitlab-Token": "tok",
        "Idempotency-Key": "k-1",
    }
