"""Adyen: the published vector in a notification body, every item verified before the split
(one bad item refuses the POST), what is and is not signed, the ``[accepted]`` answer, and
cross-checks both ways with the ``Adyen`` SDK's ``Adyen.util``."""

from __future__ import annotations

import copy
import json

import pytest
from Adyen.util import generate_notification_sig, is_valid_hmac_notification
from webhook_pipeline.errors import ConfigurationError, VerificationError
from webhook_pipeline.ingest.events import read_events
from webhook_pipeline.providers import provider_class
from webhook_pipeline.sources import Source, resolve
from webhook_pipeline.webhook_request import WebhookRequest

from tests.unit.providers.conftest import build

pytestmark = pytest.mark.unit

KEY = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
OTHER_KEY = "00" * 32
VECTOR = provider_class("adyen").vectors[0]

adyen = build("adyen")


def document(body: bytes = VECTOR.body) -> dict:
    return json.loads(body)


def item(doc: dict, index: int = 0) -> dict:
    return doc["notificationItems"][index]["NotificationRequestItem"]


def request(doc: dict | bytes) -> WebhookRequest:
    body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    return WebhookRequest("POST", "adyen", {"content-type": "application/json"}, body)


def sdk_sign(doc: dict, key: str = KEY) -> dict:
    """Each item signed by the SDK's ``generate_notification_sig``."""
    doc = copy.deepcopy(doc)
    for element in doc["notificationItems"]:
        it = element["NotificationRequestItem"]
        unsigned = {k: v for k, v in it.items() if k != "additionalData"}
        it.setdefault("additionalData", {})["hmacSignature"] = generate_notification_sig(
            unsigned, key
        ).decode()
    return doc


def two_items() -> dict:
    doc = document()
    second = copy.deepcopy(doc["notificationItems"][0])
    second["NotificationRequestItem"].update(eventCode="CAPTURE", pspReference="8814073381342285")
    doc["notificationItems"].append(second)
    return sdk_sign(doc)


class TestVector:
    def test_the_published_signature_verifies_inside_a_notification(self) -> None:
        assert adyen.verify(request(VECTOR.body), [KEY], 0).secret_index == 0

    def test_our_signature_of_the_vector_item_is_the_published_one(self) -> None:
        doc = document()
        del item(doc)["additionalData"]
        signed = adyen.sign_request(json.dumps(doc).encode(), KEY, timestamp=0, delivery_id="")
        assert item(document(signed.body))["additionalData"]["hmacSignature"] == (
            "coqCmt/IZ4E3CzPvMY8zTjQVL5hYJUiBRg8UU+iCWo0="
        )
        assert signed.headers == {} and adyen.sign(b"", KEY, timestamp=0, delivery_id="") == {}

    def test_the_key_is_hex_decoded_in_either_case(self) -> None:
        assert adyen.verify(request(VECTOR.body), [KEY.lower()], 0).secret_index == 0
        with pytest.raises(VerificationError):  # the hex text itself as the key is wrong
            adyen.verify(request(VECTOR.body), [KEY.encode().hex()], 0)


class TestEveryItem:
    def test_two_items_each_verify_and_each_becomes_a_delivery(self) -> None:
        doc = two_items()
        source = resolve(Source(name="adyen", provider="adyen"))
        req = request(doc)
        events = read_events(source, req, adyen.verify(req, [KEY], 0))
        assert [e.delivery_id for e in events] == [
            "7914073381342284:AUTHORISATION:true",
            "8814073381342285:CAPTURE:true",
        ]
        assert [e.event_type for e in events] == ["AUTHORISATION", "CAPTURE"]
        assert json.loads(events[1].body) == doc["notificationItems"][1]

    def test_one_forged_item_refuses_the_whole_post(self) -> None:
        doc = two_items()
        item(doc, 1)["amount"]["value"] = 999_999
        with pytest.raises(VerificationError) as err:
            adyen.verify(request(doc), [KEY], 0)
        assert err.value.reason == "signature_invalid"
        # The SDK's own check reads only the first item and would let it through.
        assert is_valid_hmac_notification(doc, KEY)

    def test_an_unsigned_item_among_signed_ones_is_signature_missing(self) -> None:
        doc = two_items()
        del item(doc, 1)["additionalData"]["hmacSignature"]
        with pytest.raises(VerificationError) as err:
            adyen.verify(request(doc), [KEY], 0)
        assert err.value.reason == "signature_missing"

    def test_items_signed_with_the_previous_key_report_index_1(self) -> None:
        doc = two_items()
        doc["notificationItems"][1] = sdk_sign(
            {"notificationItems": [doc["notificationItems"][1]]}, OTHER_KEY
        )["notificationItems"][0]
        assert adyen.verify(request(doc), [KEY, OTHER_KEY], 0).secret_index == 1
        assert adyen.verify(request(doc), [OTHER_KEY, KEY], 0).secret_index == 1

    @pytest.mark.parametrize(
        ("body", "reason"),
        [
            (b"not json", "signature_missing"),
            (b'{"live":"false","notificationItems":[]}', "signature_missing"),
            (b'{"notificationItems":{"NotificationRequestItem":{}}}', "signature_missing"),
            (b'{"notificationItems":[{"Other":{}}]}', "signature_malformed"),
            (b'{"notificationItems":[7]}', "signature_malformed"),
        ],
    )
    def test_bodies_that_are_not_notifications(self, body: bytes, reason: str) -> None:
        with pytest.raises(VerificationError) as err:
            adyen.verify(request(body), [KEY], 0)
        assert err.value.reason == reason


class TestWhatIsSigned:
    @pytest.mark.parametrize(
        "field",
        ["pspReference", "merchantAccountCode", "merchantReference", "eventCode", "success"],
    )
    def test_each_signed_field(self, field: str) -> None:
        doc = document()
        item(doc)[field] += "0"
        with pytest.raises(VerificationError):
            adyen.verify(request(doc), [KEY], 0)

    def test_the_amount_and_the_original_reference_are_signed(self) -> None:
        for change in ({"currency": "USD"}, {"value": 1131}):
            doc = document()
            item(doc)["amount"].update(change)
            with pytest.raises(VerificationError):
                adyen.verify(request(doc), [KEY], 0)
        doc = document()
        item(doc)["originalReference"] = "1234"
        with pytest.raises(VerificationError):
            adyen.verify(request(doc), [KEY], 0)

    def test_unsigned_fields_and_bytes_can_change_and_still_verify(self) -> None:
        doc = document()
        item(doc).update(reason="changed", eventDate="2030-01-01T00:00:00Z", paymentMethod="mc")
        item(doc)["additionalData"]["extra"] = "added"
        doc["live"] = "true"
        assert adyen.verify(request(json.dumps(doc, indent=2).encode()), [KEY], 0)

    def test_the_delivery_id_is_signed_and_the_source_says_so(self) -> None:
        source = resolve(Source(name="adyen", provider="adyen"))
        assert source.unsigned == () and source.id_is_signed
        moved = resolve(
            Source(
                name="adyen",
                provider="adyen",
                delivery_id={"body": "NotificationRequestItem.eventDate"},
            )  # type: ignore[arg-type]
        )
        assert moved.unsigned == ("delivery_id",)

    @pytest.mark.parametrize(
        ("path", "value"),
        [
            ("success", True),
            ("amount", {"value": "1130", "currency": "EUR"}),
            ("amount", {"value": True, "currency": "EUR"}),
            ("pspReference", 7914073381342284),
            ("amount", "1130 EUR"),
        ],
    )
    def test_signed_fields_of_unexpected_types_are_malformed(self, path: str, value) -> None:
        doc = document()
        item(doc)[path] = value
        with pytest.raises(VerificationError) as err:
            adyen.verify(request(doc), [KEY], 0)
        assert err.value.reason == "signature_malformed"


class TestSdkCrossCheck:
    def test_sdk_signed_items_verify_with_ours(self) -> None:
        doc = two_items()
        item(doc, 0)["merchantReference"] = "Zoë ✓ order"
        doc = sdk_sign(doc)
        assert adyen.verify(request(doc), [KEY], 0).secret_index == 0

    def test_our_items_verify_with_the_sdk_each_one(self) -> None:
        doc = two_items()
        for element in doc["notificationItems"]:
            del element["NotificationRequestItem"]["additionalData"]["hmacSignature"]
        item(doc, 1)["merchantReference"] = "Zoë ✓ order"
        signed = document(
            adyen.sign_request(json.dumps(doc).encode(), KEY, timestamp=0, delivery_id="").body
        )
        for element in signed["notificationItems"]:
            assert is_valid_hmac_notification({"notificationItems": [element]}, KEY)
            assert not is_valid_hmac_notification({"notificationItems": [element]}, OTHER_KEY)


class TestAnswersAndSecrets:
    def test_the_acknowledgement_is_accepted_in_brackets(self) -> None:
        for status in (202, 200):
            answer = adyen.acknowledgement(status, {"status": "accepted"})
            assert (answer.status, answer.text(), answer.content_type) == (
                status,
                "[accepted]",
                "text/plain",
            )

    @pytest.mark.parametrize("bad", ["xyz", KEY[:-1], KEY[:32], "0x" + KEY])
    def test_only_a_hex_key_of_32_bytes_or_more(self, bad: str) -> None:
        with pytest.raises(ConfigurationError) as err:
            adyen.validate_secret(bad)
        assert bad not in str(err.value)
        adyen.validate_secret(KEY)
