"""The replay's token bucket with a burst (:class:`RateLimiter` ``burst``): a batch at once, and
time spent between batches made up, never more than ``burst + rate x span``."""

from __future__ import annotations

from webhook_pipeline.replay.rate import RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_burst_of_ten_then_the_rate_with_pauses_made_up() -> None:
    clock = Clock()
    limiter = RateLimiter(10.0, clock, clock.sleep, burst=10)
    times = []
    for batch in range(5):
        for _ in range(10):
            limiter.acquire()
            times.append(clock.now)
        clock.now += 0.5  # sending the batch takes half of its second
    assert times[:10] == [0.0] * 10
    assert times[10] == 0.5  # the half second spent sending is made up: no sleep
    assert abs(times[-1] - 4.0) < 1e-9  # 50 tokens at 10/s from a full bucket: 4 s
    for i, moment in enumerate(times):  # never more than burst + rate x span
        assert sum(1 for t in times if moment <= t <= moment + 1.0) <= 10 + 10, i


def test_burst_one_keeps_the_interval() -> None:
    clock = Clock()
    limiter = RateLimiter(4.0, clock, clock.sleep)
    moments = []
    for _ in range(5):
        limiter.acquire()
        moments.append(clock.now)
    assert moments == [0.0, 0.25, 0.5, 0.75, 1.0]
