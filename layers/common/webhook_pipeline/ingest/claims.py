"""Claims at the dedup gate, as the ingest use case sees them: the outcome of a claim, the key
of a delivery, the circuit breaker that skips an unavailable gate."""

from __future__ import annotations

import enum
import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

_PLAIN_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class ClaimOutcome(enum.Enum):
    """What a claim attempt found."""

    CLAIMED = "claimed"  # this invocation holds the claim
    DUPLICATE = "duplicate"  # already enqueued by an earlier request
    IN_FLIGHT = "in_flight"  # another request holds a pending claim: not yet durable


@dataclass(frozen=True)
class Claim:
    """One claim at the gate.

    Attributes
    ----------
    key : str
        The delivery's gate key (:func:`gate_key`).
    token : str
        This invocation's token: only the holder of the token confirms or releases the claim.
    digest : str
        Hex SHA-256 of the delivery's content (volatile fields removed), kept with the claim so
        a later duplicate with another body is noticed (invariant I8).
    """

    key: str
    token: str
    digest: str

    @property
    def pending_value(self) -> str:
        """The value while the delivery is being enqueued: ``p:<token>:<digest>``."""
        return f"p:{self.token}:{self.digest}"

    @property
    def done_value(self) -> str:
        """The value once SQS accepted the delivery: ``d:<token>:<digest>``."""
        return f"d:{self.token}:{self.digest}"


@dataclass(frozen=True)
class ClaimResult:
    """What a claim found, and for a duplicate the content digest of the copy before it.

    ``stored_digest`` is ``None`` when the earlier claim did not record one.
    """

    outcome: ClaimOutcome
    stored_digest: str | None = None

    @classmethod
    def from_previous(cls, previous: bytes | str | None) -> ClaimResult:
        """Interpret the value a claim found at its key (``None``: nothing, we hold it now)."""
        if previous is None:
            return cls(ClaimOutcome.CLAIMED)
        text = previous.decode("utf-8", "replace") if isinstance(previous, bytes) else previous
        state, _, rest = text.partition(":")
        digest = rest.partition(":")[2] or None
        if state == "p":
            return cls(ClaimOutcome.IN_FLIGHT, digest)
        return cls(ClaimOutcome.DUPLICATE, digest)


def gate_key(prefix: str, source: str, delivery_id: str) -> str:
    """Return the Redis key of ``(source, delivery_id)``.

    Parameters
    ----------
    prefix : str
        Key prefix (``"whd:"`` by default), lets several stacks share one cache.
    source : str
        Source name (``[a-z0-9_-]``, validated by the sources file: contains no ``:``).
    delivery_id : str
        The sender's delivery id (at most 256 UTF-8 bytes; longer ones are refused earlier).

    Returns
    -------
    str
        ``{prefix}{source}:{id}`` for plain ids (at most 64 ASCII characters),
        ``{prefix}{source}:#{sha256 hex}`` otherwise: at most ``len(prefix)`` + 64 + 1 + 65
        bytes whatever the id (Redis allows 512 MB).
    """
    if _PLAIN_ID.match(delivery_id):
        return f"{prefix}{source}:{delivery_id}"
    digest = hashlib.sha256(delivery_id.encode("utf-8")).hexdigest()
    return f"{prefix}{source}:#{digest}"


@dataclass
class CircuitBreaker:
    """Skips the gate for ``cooldown_seconds`` after it failed, so an outage costs one timeout
    per container per cooldown instead of one per request.

    ``now`` is injectable (seconds, monotonic) for tests.
    """

    cooldown_seconds: float
    now: Callable[[], float] = time.monotonic
    _open_until: float = 0.0

    def allow(self) -> bool:
        return bool(self.now() >= self._open_until)

    def trip(self) -> None:
        self._open_until = self.now() + self.cooldown_seconds
