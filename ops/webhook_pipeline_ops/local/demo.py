"""``webhook-pipeline local demo``: a short mixed scenario against the local stack.

1. Start the local stack in the background unless one runs (with ``--visibility-timeout 2`` by
   default, so a failing message reaches the DLQ in seconds). A running stack whose visibility
   timeout is the template's (390 s: the poison message would need half an hour to reach the
   DLQ) is left alone: the demo then runs a private stack (free ports, its own state folder)
   and stops it at the end.
2. Send signed webhooks from several providers: new deliveries, duplicates (200), and an
   out-of-order pair on one Stripe customer (the newer event first, the older one then recorded
   as ``stale`` and not applied).
3. Put ONE poison message on the main queue: a valid envelope whose claim-check body is missing
   from the payload bucket (as when the object was deleted before processing). The processor
   cannot load the body (``PayloadIntegrityError``), reports the record in
   ``batchItemFailures``; after ``maxReceiveCount`` receives SQS moves it to the DLQ. This poison
   is chosen because its cause can be fixed without touching code: restore the object, then
   replay. (A syntactically broken envelope would fail again after any replay.)
4. Wait until it is in the DLQ, restore the body, replay it with ``webhook-pipeline replay``, wait
   until it is recorded, and print the deliveries, resource watermarks, DLQ and status with the
   operator CLI.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

from webhook_pipeline_ops.local import OUTPUTS_FILE, STATE_DIR_ENV, state_dir
from webhook_pipeline_ops.local.background import start_background, stop_running
from webhook_pipeline_ops.local.dev_secrets import read_secrets
from webhook_pipeline_ops.local.options import StackError, background_argv
from webhook_pipeline_ops.local.state_files import read_ready
from webhook_pipeline_ops.output import command_name

# A running stack with a longer visibility timeout is not used (see step 1).
MAX_SHARED_VISIBILITY_SECONDS = 10


def _say(text: str) -> None:
    print(text, flush=True)


def wait_until(predicate: Callable[[], Any], timeout: float, interval: float = 0.25) -> Any:
    """Poll ``predicate`` until it returns a truthy value or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def _cli(*argv: str, quiet: bool = False) -> tuple[int, str]:
    from webhook_pipeline_ops import cli

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = cli.main(list(argv))
    if not quiet:
        print(buffer.getvalue(), end="", flush=True)
    return code, buffer.getvalue()


def _aws() -> Any:
    from webhook_pipeline_ops import cli
    from webhook_pipeline_ops.aws import Aws

    args = cli.build_parser().parse_args(["status", "--local"])
    return Aws(args)


def poison_envelope(
    bucket: str,
    body: bytes,
    *,
    source: str,
    delivery_id: str,
    resource: str,
    sequence: int,
    event_type: str,
) -> tuple[str, str]:
    """A valid claim-check envelope whose S3 object is not there; returns (json, object key)."""
    from webhook_pipeline.envelope import (
        BodyPointer,
        Envelope,
        claim_check_prefix,
        sha256_hex,
        utcnow,
    )

    key = f"{claim_check_prefix(source)}demo-missing/{sha256_hex(delivery_id.encode())[:32]}"
    envelope = Envelope(
        source=source,
        delivery_id=delivery_id,
        received_at=utcnow(),
        event_type=event_type,
        resource_key=resource,
        sequence=sequence,
        body_ref=BodyPointer(bucket=bucket, key=key),
        body_size=len(body),
        body_sha256=sha256_hex(body),
    )
    return envelope.to_json(), key


def run_demo(args: argparse.Namespace) -> int:
    from webhook_pipeline_ops.commands.records import get_delivery
    from webhook_pipeline_ops.simulator import sender
    from webhook_pipeline_ops.simulator.deliveries import example_sources, new_id, payload

    if args.state_dir:
        os.environ[STATE_DIR_ENV] = str(args.state_dir)
    ready = read_ready()
    private_dir = None
    if (
        ready is not None
        and int(ready.get("visibility_timeout") or 30) > MAX_SHARED_VISIBILITY_SECONDS
    ):
        private_dir = state_dir() / "demo"
        _say(
            f"the running local stack (pid {ready['pid']}) has a "
            f"{ready.get('visibility_timeout')} s "
            "visibility timeout, so its poison message would take many minutes to reach the DLQ; "
            f"the demo runs a private stack in {private_dir} and stops it at the end"
        )
        os.environ[STATE_DIR_ENV] = str(private_dir)
        args.state_dir, args.port, args.moto_port = private_dir, 0, 0
        ready = read_ready()  # a private stack left by an interrupted demo
    if ready is None:
        if args.visibility_timeout is None:
            args.visibility_timeout = 2
        _say(
            f"starting the local stack in the background (visibility timeout "
            f"{args.visibility_timeout} s)..."
        )
        try:
            ready = start_background(background_argv(args), timeout=120)
        except StackError as exc:
            _say(f"webhook-pipeline local demo: {exc}")
            return 1
    _say(f"local stack: {ready['api_url']} (pid {ready['pid']})")
    outputs = json.loads((state_dir() / OUTPUTS_FILE).read_text())
    secrets = read_secrets()
    sources = example_sources()
    base_url = outputs["ApiUrl"]
    aws = _aws()
    visibility = int(ready.get("visibility_timeout") or 30)
    receives = int(ready.get("max_receive_count") or 5)

    now = int(time.time())
    run = uuid.uuid4().hex[:6]

    def planned(
        source: str, resource: str, sequence: int, event_type: str | None = None
    ) -> sender.Planned:
        delivery_id = new_id(sources[source])
        body, headers = payload(
            sources[source],
            delivery_id=delivery_id,
            resource=resource,
            sequence=sequence,
            event_type=event_type,
        )
        return sender.Planned(
            sources[source], delivery_id, resource, sequence, event_type, body, headers
        )

    def send(items: list[sender.Planned], label: str) -> sender.Summary:
        summary = sender.send_all(
            items, base_url=base_url, secrets=secrets, rate=50, concurrency=1, timeout=10, retries=2
        )
        statuses = ", ".join(f"{o.planned.source.name}:{o.final.status}" for o in summary.outcomes)
        _say(f"  {label}: {statuses}")
        return summary

    def recorded(p: sender.Planned) -> dict[str, Any] | None:
        return get_delivery(aws, p.source.name, p.delivery_id)

    # -- 1. several providers, with duplicates ----------------------------------------------
    customer = f"cus_demo_{run}"
    firsts = [
        planned("stripe", customer, now - 60, "customer.created"),
        planned("github", f"repo_{run}", now),
        planned("standard-webhooks", f"inv_{run}", now - 30, "invoice.paid"),
        planned("slack", f"chan_{run}", now),
        planned("shopify", f"ord_{run}", now - 20, "orders/create"),
        planned("shopify", f"ord_{run}", now - 10, "orders/updated"),
        planned("generic-hmac", f"thing_{run}", 1),
    ]
    n_sources = len({p.source.name for p in firsts})
    _say(f"\n== 1. {len(firsts)} new deliveries from {n_sources} sources, then duplicates")
    first = send(firsts, "new")
    dups = send([firsts[1], firsts[3], firsts[6]], "duplicates (same delivery id and body)")
    # -- 2. out of order ---------------------------------------------------------------------
    _say("\n== 2. an out-of-order pair on one Stripe customer: the newer event arrives first")
    newer = planned("stripe", customer, now - 5, "customer.updated")
    older = planned("stripe", customer, now - 30, "customer.updated")
    send([newer], "newer (sequence t-5)")
    wait_until(lambda: recorded(newer), timeout=30)
    send([older], "older (sequence t-30)")
    everything = [*firsts, newer, older]
    wait_until(lambda: all(recorded(p) for p in everything), timeout=60)

    # -- 3. the poison message ---------------------------------------------------------------
    _say(
        "\n== 3. one poison message: a claim-check envelope whose S3 body is missing; the "
        "processor records it as malformed (retries cannot bring the body back), and restoring "
        "the body fixes it without touching code"
    )
    poison = planned("stripe", f"cus_poison_{run}", now - 1, "customer.deleted")
    message, key = poison_envelope(
        outputs["PayloadBucketName"],
        poison.body,
        source="stripe",
        delivery_id=poison.delivery_id,
        resource=poison.resource,
        sequence=poison.sequence,
        event_type="customer.deleted",
    )
    sqs = aws.client("sqs")
    sqs.send_message(QueueUrl=outputs["MainQueueUrl"], MessageBody=message)
    budget = (receives + 2) * (visibility + 1.5) + 15
    _say(
        f"  sent {poison.delivery_id} straight to the main queue; waiting for the DLQ "
        f"(SQS moves it after {receives} failed receives, {visibility} s apart; up to "
        f"{budget:.0f} s)..."
    )

    def dlq_depth() -> int:
        attrs = sqs.get_queue_attributes(
            QueueUrl=outputs["DeadLetterQueueUrl"], AttributeNames=["ApproximateNumberOfMessages"]
        )
        return int(attrs["Attributes"]["ApproximateNumberOfMessages"])

    started = time.monotonic()
    if not wait_until(dlq_depth, timeout=budget, interval=0.5):
        _say("  the poison message did not reach the DLQ in time")
        return 1
    _say(
        f"  in the DLQ after {time.monotonic() - started:.1f} s (its receive count adds the "
        "peek's own receive to those on the main queue):"
    )
    _cli("dlq", "peek", "--local")

    _say("\n== 4. fix the malformed delivery's cause (restore its claim-check body), then replay")
    aws.client("s3").put_object(Bucket=outputs["PayloadBucketName"], Key=key, Body=poison.body)
    _cli("replay", "--local", "--delivery-id", poison.delivery_id, "--no-progress")
    applied = wait_until(lambda: recorded(poison), timeout=60)
    _say(f"  replayed delivery recorded: {bool(applied)}")

    # -- 5. results --------------------------------------------------------------------------
    _say("\n== 5. recorded deliveries (outcome per delivery)")
    for p in [*everything, poison]:
        item = recorded(p) or {}
        _say(
            f"  {p.source.name:18} {p.delivery_id:40} {item.get('outcome', '-'):8} "
            f"resource={item.get('resource_key', '-')} sequence={item.get('sequence', '-')}"
        )
    _say("\n== resource watermarks")
    for source, resource in (
        ("stripe", customer),
        ("shopify", f"ord_{run}"),
        ("standard-webhooks", f"inv_{run}"),
        ("stripe", poison.resource),
    ):
        resource_key = _resource_key(source, resource)
        _say(f"-- {source} {resource_key}")
        _cli("resources", "get", "--local", source, resource_key)
    _say("\n== dead-letter queue")
    _cli("dlq", "peek", "--local")
    _say("\n== status")
    _cli("status", "--local")
    summary = {
        "new": first.as_dict()["accepted_202"],
        "duplicates_answered_200": dups.as_dict()["duplicate_200"],
        "stale": (recorded(older) or {}).get("outcome") == "stale",
        "poison_replayed_and_applied": (applied or {}).get("outcome") == "applied",
    }
    _say(f"\nsummary: {json.dumps(summary)}")
    if private_dir is not None:
        stop_running(private_dir)
        _say("the demo's private stack is stopped")
    else:
        _say(
            f"the local stack keeps running (pid {ready['pid']}): `{command_name()} local stop` "
            f"stops it; `{command_name()} console --local` shows it in a browser"
        )
    ok = (
        summary["new"] == len(firsts)
        and summary["duplicates_answered_200"] == 3
        and summary["stale"]
        and summary["poison_replayed_and_applied"]
    )
    return 0 if ok else 1


def _resource_key(source: str, resource: str) -> str:
    """The resource key the source's ``resource_key`` location reads from our payloads."""
    if source == "shopify":
        return f"gid://shopify/Order/{resource}"
    return resource


__all__ = ["poison_envelope", "run_demo", "wait_until"]
