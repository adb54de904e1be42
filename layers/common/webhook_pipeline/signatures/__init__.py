"""Signature schemes, one module per provider, behind the :class:`SignatureScheme` interface.

Adding a provider is one module plus its tests: subclass :class:`SignatureScheme`, give it a
unique ``name`` and register it in :data:`SCHEMES` (``registry.py``); the ingest handler never
changes.
"""

from webhook_pipeline.signatures.base import SignatureScheme, Verification
from webhook_pipeline.signatures.registry import SCHEMES, build_scheme

__all__ = ["SCHEMES", "SignatureScheme", "Verification", "build_scheme"]
