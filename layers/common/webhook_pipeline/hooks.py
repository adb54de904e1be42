"""User hooks: your code, run by the processor after a delivery is applied.

Register one handler per (source, event type), or one for every event type of a source, in a
module of your own, and name that module in the processor's ``HOOKS_MODULE`` environment variable
(it must be importable in the function: ship it in ``functions/processor/`` or in a layer)::

    # functions/processor/my_hooks.py      (HOOKS_MODULE=my_hooks)
    from webhook_pipeline.hooks import HookEvent, hook

    @hook("stripe", "customer.updated")
    def customer_updated(event: HookEvent) -> None:
        payload = event.json()
        upsert_customer(payload["data"]["object"], idempotency_key=event.idempotency_key)

    @hook("github")                        # every event type of the github source
    def any_github_event(event: HookEvent) -> None: ...

Semantics
---------
* A hook runs only for deliveries whose outcome is ``applied`` (never for duplicates of a completed
  delivery, stale or malformed ones), after the delivery record and the resource watermark are
  written.
* At least once: a hook can run more than once for the same delivery (its retry, a crash before
  the processor marked it done, a concurrent redelivery). Use ``event.idempotency_key`` (the
  source and delivery id) to make your side effects idempotent.
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
* A specific (source, event type) hook wins over the source's catch-all hook, which wins over
  a hook registered for every source (``@hook("*")``); at most one hook runs per delivery.
  Hooks for one resource run in sequence order within a batch, but a retried hook can run after
  a newer event's hook: compare ``event.sequence`` if order matters to you.
* Hooks run in the processor's worker threads: keep them thread-safe and well within the
  function timeout.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
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
    """

    source: str
    delivery_id: str
    event_type: str | None
    resource_key: str | None
    sequence: int | None
    received_at: datetime
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def idempotency_key(self) -> str:
        """``"<source>:<delivery_id>"``: stable across every run of the hook for this delivery."""
        return f"{self.source}:{self.delivery_id}"

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
    """Hooks by (source, event type); ``"*"`` as event type matches every event type of the
    source, ``("*", "*")`` every delivery of every source."""

    def __init__(self) -> None:
        self._hooks: dict[tuple[str, str], Hook] = {}

    def register(self, source: str, event_type: str | None, handler: Hook) -> None:
        """Register ``handler`` for ``source`` and ``event_type`` (``None`` or ``"*"``: all).

        Raises
        ------
        ConfigurationError
            A hook is already registered for the same source and event type, or ``source`` is
            ``"*"`` with a specific event type (a hook for every source takes every event).
        """
        key = (source, event_type or ANY_EVENT_TYPE)
        if source == ANY_SOURCE and key[1] != ANY_EVENT_TYPE:
            raise ConfigurationError(
                f"a hook for every source takes every event type, not {event_type!r}"
            )
        if key in self._hooks:
            raise ConfigurationError(f"a hook is already registered for {key}")
        self._hooks[key] = handler

    def hook(self, source: str, event_type: str | None = None) -> Callable[[Hook], Hook]:
        """Decorator form of :meth:`register`; returns the function unchanged."""

        def decorate(handler: Hook) -> Hook:
            self.register(source, event_type, handler)
            return handler

        return decorate

    def find(self, source: str, event_type: str | None) -> Hook | None:
        """The hook for this delivery: exact event type first, then the source's catch-all, then
        the hook for every source (registered with source ``"*"``)."""
        if event_type is not None and (found := self._hooks.get((source, event_type))):
            return found
        return self._hooks.get((source, ANY_EVENT_TYPE)) or self._hooks.get(
            (ANY_SOURCE, ANY_EVENT_TYPE)
        )

    def clear(self) -> None:
        """Forget every hook (tests)."""
        self._hooks.clear()

    def __len__(self) -> int:
        return len(self._hooks)


registry = HookRegistry()
"""The process-wide registry the processor function uses."""

hook = registry.hook
"""``@hook(source, event_type=None)``: register a function in :data:`registry`."""


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
