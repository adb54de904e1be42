"""Replay request validation and filter matching (pure, no sockets)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from webhook_pipeline.envelope import Envelope, sha256_hex
from webhook_pipeline.errors import InvalidReplayRequestError
from webhook_pipeline.replay.request import ReplayFilter, ReplayRequest

pytestmark = pytest.mark.unit


def envelope(**overrides: object) -> Envelope:
    fields: dict[str, object] = {
        "source": "stripe",
        "delivery_id": "evt_1",
        "received_at": datetime(2024, 5, 1, 12, 0, tzinfo=UTC),
        "event_type": "invoice.paid",
        "body_b64": "e30=",
        "body_size": 2,
        "body_sha256": sha256_hex(b"{}"),
    }
    fields.update(overrides)
    return Envelope.model_validate(fields)


def test_empty_request_has_safe_defaults() -> None:
    request = ReplayRequest.parse({})
    assert request.max_messages == 100
    assert request.dry_run is False
    assert request.rate_per_second is None
    assert request.filter == ReplayFilter()
    assert ReplayRequest.parse(None) == request


def test_full_request_is_accepted_from_json_text() -> None:
    request = ReplayRequest.parse(
        '{"max_messages": 5, "dry_run": true, "rate_per_second": 2.5,'
        ' "filter": {"source": "stripe", "event_type": "invoice.paid", "delivery_id": "evt_1",'
        ' "received_after": "2024-05-01T00:00:00Z",'
        ' "received_before": "2024-05-02T00:00:00+00:00"}}'
    )
    assert request.max_messages == 5
    assert request.dry_run is True
    assert request.rate_per_second == 2.5
    assert request.filter.received_after == datetime(2024, 5, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"max_messages": -1}, "max_messages: Input should be greater than or equal to 1"),
        ({"max_messages": 0}, "max_messages"),
        ({"max_messages": "10"}, "max_messages: Input should be a valid integer"),
        ({"max_messages": 1_000_000}, "max_messages: Input should be less than or equal to"),
        ({"rate_per_second": -5}, "rate_per_second: Input should be greater than or equal to 0.01"),
        ({"rate_per_second": 0}, "rate_per_second: Input should be greater than or equal to 0.01"),
        ({"dry_run": "yes"}, "dry_run: Input should be a valid boolean"),
        ({"rate_per_second": True}, "rate_per_second: Input should be a valid number"),
        ({"rate_per_second": "5"}, "rate_per_second: Input should be a valid number"),
        ({"max_messages": True}, "max_messages: Input should be a valid integer"),
        ({"max_messages": 5.0}, "max_messages: Input should be a valid integer"),
        ({"dryrun": True}, "dryrun: unknown key"),
        ({"filter": {"sorce": "stripe"}}, "filter.sorce: unknown key"),
        ({"filter": {"received_after": "yesterday"}}, "filter.received_after"),
        ({"filter": {"source": ""}}, "filter.source"),
        (
            {
                "filter": {
                    "received_after": "2024-05-02T00:00:00Z",
                    "received_before": "2024-05-01T00:00:00Z",
                }
            },
            "received_after must be earlier than received_before",
        ),
        (
            {
                "filter": {
                    "received_after": "2024-05-01T00:00:00Z",
                    "received_before": "2024-05-01T00:00:00Z",
                }
            },
            "received_after must be earlier than received_before",
        ),
        ([1, 2], "request must be a JSON object"),
        ("not json", "invalid replay request"),
    ],
)
def test_bad_input_is_a_clear_error(data: object, expected: str) -> None:
    with pytest.raises(InvalidReplayRequestError) as caught:
        ReplayRequest.parse(data)
    assert expected in str(caught.value)


def test_every_problem_is_listed_at_once() -> None:
    with pytest.raises(InvalidReplayRequestError) as caught:
        ReplayRequest.parse({"max_messages": -1, "rate_per_second": -1, "bogus": 1})
    message = str(caught.value)
    assert "max_messages" in message
    assert "rate_per_second" in message
    assert "bogus: unknown key" in message


def test_a_time_without_zone_is_utc() -> None:
    request = ReplayRequest.parse({"filter": {"received_after": "2024-05-01T10:00:00"}})
    assert request.filter.received_after == datetime(2024, 5, 1, 10, tzinfo=UTC)


def test_empty_filter_matches_everything() -> None:
    assert ReplayFilter().matches(envelope())
    assert ReplayFilter().describe() == "all"


@pytest.mark.parametrize(
    ("criteria", "matches"),
    [
        ({"source": "stripe"}, True),
        ({"source": "github"}, False),
        ({"event_type": "invoice.paid"}, True),
        ({"event_type": "invoice.created"}, False),
        ({"delivery_id": "evt_1"}, True),
        ({"delivery_id": "evt_2"}, False),
        ({"source": "stripe", "delivery_id": "evt_2"}, False),
        ({"received_after": "2024-05-01T12:00:00Z"}, True),  # inclusive lower bound
        ({"received_after": "2024-05-01T12:00:01Z"}, False),
        ({"received_before": "2024-05-01T12:00:00Z"}, False),  # exclusive upper bound
        ({"received_before": "2024-05-01T12:00:01Z"}, True),
        (
            {"received_after": "2024-05-01T13:00:00+02:00", "received_before": "2024-05-01T13:00Z"},
            True,
        ),
    ],
)
def test_filter_criteria(criteria: dict[str, str], matches: bool) -> None:
    assert ReplayFilter.model_validate(criteria).matches(envelope()) is matches


def test_event_type_filter_never_matches_an_envelope_without_event_type() -> None:
    assert not ReplayFilter(event_type="invoice.paid").matches(envelope(event_type=None))


@pytest.mark.parametrize(
    "text",
    ['{"rate_per_second": true}', '{"rate_per_second": "5"}', '{"max_messages": false}'],
)
def test_json_booleans_and_strings_are_not_numbers(text: str) -> None:
    with pytest.raises(InvalidReplayRequestError, match="should be a valid"):
        ReplayRequest.parse(text)


def test_integer_rate_is_a_number() -> None:
    assert ReplayRequest.parse('{"rate_per_second": 5}').rate_per_second == 5.0
