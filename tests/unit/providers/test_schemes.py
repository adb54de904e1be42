"""The shared scheme shapes (providers/schemes.py): strict RFC 3339, ``t=..,<key>=..`` headers,
query values decoded once, tokens compared against every secret, values put in a JSON body."""

from __future__ import annotations

import pytest
from webhook_pipeline.errors import ConfigurationError, TimestampError, VerificationError
from webhook_pipeline.providers.challenges import query_value
from webhook_pipeline.providers.crypto import header_digest, match_token
from webhook_pipeline.providers.json_body import with_field
from webhook_pipeline.providers.schemes import (
    format_rfc3339,
    parse_keyed_header,
    parse_rfc3339,
    restamp_keyed_header,
)
from webhook_pipeline.webhook_request import WebhookRequest

from tests.unit.providers.conftest import make_request

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [
        ("1970-01-01T00:00:00Z", 0.0),
        ("2023-11-14T22:13:20Z", 1_700_000_000.0),
        ("2023-11-14T22:13:20.5Z", 1_700_000_000.5),
        ("2023-11-14T22:13:20.000000001Z", 1_700_000_000.000000001),
        ("2023-11-15T00:13:20+02:00", 1_700_000_000.0),
        ("2023-11-14T21:13:20-01:00", 1_700_000_000.0),
        ("2024-02-29T00:00:00Z", 1_709_164_800.0),
    ],
)
def test_rfc3339_values(raw: str, seconds: float) -> None:
    assert parse_rfc3339(raw) == pytest.approx(seconds, abs=1e-6)


@pytest.mark.parametrize(
    "raw",
    ["2023-02-29T00:00:00Z", "2023-11-14T24:00:00Z", "2023-11-14T22:13:20+00:60", "2023-11-14",
     "2023-11-14T22:13Z", "2023-11-14T22:13:20.Z", "nan", "2023-11-14T22:13:20Z\n"],
)  # fmt: skip
def test_rfc3339_refusals(raw: str) -> None:
    with pytest.raises(TimestampError) as err:
        parse_rfc3339(raw)
    assert err.value.reason == "timestamp_invalid"


def test_rfc3339_missing_and_formatting() -> None:
    for raw in (None, ""):
        with pytest.raises(TimestampError) as err:
            parse_rfc3339(raw)
        assert err.value.reason == "timestamp_missing"
    assert format_rfc3339(1_700_000_000) == "2023-11-14T22:13:20Z"
    assert format_rfc3339(1_700_000_000, 5) == "2023-11-14T22:13:20.000000005Z"


def test_keyed_header_parse_and_restamp() -> None:
    assert parse_keyed_header("t=1, s=a,s=b,x=y,junk", "H", "t", "s") == ("1", ["a", "b"])
    assert parse_keyed_header("s=a", "H", "t", "s") == (None, ["a"])
    with pytest.raises(VerificationError) as err:
        parse_keyed_header("t=1,s=a,t=2,s=b", "H", "t", "s")
    assert err.value.reason == "signature_malformed"
    headers = {"H": "t=1,s=a", "other": "x"}
    assert restamp_keyed_header(headers, "H", "t", "9") == {"other": "x", "H": "t=9,s=a"}
    assert restamp_keyed_header(headers, "H", "t", None) == {"other": "x", "H": "s=a"}


def test_header_digest_is_strict() -> None:
    assert header_digest(make_request({"S": "p=00ff"}, b""), "S", prefix="p=") == b"\x00\xff"
    assert header_digest(make_request({"S": "AP8="}, b""), "S", encoding="base64") == b"\x00\xff"
    for value in ("00ff", "p=00FF", "p=0ff", "p= 00ff"):
        with pytest.raises(VerificationError) as err:
            header_digest(make_request({"S": value}, b""), "S", prefix="p=")
        assert err.value.reason == "signature_malformed"


def test_query_value_is_decoded_exactly_once() -> None:
    raw = WebhookRequest("GET", "s", {}, b"", {"t": "ignored"}, raw_query="t=a%2520b+c&t=last")
    assert query_value(raw, "t") == "last"
    assert (
        query_value(WebhookRequest("GET", "s", {}, b"", raw_query="t=a%2520b+c"), "t") == "a%20b c"
    )
    assert query_value(WebhookRequest("GET", "s", {}, b"", {"t": "a%20b"}), "t") == "a%20b"
    assert query_value(WebhookRequest("GET", "s", {}, b"", raw_query="u=1"), "t") is None
    assert query_value(WebhookRequest("GET", "s", {}, b"", raw_query="t="), "t") == ""


def test_match_token_compares_every_secret_and_refuses_no_secret() -> None:
    assert match_token(["a", "b"], "b") == 1
    with pytest.raises(VerificationError):
        match_token(["a", "b"], "c")
    with pytest.raises(ConfigurationError):
        match_token([], "a")


def test_with_field_sets_a_value_in_a_json_object_only() -> None:
    assert with_field(b'{"a": 1.50}', "k", "v") == b'{"a":1.5,"k":"v"}'
    for body in (b"[1]", b"x", b""):
        assert with_field(body, "k", "v") == body
