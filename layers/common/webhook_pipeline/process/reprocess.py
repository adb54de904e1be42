"""Reprocess: the hook of a delivery already applied runs again, once per replay generation.

An envelope with ``reprocess`` (``{"generation": n, "job": ...}``, sent by a replay from the
archive in reprocess mode) never writes a delivery record and never touches a watermark
(invariants I4, I13). The store is read first (:meth:`DeliveryStore.read_reprocess`):

* no record -> ``skipped`` ("not recorded"): a missing delivery is never applied as fresh here;
* a ``stale`` record -> ``skipped`` ("recorded as stale"): a stale event is never applied;
* an ``applied`` record whose first hook is still ``pending`` -> ``skipped`` ("hook pending"):
  the first run's retry completes it, a reprocess does not stand in for it;
* this generation's mark exists -> ``skipped`` ("generation n reprocessed already"): a resumed
  job, a redelivered message or a second copy in one batch runs nothing;
* a body whose content digest differs from the recorded one -> ``skipped``;
* no hook registered for the delivery -> ``skipped`` ("no hook").

Otherwise the hook runs with ``replay_generation = n`` (its idempotency key
``"<source>:<delivery id>:g<n>"``) and its :class:`~webhook_pipeline.hooks.Effects` commit with
the generation's mark on ``attribute_not_exists`` (:meth:`DeliveryStore.mark_reprocessed`):
``reprocessed``. A concurrent copy that loses that race commits nothing (``skipped``, its effects
discarded). A failing hook or a failed commit is a ``retry``, as on a first run.
"""

from __future__ import annotations

from webhook_pipeline.envelope import Envelope
from webhook_pipeline.errors import HookError, MalformedEnvelopeError, StoreBugError, TransientError
from webhook_pipeline.hooks import Effects, Hook, HookEvent, HookRegistry
from webhook_pipeline.process.bodies import load_body
from webhook_pipeline.process.model import (
    HookState,
    Message,
    Outcome,
    RecordResult,
    ReprocessState,
)
from webhook_pipeline.process.ports import DeliveryStore, PayloadReader


def hook_event(
    envelope: Envelope,
    body: bytes,
    generation: int | None = None,
    superseded_by: int | None = None,
) -> HookEvent:
    """The event a hook receives for ``envelope`` (``generation`` and ``superseded_by``: a
    reprocess's, else None)."""
    return HookEvent(
        source=envelope.source,
        delivery_id=envelope.delivery_id,
        event_type=envelope.event_type,
        resource_key=envelope.resource_key,
        sequence=envelope.sequence,
        received_at=envelope.received_at,
        headers=dict(envelope.headers),
        body=body,
        replay_generation=generation,
        superseded_by=superseded_by,
    )


def call_hook(handler: Hook, event: HookEvent) -> object | HookError:
    """What ``handler`` returned, or a :class:`HookError` for whatever it raised
    (``KeyboardInterrupt`` alone passes through: the operator stopping the process)."""
    try:
        return handler(event)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit, CancelledError...: only this record fails
        error = HookError(f"hook failed: {type(exc).__name__}: {exc}")
        error.__cause__ = exc
        return error


def skip_reason(state: ReprocessState, envelope: Envelope, generation: int) -> str | None:
    """Why a reprocess of ``envelope`` runs no hook, or ``None`` when its hook is due."""
    if state.stored_outcome is None:
        return "not recorded"
    if state.stored_outcome is not Outcome.APPLIED:
        return f"recorded as {state.stored_outcome.value}"
    if state.hook_state is HookState.PENDING:
        return "hook pending"
    if state.marked:
        return f"generation {generation} reprocessed already"
    if state.stored_digest is not None and state.stored_digest != envelope.content_digest:
        return "body differs from the recorded delivery"
    return None


class Reprocessor:
    """Runs the reprocess of one envelope (see the module docstring).

    Parameters
    ----------
    store : DeliveryStore
        Reads the record and the generation's mark, commits the mark with the hook's effects.
    payloads : PayloadReader
        Claim-check bodies.
    hooks : HookRegistry
        User hooks by (source, event type).
    """

    def __init__(self, store: DeliveryStore, payloads: PayloadReader, hooks: HookRegistry) -> None:
        self._store = store
        self._payloads = payloads
        self._hooks = hooks

    def reprocess(self, message: Message, envelope: Envelope) -> RecordResult:
        """The outcome of a reprocess envelope: ``reprocessed``, ``skipped`` (with the reason),
        ``retry``, ``malformed`` (a body that fails its checks) or ``bug``. Never raises for
        this record's failure."""
        assert envelope.reprocess is not None
        mid, generation = message.message_id, envelope.reprocess.generation
        try:
            state = self._store.read_reprocess(envelope.source, envelope.delivery_id, generation)
        except TransientError as exc:
            return RecordResult(mid, Outcome.RETRY, envelope, reason=str(exc), error=exc)
        except StoreBugError as exc:
            return RecordResult(mid, Outcome.BUG, envelope, reason=str(exc), error=exc)
        handler = self._hooks.find(envelope.source, envelope.event_type)
        reason = skip_reason(state, envelope, generation) or (None if handler else "no hook")
        if reason is not None or handler is None:
            return RecordResult(mid, Outcome.SKIPPED, envelope, reason=reason)
        try:
            body = load_body(envelope, self._payloads)
        except MalformedEnvelopeError as exc:
            return RecordResult(mid, Outcome.MALFORMED, envelope, reason=str(exc), error=exc)
        except TransientError as exc:
            return RecordResult(mid, Outcome.RETRY, envelope, reason=str(exc), error=exc)
        try:
            newer = self._superseded_by(envelope)
        except TransientError as exc:
            return RecordResult(mid, Outcome.RETRY, envelope, reason=str(exc), error=exc)
        except StoreBugError as exc:
            return RecordResult(mid, Outcome.BUG, envelope, reason=str(exc), error=exc)
        returned = call_hook(handler, hook_event(envelope, body, generation, newer))
        if isinstance(returned, HookError):
            return _failed(mid, envelope, returned)
        return self._commit(mid, envelope, state, returned)

    def _superseded_by(self, envelope: Envelope) -> int | None:
        """The resource's watermark when it is newer than the event's sequence, else ``None``
        (no resource key: nothing to supersede it)."""
        if envelope.resource_key is None or envelope.sequence is None:
            return None
        watermark = self._store.read_watermark(envelope.source, envelope.resource_key)
        return watermark if watermark is not None and watermark > envelope.sequence else None

    def _commit(
        self, mid: str, envelope: Envelope, state: ReprocessState, returned: object
    ) -> RecordResult:
        """Commit the generation's mark with the hook's effects; the record's result."""
        assert envelope.reprocess is not None
        generation, job = envelope.reprocess.generation, envelope.reprocess.job
        try:
            committed = self._store.mark_reprocessed(
                envelope.source,
                envelope.delivery_id,
                generation,
                job=job,
                expires_at=state.expires_at,
                effects=returned.writes if isinstance(returned, Effects) else (),
            )
        except HookError as exc:  # one of the hook's own write conditions failed
            return _failed(mid, envelope, exc)
        except TransientError as exc:
            return RecordResult(
                mid, Outcome.RETRY, envelope, reason=str(exc), hook="ran", error=exc
            )
        except StoreBugError as exc:
            return RecordResult(mid, Outcome.BUG, envelope, reason=str(exc), hook="ran", error=exc)
        if not committed:
            reason = f"generation {generation} reprocessed by another run first; effects discarded"
            return RecordResult(mid, Outcome.SKIPPED, envelope, reason=reason, hook="ran")
        reason = f"generation {generation} of job {job}"
        return RecordResult(mid, Outcome.REPROCESSED, envelope, reason=reason, hook="ran")


def _failed(mid: str, envelope: Envelope, error: HookError) -> RecordResult:
    return RecordResult(mid, Outcome.RETRY, envelope, reason=str(error), hook="failed", error=error)
