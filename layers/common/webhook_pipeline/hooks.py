"""User hooks: your code, run by the processor after a delivery is applied (docs/hooks.md).

Register one handler per (source, event type) or per (provider, event type), or one for every
event type of a source or provider, in a module of your own, and name that module in the
processor's ``HOOKS_MODULE`` environment variable (the template's ``HooksModule`` parameter; it
must be importable in the function: ship it in ``functions/processor/`` or in a layer)::

    # functions/processor/my_hooks.py      (HooksModule=my_hooks)
    from webhook_pipeline import hooks
    from webhook_pipeline.hooks import HookEvent

    @hooks.on(provider="stripe", event_type="customer.updated")   # every Stripe source
    def customer_updated(event: HookEvent) -> None:
        payload = event.json()
        upsert_customer(payload["data"]["object"], idempotency_key=event.idempotency_key)

    @hooks.on(source="github")             # every event type of the github source
    def any_github_event(event: HookEvent) -> None: ...

``@hook("github")`` is ``@hooks.on(source="github")``. Which source is which provider's, the
processor reads from the sources file (``SOURCES_FILE``) at cold start.

Semantics
---------
* A hook runs only for deliveries whose outcome is ``applied`` (never for duplicates of a completed
  delivery, stale or malformed ones), after the delivery record and the resource watermark are
  written.
* At least once: a hook can run more than once for the same delivery (its retry, a crash before
  the processor marked it done, a concurrent redelivery). Use ``event.idempotency_key`` (the
  source and delivery id) to make your side effects idempotent.
* Reprocess (a replay from the archive in reprocess mode, after a fix): the hook of a delivery
  recorded as ``applied`` runs again, once per replay generation, with
  ``event.replay_generation`` set (``None`` on the first run) and
  ``event.idempotency_key = "<source>:<delivery id>:g<generation>"``, so a side effect keyed on
  it happens once more per generation, not once more per copy. Nothing is recorded and no
  watermark moves; a stale or unrecorded delivery, or one whose first hook is still pending, is
  ``skipped`` and its hook does not run. Effects commit with the generation's mark, on the
  condition that the mark does not exist yet: exactly once in effect per generation. An event
  applied in its time and overtaken since (its resource's watermark is now newer) is never
  presented as the resource's latest: ``event.superseded_by`` carries the newer watermark, so a
  hook that writes a resource's current state from its events skips it, and one that records
  each event (a ledger, a notification after a fix) runs for it.
* A hook that raises makes the record a ``retry`` (reported in ``batchItemFailures``), whatever
  it raises (``SystemExit`` and other ``BaseException`` too): the other records of the batch
  are unaffected. Only ``KeyboardInterrupt`` passes through, as the process being stopped. The
  redelivery finds the delivery already recorded with ``hook_state = pending`` and runs the hook
  only: the watermark is not applied again and nothing is recorded twice. After
  ``maxReceiveCount`` failed attempts the message reaches the DLQ; a replay runs the hook again.
* Exactly once in effect, for effects kept in DynamoDB: a hook may return :class:`Effects`, the
  DynamoDB writes of its side effect (``TransactWriteItems`` entries: ``Put``, ``Update``,
  ``Delete``, ``ConditionCheck``). They are committed in one transaction with the done mark,
  on the condition that the delivery's hook is still pending: a run that crashed before the
  commit left nothing (its redelivery runs the hook again and commits once), and a second,
  concurrent run commits nothing (its effects are discarded, the first run's stand). Up to 99
  writes, none on the delivery record itself.
* At most one hook runs per delivery, the first registered of: (source, event type), the
  source's catch-all, (provider, event type), the provider's catch-all, the hook for every
  source (``@hook("*")``). A source's own hook replaces its provider's for that source, even a
  catch-all against the provider's hook for the exact event type.
  Hooks for one resource run in sequence order within a batch, but a retried hook can run after
  a newer event's hook: compare ``event.sequence`` if order matters to you.
* Hooks run in the processor's worker threads: keep them thread-safe and well within the
  function timeout.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from webhook_pipeline.errors import ConfigurationError


@dataclass(frozen=True)
class HookEvent:
    """The verified event a hook receives.

    Attributes
    ----------
    source : str
        Source name.
    delivery_id : str
        The sender's delivery id.
    event_type : str | None
        Event type, when the source defines one.
    resource_key : str | None
        The resource the event is about, when the source defines one.
    sequence : int | None
        The event's ordering value for ``resource_key``.
    received_at : datetime
        When the ingest function received the request (UTC).
    headers : dict[str, str]
        Forwarded request headers (lower-cased names; never signature headers).
    body : bytes
        The raw body bytes, exactly as signed by the sender (integrity-checked).
    replay_generation : int | None
        The replay generation (>= 1) when a reprocess runs the hook again; ``None`` on the
        delivery's first run (and its retries).
    superseded_by : int | None
        For a reprocess of an event of an ordered resource: the resource's watermark (a newer
        sequence) when it has moved past ``sequence`` since the event was applied, read just
        before the hook runs; ``None`` when the event is still the resource's latest, and always
        on a first run (an applied first run is never older than its watermark).
    """

    source: str
    delivery_id: str
    event_type: str | None
    resource_key: str | None
    sequence: int | None
    received_at: datetime
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    replay_generation: int | None = None
    superseded_by: int | None = None

    @property
    def idempotency_key(self) -> str:
        """``"<source>:<delivery_id>"`` on the first run, stable across every run of the hook for
        this delivery; ``"<source>:<delivery_id>:g<replay_generation>"`` for a reprocess, stable
        across every run of that generation."""
        if self.replay_generation is None:
            return f"{self.source}:{self.delivery_id}"
        return f"{self.source}:{self.delivery_id}:g{self.replay_generation}"

    def json(self) -> Any:
        """The body parsed as JSON (raises ``ValueError`` when it is not JSON)."""
        return json.loads(self.body)


#: At most this many writes in :class:`Effects` (DynamoDB's 100 per transaction, less the mark).
MAX_EFFECTS = 99


@dataclass(frozen=True)
class Effects:
    """What a hook returns to have its DynamoDB writes committed atomically with its done mark.

    Attributes
    ----------
    writes : tuple[dict[str, Any], ...]
        ``TransactWriteItems`` entries in the low-level client's shape, e.g.
        ``{"Put": {"TableName": ..., "Item": {...}, "ConditionExpression": ...}}``; at most
        :data:`MAX_EFFECTS`. A write whose own condition fails cancels the commit: the hook
        then counts as failed and is retried.
    """

    writes: tuple[dict[str, Any], ...]

    def __post_init__(self) -> None:
        if not self.writes or len(self.writes) > MAX_EFFECTS:
            raise ConfigurationError(f"Effects takes 1 to {MAX_EFFECTS} writes")


Hook = Callable[[HookEvent], object]
ANY_EVENT_TYPE = "*"
ANY_SOURCE = "*"


class HookRegistry:
    """Hooks by source or by provider, and by event type.

    Which hook a delivery of source ``s`` (provider ``p``) and event type ``t`` runs, the first
    registered of: ``(source s, t)``, ``(source s, "*")``, ``(provider p, t)``,
    ``(provider p, "*")``, ``(source "*", "*")``. At most one hook runs per delivery: a source's
    own hook replaces its provider's for that source.

    Parameters
    ----------
    providers : Mapping[str, str] | None
        Source name -> provider name (see :meth:`use_sources`); without it, provider hooks match
        no delivery.
    """

    def __init__(self, providers: Mapping[str, str] | None = None) -> None:
        self._hooks: dict[tuple[str, str, str], Hook] = {}
        self._providers: dict[str, str] = dict(providers or {})

    def register(self, source: str, event_type: str | None, handler: Hook) -> None:
        """Register ``handler`` for ``source`` and ``event_type`` (``None`` or ``"*"``: all).

        Raises
        ------
        ConfigurationError
            A hook is already registered for the same source and event type, or ``source`` is
            ``"*"`` with a specific event type (a hook for every source takes every event).
        """
        if source == ANY_SOURCE and (event_type or ANY_EVENT_TYPE) != ANY_EVENT_TYPE:
            raise ConfigurationError(
                f"a hook for every source takes every event type, not {event_type!r}"
            )
        self._add("source", source, event_type, handler)

    def register_provider(self, provider: str, event_type: str | None, handler: Hook) -> None:
        """Register ``handler`` for every source of ``provider`` (a provider name such as
        ``"stripe"``) and ``event_type`` (``None`` or ``"*"``: all).

        Raises
        ------
        ConfigurationError
            A hook is already registered for the same provider and event type, or ``provider``
            is ``"*"`` (a hook for every source is registered by source).
        """
        if provider == ANY_SOURCE:
            raise ConfigurationError('a hook for every source is registered as hook("*")')
        self._add("provider", provider, event_type, handler)

    def _add(self, kind: str, name: str, event_type: str | None, handler: Hook) -> None:
        key = (kind, name, event_type or ANY_EVENT_TYPE)
        if key in self._hooks:
            raise ConfigurationError(f"a hook is already registered for {kind} {key[1:]}")
        self._hooks[key] = handler

    def hook(self, source: str, event_type: str | None = None) -> Callable[[Hook], Hook]:
        """Decorator form of :meth:`register`; returns the function unchanged."""
        return self.on(source=source, event_type=event_type)

    def on(
        self,
        *,
        source: str | None = None,
        provider: str | None = None,
        event_type: str | None = None,
    ) -> Callable[[Hook], Hook]:
        """Decorator: register the function for one ``source`` or for every source of one
        ``provider`` (exactly one of the two), and ``event_type`` (``None``: all).

        Raises
        ------
        ConfigurationError
            Neither or both of ``source`` and ``provider``; see :meth:`register` and
            :meth:`register_provider`.
        """
        if (source is None) == (provider is None):
            raise ConfigurationError("a hook names either source= or provider=")

        def decorate(handler: Hook) -> Hook:
            if source is not None:
                self.register(source, event_type, handler)
            else:
                assert provider is not None
                self.register_provider(provider, event_type, handler)
            return handler

        return decorate

    def use_sources(self, providers: Mapping[str, str]) -> None:
        """Tell the registry each source's provider (source name -> provider name), which
        provider hooks match on (the processor reads it from the sources file at cold start)."""
        self._providers = dict(providers)

    @property
    def has_provider_hooks(self) -> bool:
        """Whether a hook is registered by provider (the processor then reads the sources)."""
        return any(kind == "provider" for kind, _, _ in self._hooks)

    def providers_without_source(self) -> list[str]:
        """Providers a hook is registered for that no known source uses (a typo, or a source
        not configured yet), sorted."""
        used = set(self._providers.values())
        named = {name for kind, name, _ in self._hooks if kind == "provider"}
        return sorted(named - used)

    def find(self, source: str, event_type: str | None) -> Hook | None:
        """The hook for a delivery of ``source`` (see the class for the order), or ``None``."""
        provider = self._providers.get(source)
        candidates = [("source", source)]
        if provider is not None:
            candidates.append(("provider", provider))
        for kind, name in candidates:
            if event_type is not None and (found := self._hooks.get((kind, name, event_type))):
                return found
            if found := self._hooks.get((kind, name, ANY_EVENT_TYPE)):
                return found
        return self._hooks.get(("source", ANY_SOURCE, ANY_EVENT_TYPE))

    def clear(self) -> None:
        """Forget every hook and the sources' providers (tests)."""
        self._hooks.clear()
        self._providers.clear()

    def __len__(self) -> int:
        return len(self._hooks)


registry = HookRegistry()
"""The process-wide registry the processor function uses."""

hook = registry.hook
"""``@hook(source, event_type=None)``: register a function in :data:`registry` for one source."""

on = registry.on
"""``@on(source=... | provider=..., event_type=None)``: register a function in :data:`registry`
for one source or for every source of one provider."""


def load_hooks_module(name: str | None) -> None:
    """Import the user module ``name`` (which registers its hooks on import); no-op for ``None``.

    Raises
    ------
    ConfigurationError
        The module cannot be imported (fails the cold start loudly).
    """
    if not name:
        return
    try:
        importlib.import_module(name)
    except Exception as exc:
        raise ConfigurationError(f"HOOKS_MODULE {name!r} cannot be imported: {exc}") from exc
