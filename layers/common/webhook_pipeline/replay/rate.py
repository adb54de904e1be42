"""The replay's send rate limit."""

from __future__ import annotations

import time
from collections.abc import Callable


class RateLimiter:
    """Token bucket of capacity 1: consecutive acquisitions are at least ``1/rate`` s apart.

    Parameters
    ----------
    rate_per_second : float | None
        Tokens per second; ``None`` disables the limit.
    clock : Callable[[], float]
        Monotonic clock in seconds (injectable for tests).
    sleep : Callable[[float], None]
        Sleep for seconds (injectable for tests).
    """

    def __init__(
        self,
        rate_per_second: float | None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.interval = 0.0 if rate_per_second is None else 1.0 / rate_per_second
        self._clock = clock
        self._sleep = sleep
        self._next_at: float | None = None

    def delay(self) -> float:
        """Seconds :meth:`acquire` would sleep now (0 when a token is available)."""
        if self._next_at is None or self.interval == 0:
            return 0.0
        return max(0.0, self._next_at - self._clock())

    def acquire(self) -> float:
        """Wait for a token; return the seconds slept."""
        wait = self.delay()
        if wait > 0:
            self._sleep(wait)
        now = self._clock()
        self._next_at = max(now, self._next_at or now) + self.interval
        return wait
