"""The replay's send rate limit."""

from __future__ import annotations

import time
from collections.abc import Callable


class RateLimiter:
    """Token bucket of capacity ``burst`` (default 1: consecutive acquisitions are at least
    ``1/rate`` s apart). Over any span, acquisitions are at most ``burst + rate x span``; time
    spent between acquisitions (sending a batch of ``burst``) is made up by the next ones, so a
    caller that sends in batches of ``burst`` holds ``rate`` as long as a batch takes less than
    ``burst / rate`` s.

    Parameters
    ----------
    rate_per_second : float | None
        Tokens per second; ``None`` disables the limit.
    clock : Callable[[], float]
        Monotonic clock in seconds (injectable for tests).
    sleep : Callable[[float], None]
        Sleep for seconds (injectable for tests).
    burst : int
        Tokens that may be taken at once (>= 1).
    """

    def __init__(
        self,
        rate_per_second: float | None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        burst: int = 1,
    ) -> None:
        self.interval = 0.0 if rate_per_second is None else 1.0 / rate_per_second
        self._slack = (max(1, burst) - 1) * self.interval
        self._clock = clock
        self._sleep = sleep
        self._next_at: float | None = None

    def delay(self) -> float:
        """Seconds :meth:`acquire` would sleep now (0 when a token is available)."""
        if self._next_at is None or self.interval == 0:
            return 0.0
        return max(0.0, self._next_at - self._slack - self._clock())

    def acquire(self) -> float:
        """Wait for a token; return the seconds slept."""
        wait = self.delay()
        if wait > 0:
            self._sleep(wait)
        now = self._clock()
        self._next_at = max(now, self._next_at or now) + self.interval
        return wait
