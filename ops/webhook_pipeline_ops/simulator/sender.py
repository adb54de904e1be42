"""The sender simulator: plans deliveries (:func:`plan`), signs each attempt afresh with the
source's scheme (:func:`signed_request`), posts them at a rate or in bursts with sender-side
timeouts and resends of the same delivery (:func:`send_all`), and summarises the answers
(:class:`Summary`). ``webhook-pipeline send`` (:mod:`webhook_pipeline_ops.commands.send`) is its
command; the chaos run and the local demo drive it too. Uses only the standard library
(``urllib``).
"""

from __future__ import annotations

import random
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from webhook_pipeline.providers.samples import SignedRequest
from webhook_pipeline.sources import ResolvedSource as Source

from webhook_pipeline_ops.simulator.outcomes import Attempt, Planned, SendResult, Summary

DEFAULT_URL = "http://127.0.0.1:3000"
MAX_RETRY_WAIT_SECONDS = 5.0


# ------------------------------------------------------------------------------------------------
# planning


def plan(
    sources: Sequence[Source],
    *,
    count: int,
    resources: int = 1,
    duplicates: float = 0.0,
    out_of_order: bool = False,
    rng: random.Random | None = None,
    base_time: int | None = None,
    base_url: str = DEFAULT_URL,
) -> list[Planned]:
    """The deliveries to send, in send order.

    Parameters
    ----------
    count : int
        Unique deliveries per source.
    resources : int
        Distinct resources per source; events go round-robin, each resource's sequence rising
        by one second per event.
    duplicates : float
        Fraction (0..1) of unique deliveries re-sent later with the same id and body.
    out_of_order : bool
        Swap each resource's events in pairs (the newer sent first).
    """
    rng = rng or random.Random()  # noqa: S311 - traffic shaping, not security
    base = base_time if base_time is not None else int(time.time()) - 3600
    order: list[Planned] = []
    for source in sources:
        per_resource: dict[str, list[Planned]] = {}
        run_tag = f"{rng.getrandbits(32):08x}"
        for i in range(count):
            resource = f"res_{run_tag}_{i % max(1, resources)}"
            events = per_resource.setdefault(resource, [])
            events.append(_planned(source, resource, base + len(events), base_url))
        order.extend(_interleaved(list(per_resource.values()), out_of_order))
    return _with_duplicates(order, duplicates, rng)


def _planned(source: Source, resource: str, sequence: int, base_url: str) -> Planned:
    """A new delivery of ``source`` on ``resource``, under the delivery id the ingest function
    will record (the provider's verification run on a signed copy)."""
    from webhook_pipeline_ops.simulator.deliveries import new_id, payload, recorded_ids

    delivery_id = new_id(source)
    body, headers = payload(source, delivery_id=delivery_id, resource=resource, sequence=sequence)
    url = source_url(base_url, source.name)
    secret, now = source.provider.dev_secret, int(time.time())
    signed = source.provider.sign_request(
        body, secret, timestamp=now, delivery_id=delivery_id, url=url
    )
    probe = headers | signed.headers
    ids = recorded_ids(source, signed.body, probe, secret, now, signed.url)
    delivery_id = (ids or (delivery_id,))[0]
    return Planned(source, delivery_id, resource, sequence, None, body, headers)


def _interleaved(lists: list[list[Planned]], out_of_order: bool) -> list[Planned]:
    """Each resource's events taken round-robin; with ``out_of_order`` swapped in pairs first."""
    if out_of_order:
        for events in lists:
            for j in range(0, len(events) - 1, 2):
                events[j], events[j + 1] = events[j + 1], events[j]
    longest = max((len(x) for x in lists), default=0)
    return [e for j in range(longest) for events in lists if j < len(events) for e in [events[j]]]


def _with_duplicates(order: list[Planned], duplicates: float, rng: random.Random) -> list[Planned]:
    """``order`` with a ``duplicates`` share (0..1) of its deliveries re-sent, each copy at a
    random later position."""
    n_dup = round(len(order) * max(0.0, min(1.0, duplicates)))
    for original in rng.sample(list(order), n_dup):
        position = order.index(original)
        dup = Planned(
            original.source,
            original.delivery_id,
            original.resource,
            original.sequence,
            original.event_type,
            original.body,
            dict(original.headers),
            duplicate=True,
        )
        order.insert(rng.randint(position + 1, len(order)), dup)
    return order


# ------------------------------------------------------------------------------------------------
# sending


def recorded_resource_key(planned: Planned) -> str | None:
    """The resource key the pipeline records for ``planned`` (what ``resources get`` takes),
    read from its body and headers by the ingest's own event reader."""
    from webhook_pipeline.errors import IngestError
    from webhook_pipeline.ingest.events import read_events
    from webhook_pipeline.providers.model import Verified
    from webhook_pipeline.webhook_request import WebhookRequest

    if planned.source.resource_key is None:
        return None
    request = WebhookRequest(
        "POST",
        planned.source.name,
        {k.lower(): v for k, v in planned.headers.items()},
        planned.body,
    )
    verified = Verified(secret_index=0, delivery_id=planned.delivery_id)
    try:
        events = read_events(planned.source, request, verified)
    except IngestError:
        return None
    return events[0].resource_key if events else None


def source_url(base_url: str, source: str) -> str:
    """``BASE/webhooks/SOURCE`` (or ``base_url`` with ``{source}`` filled in)."""
    if "{source}" in base_url:
        return base_url.replace("{source}", source)
    return f"{base_url.rstrip('/')}/webhooks/{source}"


def signed_request(planned: Planned, secret: str, attempt: int, url: str = "") -> SignedRequest:
    """One attempt as the provider sends it: provider headers + a fresh signature (and Slack's
    retry hints), the body (with a signature inside for providers that carry it there) and
    the URL (with a credential in it for providers that carry it there)."""
    headers = dict(planned.headers)
    provider = planned.source.provider.name
    headers.setdefault("user-agent", f"webhook-pipeline-simulator ({provider})")
    if attempt and provider == "slack":
        headers |= {"X-Slack-Retry-Num": str(attempt), "X-Slack-Retry-Reason": "http_timeout"}
    signed = planned.source.provider.sign_request(
        planned.body,
        secret,
        timestamp=_fresh_timestamp(planned.source.name, planned.delivery_id),
        delivery_id=planned.delivery_id,
        url=url,
    )
    return SignedRequest(headers | signed.headers, signed.body, signed.url or url)


_last_signed: dict[tuple[str, str], int] = {}
_last_signed_lock = threading.Lock()


def _fresh_timestamp(source: str, delivery_id: str) -> int:
    """Now in Unix seconds, but later than any earlier signing of this delivery: each resend is
    signed afresh as a provider signs it (a provider's one-time token, such as Mailgun's, derived
    from the timestamp, is then new; a resend within the same second would otherwise reuse it
    and be refused as ``replay_detected``)."""
    now = int(time.time())
    with _last_signed_lock:
        previous = _last_signed.get((source, delivery_id))
        stamp = now if previous is None or now > previous else previous + 1
        _last_signed[(source, delivery_id)] = stamp
    return stamp


def no_answer_reason(exc: BaseException) -> str:
    """Why a request got no answer, in a few words (``"connection refused"``, ``"timed out"``,
    ``"name not resolved"``, else the error's own text)."""
    reason: object = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, TimeoutError):
        return "timed out"
    if isinstance(reason, socket.gaierror):
        return "name not resolved"
    if isinstance(reason, OSError) and reason.strerror:  # "connection refused", "... reset ..."
        return reason.strerror.lower()
    return str(reason) or type(reason).__name__


def post(
    url: str, body: bytes, headers: Mapping[str, str], timeout: float
) -> tuple[int | None, dict[str, str], str, float, str | None]:
    """POST once; returns (status, headers, body, ms, error).

    ``status`` is ``None`` on a timeout or a connection error, and ``error`` then says which
    (:func:`no_answer_reason`).
    """
    request = urllib.request.Request(url, data=body, headers=dict(headers), method="POST")  # noqa: S310
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            text = response.read().decode("utf-8", "replace")
            return (
                response.status,
                dict(response.headers),
                text,
                (time.perf_counter() - started) * 1000,
                None,
            )
    except urllib.error.HTTPError as exc:
        text = exc.read().decode("utf-8", "replace")
        return exc.code, dict(exc.headers), text, (time.perf_counter() - started) * 1000, None
    except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
        return None, {}, "", (time.perf_counter() - started) * 1000, no_answer_reason(exc)


def deliver(
    planned: Planned, *, base_url: str, secret: str, timeout: float, retries: int
) -> SendResult:
    """Send one delivery, resending it like a provider after a timeout/5xx (``retries`` times)."""
    outcome = SendResult(planned)
    url = source_url(base_url, planned.source.name)
    for attempt in range(retries + 1):
        sent = signed_request(planned, secret, attempt, url)
        status, resp_headers, text, ms, error = post(sent.url, sent.body, sent.headers, timeout)
        outcome.attempts.append(Attempt(status, ms, text, error))
        if status is not None and status < 500:
            break
        if attempt < retries:
            wait = min(MAX_RETRY_WAIT_SECONDS, 0.25 * 2**attempt)
            retry_after = {k.lower(): v for k, v in resp_headers.items()}.get("retry-after")
            if retry_after and retry_after.isdigit():
                wait = min(MAX_RETRY_WAIT_SECONDS, float(retry_after))
            time.sleep(wait)
    return outcome


def send_all(
    planned: Sequence[Planned],
    *,
    base_url: str,
    secrets: Mapping[str, str],
    rate: float = 20.0,
    burst: bool = False,
    concurrency: int = 8,
    timeout: float = 10.0,
    retries: int = 2,
) -> Summary:
    """Send ``planned`` in order (paced at ``rate``/s, or all at once with ``burst``)."""
    started = time.perf_counter()
    outcomes: list[SendResult | None] = [None] * len(planned)
    workers = max(1, min(len(planned) or 1, 64 if burst else concurrency))

    def job(index: int) -> None:
        p = planned[index]
        outcomes[index] = deliver(
            p, base_url=base_url, secret=secrets[p.source.name], timeout=timeout, retries=retries
        )

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = []
        gate = threading.Event()
        for i in range(len(planned)):
            if not burst and rate > 0 and i:
                gate.wait(max(0.0, started + i / rate - time.perf_counter()))
            futures.append(pool.submit(job, i))
        for f in futures:
            f.result()
    return Summary([o for o in outcomes if o is not None], time.perf_counter() - started)


__all__ = [
    "DEFAULT_URL",
    "Attempt",
    "Planned",
    "SendResult",
    "Summary",
    "deliver",
    "plan",
    "post",
    "recorded_resource_key",
    "send_all",
    "signed_request",
    "source_url",
]
