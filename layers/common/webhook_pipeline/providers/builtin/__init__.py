"""The built-in providers: one module (or package) per sender, each registering one provider
under its module name (``standard_webhooks`` is provider ``standard-webhooks``).

The building blocks they share (the :class:`~webhook_pipeline.providers.base.Provider` base
class, the value types, the scheme shapes, the crypto, the handshakes, the registry and the test
kit) are the modules of :mod:`webhook_pipeline.providers` itself; nothing else lives here, so
the registry finds the built-in providers by listing this package.
"""
