"""Telegram: the secret token header compared in constant time, update_id as delivery id and
sequence of one ordered stream per bot, the token format of setWebhook."""

from __future__ import annotations

import json

import pytest
from webhook_pipeline.errors import ConfigurationError, VerificationError
from webhook_pipeline.ingest.events import read_events
from webhook_pipeline.providers.builtin.telegram import HEADER, Telegram
from webhook_pipeline.sources import Source, resolve

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

TOKEN = "tg_secret_123"
scheme = build("telegram")


def update(update_id: int, text: str = "hi") -> bytes:
    message = {"message_id": 1, "date": 0, "chat": {"id": 5, "type": "private"}, "text": text}
    return json.dumps({"update_id": update_id, "message": message}).encode()


def test_the_token_header_verifies_and_is_case_sensitive() -> None:
    assert scheme.verify(make_request({HEADER: TOKEN}, update(1)), [TOKEN], 0).secret_index == 0
    for other in ("TG_SECRET_123", "tg_secret_12", "tg_secret_1234", TOKEN + " "):
        with pytest.raises(VerificationError) as err:
            scheme.verify(make_request({HEADER: other}, update(1)), [TOKEN], 0)
        assert err.value.reason == "signature_invalid"
    with pytest.raises(VerificationError) as err:
        scheme.verify(make_request({}, update(1)), [TOKEN], 0)
    assert err.value.reason == "signature_missing"


def test_the_body_is_not_signed() -> None:
    req = make_request({HEADER: TOKEN}, update(99, "forged"))
    assert scheme.verify(req, [TOKEN], 0).timestamp is None
    assert resolve(Source(name="tg", provider="telegram")).unsigned == ("delivery_id", "sequence")


def test_update_id_is_the_delivery_id_and_the_sequence_of_the_one_bot_stream() -> None:
    source = resolve(Source(name="tg", provider="telegram"))
    found = []
    for update_id in (10_000, 10_002, 10_001):
        req = make_request({HEADER: TOKEN}, update(update_id))
        [event] = read_events(source, req, scheme.verify(req, [TOKEN], 0))
        found.append((event.delivery_id, event.resource_key, event.sequence))
    assert found == [("10000", "bot", 10_000), ("10002", "bot", 10_002), ("10001", "bot", 10_001)]


@pytest.mark.parametrize("token", ["", "a" * 257, "has space", "dash-and_underscore!", "é"])
def test_a_secret_token_is_what_set_webhook_accepts(token: str) -> None:
    with pytest.raises(ConfigurationError):
        scheme.validate_secret(token)
    scheme.validate_secret("A-z_0-9" * 36 + "abcd")  # 256 characters


def test_update_ids_are_positive_integers() -> None:
    assert int(scheme.new_delivery_id("0" * 32)) == 1
    assert Telegram.defaults.resource_key is not None
