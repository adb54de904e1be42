"""The one JSON-object parse of the providers: what is not a JSON object is ``None``, never an
exception, for bytes and text alike."""

from __future__ import annotations

import pytest
from webhook_pipeline.providers.json_body import json_object, with_field

DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    "body", [b"", b"not json", b"[1, 2]", b'"text"', b"1", b"null", b'{"a": 1', DEEP, "[{}]"]
)
def test_anything_but_an_object_is_none(body: bytes | str) -> None:
    assert json_object(body) is None


@pytest.mark.parametrize("body", [b'{"a": {"b": 1}}', '{"a": {"b": 1}}'])
def test_an_object_from_bytes_or_text(body: bytes | str) -> None:
    assert json_object(body) == {"a": {"b": 1}}


def test_with_field_sets_a_field_of_an_object_only() -> None:
    assert with_field(b'{"a": 1}', "t", 5) == b'{"a":1,"t":5}'
    assert with_field(b"[1]", "t", 5) == b"[1]"
