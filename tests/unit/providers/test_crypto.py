"""Strict hex and base64 decoding shared by the providers' verification."""

from __future__ import annotations

import pytest
from webhook_pipeline.providers.crypto import decode_base64, decode_hex

pytestmark = pytest.mark.unit


class TestDecoders:
    @pytest.mark.parametrize("text", ["", "abc", "zz", "ab cd", " abcd", "abcd\n", "0x12", "é1"])
    def test_decode_hex_rejects(self, text: str) -> None:
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


class TestMatchSecretsAny:
    """One secret may have produced one of several digests (URL variants)."""

    def test_any_digest_of_a_secret_matches_and_the_current_secret_wins(self) -> None:
        from webhook_pipeline.providers.crypto import hmac_digest, match_secrets_any

        def digests(secret: str) -> list[bytes]:
            return [hmac_digest(secret.encode(), m) for m in (b"https://a/x", b"https://a:443/x")]

        with_port = hmac_digest(b"old", b"https://a:443/x")
        assert match_secrets_any(["new", "old"], digests, [with_port]) == 1
        assert match_secrets_any(["old", "new"], digests, [with_port]) == 0

    def test_no_digest_matching_is_signature_invalid_and_no_secret_is_a_config_error(
        self,
    ) -> None:
        from webhook_pipeline.errors import ConfigurationError, VerificationError
        from webhook_pipeline.providers.crypto import match_secrets_any

        with pytest.raises(VerificationError, match="signature_invalid"):
            match_secrets_any(["a"], lambda s: [b"x", b"y"], [b"z"])
        for secrets in ([], [""]):
            with pytest.raises(ConfigurationError):
                match_secrets_any(secrets, lambda s: [b"x"], [b"x"])


class TestMatchHmac:
    """The one HMAC check of every scheme keyed with the secret as UTF-8 (Stripe, GitHub, Slack,
    ...): one digest per secret, compared with every candidate."""

    @staticmethod
    def digest(secret: str, message: bytes) -> bytes:
        import hashlib
        import hmac

        return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).digest()

    def test_the_index_of_the_secret_that_signed_any_candidate(self) -> None:
        from webhook_pipeline.providers.crypto import match_hmac

        message = b"1700000000.{}"
        signed_by_old = self.digest("whsec_old", message)
        junk = self.digest("whsec_other", message)
        assert match_hmac(["whsec_new", "whsec_old"], message, [junk, signed_by_old]) == 1
        assert match_hmac(["whsec_old", "whsec_new"], message, [junk, signed_by_old]) == 0
        # A non-ASCII secret is keyed as its UTF-8 bytes.
        assert match_hmac(["clé"], message, [self.digest("clé", message)]) == 0

    def test_no_match_and_no_secret(self) -> None:
        from webhook_pipeline.errors import ConfigurationError, VerificationError
        from webhook_pipeline.providers.crypto import match_hmac

        with pytest.raises(VerificationError) as err:
            match_hmac(["a", "b"], b"m", [self.digest("c", b"m"), self.digest("a", b"other")])
        assert err.value.reason == "signature_invalid"
        for secrets in ([], [""], ["a", ""]):
            with pytest.raises(ConfigurationError):
                match_hmac(secrets, b"m", [self.digest("a", b"m")])
