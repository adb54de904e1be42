"""HubSpot v3: the published vectors (v3 verifies; the legacy v1/v2 ones are refused), the URI
as the docs decode it and as the SDK sends it, milliseconds and the 5-minute tolerance both
ways, the batch split with ``attemptNumber`` volatile, and cross-checks both ways with
``hubspot-api-client``'s ``Signature``."""

from __future__ import annotations

import json
import time

import pytest
from hubspot.exceptions import InvalidSignatureTimestampError
from hubspot.utils.signature import Signature
from webhook_pipeline.errors import TimestampError, VerificationError
from webhook_pipeline.ingest.events import read_events
from webhook_pipeline.sources import Source, resolve
from webhook_pipeline.webhook_request import WebhookRequest

from tests.unit.providers.conftest import build

pytestmark = pytest.mark.unit

SECRET = "yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy"
URI = "https://www.example.com/webhook_uri"
BODY = "{'example_field':'example_value'}"
TS = "15000000"  # milliseconds
V3 = "HPW73RUtKmcYoEDADG0s6MmGFWUzWJKAW07r8RDgcQw="
V2 = "4fe4e3a7d3cf09db53be39d0a58130e2aaba074ec123a9e355b876a689a1c383"
V1 = "69fc6631a867edd4f9e9e627fc5c1148e3fbdd8b21837b6d2b8901c1fa57f750"

hubspot = build("hubspot")


def request(
    headers: dict[str, str], body: bytes = BODY.encode(), url: str = URI, method: str = "POST"
) -> WebhookRequest:
    return WebhookRequest(
        method, "hubspot", {k.lower(): v for k, v in headers.items()}, body, public_url=url
    )


def v3(signature: str = V3, ts: str = TS) -> dict[str, str]:
    return {"X-HubSpot-Signature-v3": signature, "X-HubSpot-Request-Timestamp": ts}


def sdk_v3(body: str, uri: str, ts: str, secret: str = SECRET) -> str:
    return Signature.get_signature(
        secret, body, "v3", http_uri=uri, http_method="POST", timestamp=ts
    )


class TestPublishedVectors:
    def test_v3_verifies_at_its_time(self) -> None:
        verified = hubspot.verify(request(v3()), [SECRET], 15_000)
        assert (verified.timestamp, verified.raw_timestamp) == (15_000, TS)

    def test_the_sdk_reproduces_the_published_v3_and_so_do_we(self) -> None:
        assert sdk_v3(BODY, URI, TS) == V3
        ours = hubspot.sign(BODY.encode(), SECRET, timestamp=15_000, delivery_id="", url=URI)
        assert ours == v3()

    def test_legacy_v1_and_v2_are_the_sdks_but_never_accepted(self) -> None:
        assert Signature.get_signature(SECRET, BODY, "v2", http_uri=URI) == V2
        assert Signature.get_signature(SECRET, BODY, "v1") == V1
        for version, signature in (("v1", V1), ("v2", V2)):
            legacy = {"X-HubSpot-Signature": signature, "X-HubSpot-Signature-Version": version}
            with pytest.raises(VerificationError) as err:
                hubspot.verify(
                    request(legacy | {"X-HubSpot-Request-Timestamp": TS}), [SECRET], 15_000
                )
            assert err.value.reason == "signature_missing"


class TestWhatIsSigned:
    @pytest.mark.parametrize(
        "changed",
        [
            {"url": URI + "?a=1"},
            {"url": URI.replace("https", "http")},
            {"method": "PUT"},
            {"body": BODY.replace("value", "valuE").encode()},
        ],
    )
    def test_the_method_the_uri_and_the_body_are_signed(self, changed: dict) -> None:
        with pytest.raises(VerificationError) as err:
            hubspot.verify(request(v3(), **changed), [SECRET], 15_000)
        assert err.value.reason == "signature_invalid"

    def test_the_timestamp_is_signed(self) -> None:
        with pytest.raises(VerificationError) as err:
            hubspot.verify(request(v3(ts="15000001")), [SECRET], 15_000)
        assert err.value.reason == "signature_invalid"

    def test_a_wrong_client_secret_is_rejected(self) -> None:
        with pytest.raises(VerificationError):
            hubspot.verify(request(v3()), [SECRET.replace("y", "z")], 15_000)


class TestTheUri:
    ESCAPED = "https://hooks.example.com/hubspot%3Aapp/hook?portal=62515&when=%2812%3A00%29&q=a%20b"
    DECODED = "https://hooks.example.com/hubspot:app/hook?portal=62515&when=(12:00)&q=a%20b"

    def test_the_documented_escapes_are_decoded_and_others_kept(self) -> None:
        from webhook_pipeline.providers.builtin.hubspot import decode_uri

        assert decode_uri(self.ESCAPED) == self.DECODED
        assert decode_uri("%3a%2f%3F%40%21%24%27%28%29%2A%2C%3B%25%20") == ":/?@!$'()*,;%25%20"

    @pytest.mark.parametrize("signed_uri", [DECODED, ESCAPED])
    def test_signed_as_the_docs_decode_it_or_as_the_sdk_sends_it(self, signed_uri: str) -> None:
        now = int(time.time())
        ts = str(now * 1000)
        signature = sdk_v3(BODY, signed_uri, ts)
        # HubSpot called the escaped URL; either reading of it verifies.
        hubspot.verify(request(v3(signature, ts), url=self.ESCAPED), [SECRET], now)

    def test_without_public_url_the_request_itself_is_the_uri(self) -> None:
        req = WebhookRequest(
            "POST",
            "hubspot",
            {k.lower(): v for k, v in v3().items()},
            BODY.encode(),
            host="www.example.com",
            path="/webhook_uri",
        )
        assert hubspot.verify(req, [SECRET], 15_000).secret_index == 0


class TestTimestamps:
    def test_milliseconds_and_300_seconds_both_ways(self) -> None:
        assert hubspot.tolerance_seconds == 300
        hubspot.verify(request(v3()), [SECRET], 15_000 + 300)
        hubspot.verify(request(v3()), [SECRET], 15_000 - 300)
        for now, reason in ((15_301, "timestamp_stale"), (14_699, "timestamp_future")):
            with pytest.raises(TimestampError) as err:
                hubspot.verify(request(v3()), [SECRET], now)
            assert err.value.reason == reason

    def test_seconds_where_milliseconds_are_expected_are_stale(self) -> None:
        now = int(time.time())
        body = b"[]"
        signature = sdk_v3(body.decode(), URI, str(now))  # seconds, signed as sent
        with pytest.raises(TimestampError) as err:
            hubspot.verify(request(v3(signature, str(now)), body), [SECRET], now)
        assert err.value.reason == "timestamp_stale"

    def test_the_sdk_only_checks_the_past_we_check_the_future_too(self) -> None:
        now = int(time.time())
        ts = str((now + 3600) * 1000)
        signature = sdk_v3(BODY, URI, ts)
        assert Signature.is_valid(signature, SECRET, BODY, URI, "POST", "v3", ts)
        with pytest.raises(TimestampError) as err:
            hubspot.verify(request(v3(signature, ts)), [SECRET], now)
        assert err.value.reason == "timestamp_future"


class TestSdkCrossCheck:
    BODIES = ('[{"eventId":1,"attemptNumber":0}]', '[{"n":"Zoë ✓","amount":1.50}]', "[]")

    @pytest.mark.parametrize("body", BODIES)
    def test_sdk_signed_verifies_with_ours(self, body: str) -> None:
        now = int(time.time())
        ts = str(now * 1000 - 1234)
        signature = sdk_v3(body, URI, ts)
        assert hubspot.verify(request(v3(signature, ts), body.encode()), [SECRET], now)

    @pytest.mark.parametrize("body", BODIES)
    def test_ours_verifies_with_the_sdk(self, body: str) -> None:
        now = int(time.time())
        headers = hubspot.sign(body.encode(), SECRET, timestamp=now, delivery_id="", url=URI)
        sig, ts = headers["X-HubSpot-Signature-v3"], headers["X-HubSpot-Request-Timestamp"]
        assert Signature.is_valid(sig, SECRET, body, URI, "POST", "v3", ts)
        assert not Signature.is_valid(sig, SECRET, body + " ", URI, "POST", "v3", ts)

    def test_the_sdk_refuses_old_timestamps_as_we_do(self) -> None:
        ts = str((int(time.time()) - 301) * 1000)
        with pytest.raises(InvalidSignatureTimestampError):
            Signature.is_valid(sdk_v3(BODY, URI, ts), SECRET, BODY, URI, "POST", "v3", ts)
        with pytest.raises(TimestampError):
            hubspot.verify(request(v3(sdk_v3(BODY, URI, ts), ts)), [SECRET], time.time())


class TestBatch:
    def events(self, attempt: int) -> bytes:
        return json.dumps(
            [
                {
                    "eventId": 100,
                    "subscriptionId": 7,
                    "portalId": 62515,
                    "attemptNumber": attempt,
                    "subscriptionType": "contact.creation",
                    "objectId": 1,
                    "occurredAt": 1,
                },
                {
                    "eventId": 100,
                    "subscriptionId": 8,
                    "portalId": 62515,
                    "attemptNumber": attempt,
                    "subscriptionType": "deal.creation",
                    "objectId": 2,
                    "occurredAt": 2,
                },
            ],
            separators=(",", ":"),
        ).encode()

    def read(self, body: bytes) -> list:
        source = resolve(Source(name="hubspot", provider="hubspot"))
        now = int(time.time())
        headers = hubspot.sign(body, SECRET, timestamp=now, delivery_id="", url=URI)
        req = request(headers, body)
        return read_events(source, req, source.provider.verify(req, [SECRET], now))

    def test_each_event_is_a_delivery_scoped_by_portal_and_subscription(self) -> None:
        first, second = self.read(self.events(0))
        assert (first.delivery_id, second.delivery_id) == ("62515:7:100", "62515:8:100")
        assert (first.event_type, second.event_type) == ("contact.creation", "deal.creation")
        assert first.resource_key is None and first.sequence is None

    def test_a_retry_differs_only_in_attempt_number_and_hashes_the_same(self) -> None:
        original, retry = self.read(self.events(0)), self.read(self.events(3))
        assert [e.body for e in original] != [e.body for e in retry]
        assert [e.digest for e in original] == [e.digest for e in retry]
        assert [e.delivery_id for e in original] == [e.delivery_id for e in retry]
