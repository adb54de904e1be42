"""Postmark: Basic credentials compared in constant time, nothing signed (and said so), 403 never
answered."""

from __future__ import annotations

import base64

import pytest
from webhook_pipeline.errors import ConfigurationError, VerificationError
from webhook_pipeline.ingest.events import read_events
from webhook_pipeline.providers.builtin.postmark import HEADER, Postmark
from webhook_pipeline.sources import Source, resolve

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

SECRET = "hooks:s3cret:with:colons"
BODY = b'{"RecordType":"Bounce","MessageID":"883953f4-6105-42a2-a16a-77a8eac79483"}'

scheme = build("postmark")


def basic(credentials: str, scheme_name: str = "Basic") -> dict[str, str]:
    return {HEADER: f"{scheme_name} " + base64.b64encode(credentials.encode()).decode()}


def test_the_rfc_7617_example_verifies() -> None:
    vector = Postmark.vectors[0]
    assert vector.headers[HEADER] == basic("Aladdin:open sesame")[HEADER]
    assert scheme.verify(make_request(vector.headers, vector.body), [vector.secret], 0)


@pytest.mark.parametrize("name", ["Basic", "basic", "BASIC"])
def test_the_scheme_name_is_case_insensitive(name: str) -> None:
    assert scheme.verify(make_request(basic(SECRET, name), BODY), [SECRET], 0).secret_index == 0


@pytest.mark.parametrize(
    "credentials", ["hooks:s3cret:with:colonS", "Hooks:s3cret:with:colons", "hooks:", SECRET + " "]
)
def test_other_credentials_are_signature_invalid(credentials: str) -> None:
    with pytest.raises(VerificationError) as err:
        scheme.verify(make_request(basic(credentials), BODY), [SECRET], 0)
    assert err.value.reason == "signature_invalid"


@pytest.mark.parametrize(
    "value",
    [
        "Bearer " + base64.b64encode(SECRET.encode()).decode(),
        "Basic",
        "Basic aG9va3M6czNjcmV0MQ",  # unpadded
        "Basic !!!!",
        "Digest username=hooks",
    ],
)
def test_anything_but_basic_base64_is_signature_malformed(value: str) -> None:
    with pytest.raises(VerificationError) as err:
        scheme.verify(make_request({HEADER: value}, BODY), [SECRET], 0)
    assert (err.value.reason, err.value.status) == ("signature_malformed", 401)


def test_rotation_accepts_the_previous_credentials() -> None:
    req = make_request(basic("old:pass"), BODY)
    assert scheme.verify(req, [SECRET, "old:pass"], 0).secret_index == 1


def test_nothing_is_signed_and_the_source_says_so() -> None:
    # Any body, at any time, verifies with the credentials: the declaration is honest.
    for body in (BODY, b'{"RecordType":"Forged"}', b""):
        assert scheme.verify(make_request(basic(SECRET), body), [SECRET], 4_000_000_000)
    source = resolve(Source(name="postmark", provider="postmark"))
    assert source.unsigned == ("delivery_id",)
    assert Postmark.signs.id is None and Postmark.signs.timestamp is None
    with pytest.raises(ConfigurationError, match="not covered"):
        resolve(Source(name="postmark", provider="postmark", require_signed_id=True))


def test_the_delivery_id_is_the_body_digest_and_the_event_type_the_record_type() -> None:
    source = resolve(Source(name="postmark", provider="postmark"))
    req = make_request(basic(SECRET), BODY)
    [event] = read_events(source, req, scheme.verify(req, [SECRET], 0))
    assert event.event_type == "Bounce" and len(event.delivery_id) == 64


def test_403_is_never_answered() -> None:
    assert 403 in Postmark.stop_statuses


@pytest.mark.parametrize("secret", ["nocolon", ":password", "user:", "user:pa\nss"])
def test_the_secret_is_user_colon_password(secret: str) -> None:
    with pytest.raises(ConfigurationError) as err:
        scheme.validate_secret(secret)
    assert secret not in str(err.value)


def test_sign_is_what_an_http_client_sends_for_credentials_in_the_url() -> None:
    assert scheme.sign(BODY, "u:p", timestamp=0, delivery_id="x") == {HEADER: "Basic dTpw"}
