"""The key handling Discord (Ed25519) and SendGrid (ECDSA P-256) share: the public key a source
stores is validated, derived from a development signing key, and matched against a request in
one place (:class:`KeyPairProvider`)."""

from __future__ import annotations

import pytest
from webhook_pipeline.errors import ConfigurationError, VerificationError
from webhook_pipeline.providers.key_pairs import KeyPairProvider

from tests.unit.providers.conftest import build, make_request

NOW = 1_700_000_000


@pytest.mark.parametrize("name", ["discord", "sendgrid"])
def test_the_stored_public_key_is_derived_validated_and_matched(name: str) -> None:
    provider = build(name)
    assert isinstance(provider, KeyPairProvider)
    signing = [provider.random_secret(bytes([i]) * 32) for i in (1, 2)]
    public = [provider.verification_secret(s) for s in signing]
    assert public[0] != public[1]
    for key in public:
        provider.validate_secret(key)  # what sources store is accepted
    body = b'{"type":2,"id":"i1"}'
    headers = provider.sign(body, signing[1], timestamp=NOW, delivery_id="d1")
    request = make_request(headers, body)
    # the previous key verifies: its index, whatever the current one is
    assert provider.verify(request, public, NOW).secret_index == 1
    with pytest.raises(VerificationError) as err:
        provider.verify(request, public[:1], NOW)
    assert err.value.reason == "signature_invalid"
    with pytest.raises(ConfigurationError):
        provider.validate_secret(signing[0] + "00")
    assert provider.dev_secret_value() == provider.verification_secret(provider.dev_secret)
