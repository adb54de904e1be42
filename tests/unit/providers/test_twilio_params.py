"""Twilio's signed parameters re-cut: the formats of the fields read, and the readings of a signed
string (``url + name1 + value1 + ...``, names sorted, no separator)."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from webhook_pipeline.errors import BadDeliveryError
from webhook_pipeline.fields import FieldLocation, parse_body
from webhook_pipeline.providers.builtin.twilio import form_parameters
from webhook_pipeline.providers.builtin.twilio.params import (
    CALL_STATUSES,
    MESSAGE_STATUSES,
    check_format,
    readings,
    value_lengths,
)
from webhook_pipeline.webhook_request import WebhookRequest

from tests.unit.providers.conftest import build

pytestmark = pytest.mark.unit

twilio = build("twilio")
URL = "https://hooks.example.com/webhooks/twilio"
SM = "SM" + "1" * 32
MG = "MG" + "2" * 32
AC = "AC" + "3" * 32
STATUS_CALLBACK = {
    "AccountSid": AC,
    "ApiVersion": "2010-04-01",
    "From": "+14155550100",
    "MessageSid": SM,
    "MessageStatus": "delivered",
    "MessagingServiceSid": MG,
    "SmsSid": SM,
    "SmsStatus": "delivered",
    "To": "+14155550199",
}
MESSAGING = {
    "delivery_id": FieldLocation(body=["MessageSid", "MessageStatus"]),
    "event_type": FieldLocation(body="MessageStatus"),
}


def refuse(params: list[tuple[str, str]] | dict[str, str], fields=MESSAGING) -> None:  # type: ignore[no-untyped-def]
    body = urlencode(params).encode()
    request = WebhookRequest("POST", "twilio", {}, body, public_url=URL)
    twilio.refuse_recut(request, parse_body(body, "form"), fields)


def reason(params: list[tuple[str, str]] | dict[str, str], fields=MESSAGING) -> str | None:  # type: ignore[no-untyped-def]
    try:
        refuse(params, fields)
    except BadDeliveryError as exc:
        return exc.reason
    return None


def signed(params: list[tuple[str, str]] | dict[str, str]) -> str:
    return URL + form_parameters(urlencode(params).encode())


# -- formats ------------------------------------------------------------------------------------


def test_the_status_sets_are_prefix_free() -> None:
    # where a status's name sits, its value is then determined
    for statuses in (MESSAGE_STATUSES, CALL_STATUSES, MESSAGE_STATUSES | CALL_STATUSES):
        for a in statuses:
            assert not any(b != a and b.startswith(a) for b in statuses), a


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MessageSid", SM),
        ("CallSid", "CA" + "0123456789abcdef" * 2),
        ("MessageStatus", "partially_delivered"),
        ("CallStatus", "no-answer"),
        ("SequenceNumber", "12"),
    ],
)
def test_a_documented_value_has_its_format(name: str, value: str) -> None:
    check_format(name, value, integer=name == "SequenceNumber")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MessageSid", SM + "X"),  # one character more
        ("MessageSid", SM[:-1]),
        ("MessageSid", "SM" + "A" * 32),  # upper-case hex
        ("MessageStatus", "deliveredMessagingServiceSid" + MG),  # the folded re-cut
        ("MessageStatus", "in-progress"),  # a call status
        ("CallStatus", "delivered"),
        ("SequenceNumber", "1SipCode"),
    ],
)
def test_a_value_not_of_its_format_is_field_invalid(name: str, value: str) -> None:
    with pytest.raises(BadDeliveryError) as err:
        check_format(name, value, integer=name == "SequenceNumber")
    assert err.value.reason == "field_invalid"


# -- readings -----------------------------------------------------------------------------------


def test_a_status_callback_has_one_reading() -> None:
    fields = [(n, value_lengths(n)) for n in ("MessageSid", "MessageStatus")]
    found = readings(signed(STATUS_CALLBACK), fields)
    assert found == [(SM, "delivered")]
    assert reason(STATUS_CALLBACK) is None


def test_the_review_recut_is_refused() -> None:
    # MessagingServiceSid folded into the value of MessageStatus: the same signed string
    recut = {k: v for k, v in STATUS_CALLBACK.items() if k != "MessagingServiceSid"}
    recut["MessageStatus"] = "deliveredMessagingServiceSid" + MG
    assert signed(recut) == signed(STATUS_CALLBACK)
    assert reason(recut) == "field_invalid"


def test_a_free_text_value_holding_a_second_identity_is_ambiguous() -> None:
    # A parameter sorted after MessageStatus (a WhatsApp ProfileName: the sender's own text)
    # holding "MessageSid<SID>MessageStatus<status>": From can absorb the genuine pair
    other = "SM" + "9" * 32
    genuine = STATUS_CALLBACK | {"ProfileName": f"MessageSid{other}MessageStatusread"}
    text = signed(genuine)
    head, _, _ = text.partition(f"MessageSid{other}")
    recut = {
        "AccountSid": AC,
        "ApiVersion": "2010-04-01",
        "From": head[len(URL) + len("AccountSid" + AC + "ApiVersion2010-04-01From") :],
        "MessageSid": other,
        "MessageStatus": "read",
        "SmsSid": SM,
        "SmsStatus": "delivered",
        "To": "+14155550199",
    }
    assert signed(recut) == text
    fields = [(n, value_lengths(n)) for n in ("MessageSid", "MessageStatus")]
    found = readings(text, fields)  # stops at two: (SM, "read") is one more (a name "MessageSt")
    assert len(found) == 2 and (SM, "delivered") in found
    assert reason(genuine) == reason(recut) == "field_ambiguous"


def test_a_name_inside_another_name_is_a_reading_only_in_sorted_order() -> None:
    # A child call's status callback: "CallSid" occurs again inside "ParentCallSid"
    child, parent = "CA" + "a" * 32, "CA" + "b" * 32
    callback = {
        "AccountSid": AC,
        "CallSid": child,
        "CallStatus": "completed",
        "Direction": "outbound-dial",
        "ParentCallSid": parent,
        "SequenceNumber": "3",
    }
    voice = {"delivery_id": FieldLocation(body=["CallSid", "CallStatus"])}
    # read with its status, the parent's SID cannot be the id: no CallStatus follows it
    assert reason(callback, voice) is None
    # read alone (a resource key), the parent's SID is a second reading: refused
    keyed = voice | {
        "resource_key": FieldLocation(body="CallSid"),
        "sequence": FieldLocation(body="SequenceNumber", format="int"),
    }
    assert reason(callback, keyed) is None  # CallStatus still anchors CallSid
    alone = {
        "delivery_id": FieldLocation(body="SequenceNumber"),
        "resource_key": FieldLocation(body="CallSid"),
    }
    assert reason(callback, alone) == "field_ambiguous"


def test_a_value_that_can_end_earlier_is_ambiguous() -> None:
    # A free-text field read last whose value holds lower-case letters can end earlier: the
    # rest of it is then a parameter name sorted after it
    fields = {
        "delivery_id": FieldLocation(body="MessageSid"),
        "event_type": FieldLocation(body="To"),
    }
    assert reason(STATUS_CALLBACK, fields) is None  # "+14155550199": digits sort before names
    assert reason(STATUS_CALLBACK | {"To": "whatsapp:+14155550199"}, fields) == "field_ambiguous"


def test_a_json_callback_is_not_checked() -> None:
    body = b'{"MessageStatus": "deliveredMessagingServiceSid"}'
    request = WebhookRequest("POST", "twilio", {}, body, public_url=URL + "?bodySHA256=" + "0" * 64)
    twilio.refuse_recut(request, parse_body(body, "json"), MESSAGING)
