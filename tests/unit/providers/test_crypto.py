"""Strict hex and base64 decoding shared by the providers' verification."""

from __future__ import annotations

import pytest
from webhook_pipeline.providers.crypto import decode_base64, decode_hex

pytestmark = pytest.mark.unit


class TestDecoders:
    @pytest.mark.parametrize("text", ["", "abc", "zz", "ab cd", " abcd", "abcd\n", "0x12", "é1"])
    def test_decode_hex_rejects(self, text: str) -> None:
        if text:
            assert decode_hex(text) is None

    def test_decode_hex_accepts_lower_case_and_upper_case_on_request(self) -> None:
        assert decode_hex("abcd") == b"\xab\xcd"
        assert decode_hex("aBcD") is None
        assert decode_hex("aBcD", uppercase=True) == b"\xab\xcd"

    @pytest.mark.parametrize(
        "text", ["abc", "ab=c", "a b=", "ab\n==", "-_ab", "abcd===", "é123", "YWJj\n"]
    )
    def test_decode_base64_rejects(self, text: str) -> None:
        assert decode_base64(text) is None

    def test_decode_base64_accepts_padded_standard_alphabet(self) -> None:
        assert decode_base64("YWI+/w==") == b"ab>\xff"
