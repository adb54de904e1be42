"""What the sender simulator sends and how it was answered: a planned delivery
(:class:`Planned`), each request's answer (:class:`Attempt`), a delivery's attempts
(:class:`SendResult`) and a run's counts and acknowledgement latencies (:class:`Summary`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook_pipeline.sources import ResolvedSource as Source


@dataclass
class Planned:
    """One delivery to send (a duplicate shares ``delivery_id`` and ``body`` with its original).

    Attributes
    ----------
    sequence : int
        Ordering value in Unix seconds (Stripe ``created``; Shopify/Standard Webhooks timestamps;
        generic ``resource.version``).
    """

    source: Source
    delivery_id: str
    resource: str
    sequence: int
    event_type: str | None
    body: bytes
    headers: dict[str, str]
    duplicate: bool = False


@dataclass
class Attempt:
    """One request: its status (``None``: no answer), time to the answer or the failure (ms),
    the answer's body, and for no answer why (``"connection refused"``, ``"timed out"``...)."""

    status: int | None
    latency_ms: float
    body: str = ""
    error: str | None = None


@dataclass
class SendResult:
    planned: Planned
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def final(self) -> Attempt:
        return self.attempts[-1]


@dataclass
class Summary:
    """What a run sent and how the endpoint acknowledged it (latencies in milliseconds).

    Latency percentiles are over the requests that got an answer; ``None`` when none did.
    ``no_answer_reasons`` counts the final attempts that got none, by reason.
    """

    outcomes: list[SendResult]
    elapsed_seconds: float

    def as_dict(self) -> dict[str, Any]:
        finals: Counter[str] = Counter()
        for o in self.outcomes:
            status = o.final.status
            body = o.final.body
            if status == 202:
                finals["accepted_202"] += 1
            elif status == 200 and _says_duplicate(o.planned, body):
                finals["duplicate_200"] += 1
            elif status is not None and 200 <= status < 300:
                finals["other_2xx"] += 1
            elif status is not None and 400 <= status < 500:
                finals["client_4xx"] += 1
            elif status is not None and status >= 500:
                finals["server_5xx"] += 1
            else:
                finals["no_answer"] += 1
        latencies = sorted(
            a.latency_ms for o in self.outcomes for a in o.attempts if a.status is not None
        )
        reasons = Counter(
            o.final.error or "no answer" for o in self.outcomes if o.final.status is None
        )
        return {
            "sent": len(self.outcomes),
            "duplicates_sent": sum(1 for o in self.outcomes if o.planned.duplicate),
            "requests": sum(len(o.attempts) for o in self.outcomes),
            "accepted_202": finals["accepted_202"],
            "duplicate_200": finals["duplicate_200"],
            "other_2xx": finals["other_2xx"],
            "client_4xx": finals["client_4xx"],
            "server_5xx": finals["server_5xx"],
            "no_answer": finals["no_answer"],
            "no_answer_reasons": dict(reasons),
            "retries": sum(len(o.attempts) - 1 for o in self.outcomes),
            "answered_requests": len(latencies),
            "latency_p50_ms": round(percentile(latencies, 50), 1) if latencies else None,
            "latency_p99_ms": round(percentile(latencies, 99), 1) if latencies else None,
            "elapsed_seconds": round(self.elapsed_seconds, 3),
            "statuses": dict(Counter(str(o.final.status) for o in self.outcomes)),
        }

    def render(self) -> str:
        d = self.as_dict()
        why = ", ".join(f"{reason}: {n}" for reason, n in sorted(d["no_answer_reasons"].items()))

        def latency(key: str) -> str:
            if d[key] is None:
                return "-  (no request got an answer)"
            return f"{d[key]} ms  (over {d['answered_requests']} answered requests)"

        return "\n".join(
            [
                f"sent {d['sent']} deliveries ({d['duplicates_sent']} duplicates) in "
                f"{d['requests']} requests, {d['elapsed_seconds']} s",
                f"  202 accepted      {d['accepted_202']}",
                f"  200 duplicate     {d['duplicate_200']}",
                f"  other 2xx         {d['other_2xx']}",
                f"  4xx               {d['client_4xx']}",
                f"  5xx               {d['server_5xx']}",
                f"  no answer         {d['no_answer']}" + (f"  ({why})" if why else ""),
                f"  retries           {d['retries']}",
                f"  ack latency p50   {latency('latency_p50_ms')}",
                f"  ack latency p99   {latency('latency_p99_ms')}",
            ]
        )


def _says_duplicate(planned: Planned, body: str) -> bool:
    """Whether a 200 answer is the pipeline's duplicate: its JSON says so, or the provider
    expects a fixed acknowledgement (Adyen ``[accepted]``, Twilio's TwiML), which 200 is only for
    a duplicate (a new delivery is 202)."""
    ack = planned.source.provider.acknowledgement(200, {"status": "duplicate"})
    if ack.content_type == "application/json":
        return '"duplicate"' in body
    return body == ack.text()


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of already sorted values (0.0 when empty)."""
    if not sorted_values:
        return 0.0
    rank = max(1, min(len(sorted_values), round(pct / 100 * len(sorted_values) + 0.5)))
    return float(sorted_values[rank - 1])
