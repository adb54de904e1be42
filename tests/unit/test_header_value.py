"""Reading an identity header that API Gateway may have joined from repeats (invariant I8)."""

from __future__ import annotations

import pytest
from webhook_pipeline.errors import BadDeliveryError
from webhook_pipeline.webhook_request import header_value


@pytest.mark.parametrize(
    ("joined", "read"),
    [
        ("d1", "d1"),
        ("d1,d1", "d1"),
        ("d1, d1", "d1"),  # RFC 9110's list syntax allows spaces after the comma
        ("d1,\td1,d1", "d1"),
        ("d1,", "d1"),  # an empty element is no value
        (",", None),
        (" d1 ", " d1 "),  # a single value is kept as sent
    ],
)
def test_a_repeated_header_with_one_value_reads_as_that_value(
    joined: str, read: str | None
) -> None:
    assert header_value({"x-github-delivery": joined}, "X-GitHub-Delivery") == read


@pytest.mark.parametrize("joined", ["d1,d2", "d1, d2", "d2,d1,d1"])
def test_a_repeated_header_with_two_values_is_ambiguous(joined: str) -> None:
    with pytest.raises(BadDeliveryError) as err:
        header_value({"x-github-delivery": joined}, "X-GitHub-Delivery")
    assert err.value.reason == "field_ambiguous"


def test_an_absent_header_reads_as_none() -> None:
    assert header_value({}, "X-GitHub-Delivery") is None
