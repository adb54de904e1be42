"""The chaos run's traffic: what the sender sends and what it logged.

Pure parts only (no network, no process): the sender's log (:class:`Copy` per request sequence,
:class:`AttemptLog` per request), the traffic's shape (sources interleaved, duplicate copies,
paced sends with bursts), its progress lines and the sender's summary in the report.
:class:`webhook_pipeline_ops.chaos.run.Run` sends it.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

#: The sources a run sends from unless ``--source`` names others.
DEFAULT_SOURCES = ("stripe", "github", "shopify", "slack", "standard-webhooks")

# ------------------------------------------------------------------------------------------------
# the sender's log


@dataclass
class AttemptLog:
    """One request of a copy: the answer's status (``None``: no answer), its time since the run
    started (seconds), latency (ms), without an answer, why, and the hex SHA-256 of the exact
    body bytes sent (``None`` in logs written before it was kept)."""

    status: int | None
    at: float
    ms: float
    error: str | None = None
    body_sha256: str | None = None


@dataclass
class Copy:
    """One copy of a delivery as the sender sent it (an original, or a duplicate with the same
    delivery id and body), with every attempt in order.

    ``resource_key`` is the key the pipeline records (``None`` when the source has none) and
    ``sequence`` the event's ordering value (Unix seconds).
    """

    source: str
    delivery_id: str
    resource_key: str | None
    sequence: int | None
    duplicate: bool
    attempts: list[AttemptLog] = field(default_factory=list)

    @property
    def final(self) -> int | None:
        """The last attempt's status (``None``: no answer, or never sent)."""
        return self.attempts[-1].status if self.attempts else None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Copy:
        return cls(
            source=data["source"],
            delivery_id=data["delivery_id"],
            resource_key=data.get("resource_key"),
            sequence=data.get("sequence"),
            duplicate=bool(data.get("duplicate")),
            attempts=[AttemptLog(**a) for a in data.get("attempts", [])],
        )


def is_2xx(status: int | None) -> bool:
    """An answer that acknowledges the delivery."""
    return status is not None and 200 <= status < 300


def is_4xx(status: int | None) -> bool:
    """An answer that rejects the delivery for good (the sender does not retry it)."""
    return status is not None and 400 <= status < 500


# ------------------------------------------------------------------------------------------------
# traffic shape


def interleave(streams: Sequence[Sequence[Any]], rng: random.Random) -> list[Any]:
    """Merge ``streams`` at random, keeping each stream's own order (sources interleaved, each
    resource's send order intact)."""
    positions = [0] * len(streams)
    pool = [i for i, s in enumerate(streams) for _ in s]
    rng.shuffle(pool)
    merged = []
    for i in pool:
        merged.append(streams[i][positions[i]])
        positions[i] += 1
    return merged


def with_duplicates(
    items: Sequence[Any], fraction: float, immediate: float, rng: random.Random
) -> list[tuple[Any, bool]]:
    """``items`` with duplicate copies added: ``(item, is_duplicate)`` in send order.

    ``fraction`` of the items (0..1) get one duplicate copy; of those, ``immediate`` (0..1) are
    sent right behind their original (they race it at the gate), the others at a random later
    point of the run (seconds to minutes later).
    """
    n = len(items)
    keyed: list[tuple[float, int, Any, bool]] = [
        (float(i), 0, x, False) for i, x in enumerate(items)
    ]
    chosen = rng.sample(range(n), round(n * max(0.0, min(1.0, fraction)))) if n else []
    for i in chosen:
        key = i + 0.5 if rng.random() < immediate else rng.uniform(i + 1, n)
        keyed.append((key, 1, items[i], True))
    keyed.sort(key=lambda k: (k[0], k[1]))
    return [(x, dup) for _, _, x, dup in keyed]


def send_offsets(
    n: int, rate: float, bursts: int, burst_size: int, rng: random.Random
) -> list[float]:
    """When each of ``n`` sends is due, seconds from the start: paced at ``rate`` per second,
    except ``bursts`` runs of ``burst_size`` consecutive sends that are all due at once."""
    offsets = [i / rate if rate > 0 else 0.0 for i in range(n)]
    if n and bursts and burst_size:
        for _ in range(bursts):
            start = rng.randrange(0, max(1, n - burst_size))
            for j in range(start, min(n, start + burst_size)):
                offsets[j] = offsets[start]
    return offsets


def progress_step(total: int) -> int:
    """Print the traffic's progress every this many answered copies (every 5 %, at least 50)."""
    return max(50, total // 20)


def traffic_progress(
    done: int, total: int, elapsed: float, expected: float, finals: Mapping[str, int]
) -> str:
    """One progress line: copies answered of ``total``, the answers so far by class (``2xx``,
    ``4xx``, ``5xx``, ``no answer``), elapsed seconds and what is left of ``expected`` (the
    paced schedule's length in seconds; retries and a slow stack add to it)."""
    answers = ", ".join(f"{k} {v}" for k, v in sorted(finals.items()))
    left = max(0.0, expected - elapsed)
    return (
        f"[{elapsed:7.1f} s] traffic: {done}/{total} copies answered ({100 * done / total:.0f} %)"
        f"; {answers or 'no answer yet'}; about {left:.0f} s of the schedule left"
    )


def answer_class(status: int | None) -> str:
    """``2xx``, ``4xx``, ``5xx`` or ``no answer``."""
    return "no answer" if status is None else f"{status // 100}xx"


# ------------------------------------------------------------------------------------------------
# the sender's summary


def _final_class(status: int | None) -> str:
    if status and 200 <= status < 300:
        return "final_2xx"
    if status and 400 <= status < 500:
        return "final_4xx"
    if status and status >= 500:
        return "final_5xx"
    return "final_no_answer"


def sender_summary(copies: list[Copy], elapsed: float) -> dict[str, Any]:
    """The report's ``sender`` section: copies, requests, retries, final answers by class,
    statuses, reasons of no answer, acknowledgement latency p50/p99 (ms), the traffic's length
    (s) and throughput (copies per second)."""
    finals = Counter(_final_class(c.final) for c in copies)
    latencies = sorted(a.ms for c in copies for a in c.attempts if a.status is not None)

    def pct(p: float) -> float | None:
        return (
            latencies[min(len(latencies) - 1, int(p / 100 * len(latencies)))] if latencies else None
        )

    return {
        "copies": len(copies),
        "duplicate_copies": sum(1 for c in copies if c.duplicate),
        "requests": sum(len(c.attempts) for c in copies),
        "retries": sum(max(0, len(c.attempts) - 1) for c in copies),
        **{k: finals[k] for k in ("final_2xx", "final_4xx", "final_5xx", "final_no_answer")},
        "statuses": dict(Counter(str(a.status) for c in copies for a in c.attempts)),
        "no_answer_reasons": dict(Counter(a.error for c in copies for a in c.attempts if a.error)),
        "ack_p50_ms": pct(50),
        "ack_p99_ms": pct(99),
        "elapsed_seconds": round(elapsed, 1),
        "throughput_per_second": round(len(copies) / elapsed, 1) if elapsed else None,
    }
