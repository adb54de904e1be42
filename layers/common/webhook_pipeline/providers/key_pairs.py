"""Providers whose sender signs with a private key and whose sources store the public key
(Discord's Ed25519, SendGrid's ECDSA P-256): the stored key validated, matched against a request
and derived from a development signing key in one place; each provider says only how its keys
are read and written."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence

from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.crypto import match_public_keys


class KeyPairProvider[PublicKey, PrivateKey](Provider):
    """A provider with an asymmetric signature scheme: sources store the public key (validated
    by :meth:`validate_secret`), the simulator and the tests sign with the private key.

    A subclass implements :meth:`public_key` (a stored public key read and validated; cache it,
    it runs on every request), :meth:`private_key` (a development signing key read) and
    :meth:`public_key_text` (the public half of a private key, as the sender's console shows it).
    """

    @abstractmethod
    def public_key(self, stored: str) -> PublicKey:
        """The public key a source stores, read.

        Raises
        ------
        ConfigurationError
            Not in the provider's public-key format (the key never in the message).
        """

    @abstractmethod
    def private_key(self, secret: str) -> PrivateKey:
        """A development signing key, read.

        Raises
        ------
        ConfigurationError
            Not in the provider's private-key format.
        """

    @abstractmethod
    def public_key_text(self, key: PrivateKey) -> str:
        """The public half of ``key`` in the format sources store."""

    def validate_secret(self, secret: str) -> None:
        """The stored public key, read as :meth:`public_key` reads it (raises
        ``ConfigurationError``)."""
        self.public_key(secret)

    def match_keys(self, secrets: Sequence[str], verify: Callable[[PublicKey], object]) -> int:
        """Index of the first stored public key under which ``verify`` returns (it raises
        ``cryptography.exceptions.InvalidSignature`` when the signature does not verify).

        Raises
        ------
        ConfigurationError
            No key at all, or an empty one.
        VerificationError
            ``signature_invalid`` when no key verifies the signature.
        """
        return match_public_keys(secrets, lambda stored: verify(self.public_key(stored)))

    def verification_secret(self, signing_secret: str) -> str:
        """The public key (what sources store) of the private ``signing_secret``."""
        return self.public_key_text(self.private_key(signing_secret))

    def dev_secret_value(self) -> str:
        return self.verification_secret(self.dev_secret)
