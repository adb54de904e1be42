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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from webhook_pipeline.sources import ResolvedSource

from webhook_pipeline_ops.local import OUTPUTS_FILE, STATE_DIR_ENV, state_dir
from webhook_pipeline_ops.local.background import start_background, stop_running
from webhook_pipeline_ops.local.dev_secrets import read_secrets
from webhook_pipeline_ops.local.options import StackError, background_argv
from webhook_pipeline_ops.local.state_files import read_ready
from webhook_pipeline_ops.output import command_name
from webhook_pipeline_ops.simulator.outcomes import Planned, Summary
from webhook_pipeline_ops.simulator.sender import send_all

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
    """The scenario of the module docstring, step by step; 0 when every step's outcome is the
    expected one (new 202s, three duplicate 200s, the older event stale, the poison replayed)."""
    if args.state_dir:
        os.environ[STATE_DIR_ENV] = str(args.state_dir)
    started = _stack(args)
    if started is None:
        return 1
    ready, private_dir = started
    _say(f"local stack: {ready['api_url']} (pid {ready['pid']})")
    demo = Demo.connect(ready)
    firsts, first, dups = demo.providers_with_duplicates()
    newer, older = demo.out_of_order(firsts[0].resource)
    everything = [*firsts, newer, older]
    wait_until(lambda: all(demo.recorded(p) for p in everything), timeout=60)
    poisoned = demo.poison_to_dlq()
    if poisoned is None:
        return 1
    poison, key = poisoned
    applied = demo.fix_and_replay(poison, key)
    demo.show_results([*everything, poison], firsts[0].resource, poison.resource)
    summary = {
        "new": first.as_dict()["accepted_202"],
        "duplicates_answered_200": dups.as_dict()["duplicate_200"],
        "stale": (demo.recorded(older) or {}).get("outcome") == "stale",
        "poison_replayed_and_applied": (applied or {}).get("outcome") == "applied",
    }
    _say(f"\nsummary: {json.dumps(summary)}")
    _finish(ready, private_dir)
    ok = (
        summary["new"] == len(firsts)
        and summary["duplicates_answered_200"] == 3
        and summary["stale"]
        and summary["poison_replayed_and_applied"]
    )
    return 0 if ok else 1


def _stack(args: argparse.Namespace) -> tuple[dict[str, Any], Path | None] | None:
    """Step 1: the running stack's ``ready`` document, or a private stack's when the running
    one's visibility timeout is too long, or one started in the background; with the private
    state folder (``None``: a shared stack). ``None`` when it cannot start (said why)."""
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
            return None
    return ready, private_dir


@dataclass
class Demo:
    """What the demo's steps share: the stack's outputs, signing secrets and sources, an AWS
    session at its moto server, its queue settings, and this run's time and tag."""

    outputs: dict[str, Any]
    secrets: dict[str, str]
    sources: dict[str, ResolvedSource]
    aws: Any
    visibility: int
    receives: int
    now: int = field(default_factory=lambda: int(time.time()))
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:6])

    @classmethod
    def connect(cls, ready: dict[str, Any]) -> Demo:
        from webhook_pipeline_ops.simulator.deliveries import example_sources

        return cls(
            outputs=json.loads((state_dir() / OUTPUTS_FILE).read_text()),
            secrets=read_secrets(),
            sources=example_sources(),
            aws=_aws(),
            visibility=int(ready.get("visibility_timeout") or 30),
            receives=int(ready.get("max_receive_count") or 5),
        )

    def planned(
        self, source: str, resource: str, sequence: int, event_type: str | None = None
    ) -> Planned:
        from webhook_pipeline_ops.simulator.deliveries import new_id, payload

        delivery_id = new_id(self.sources[source])
        body, headers = payload(
            self.sources[source],
            delivery_id=delivery_id,
            resource=resource,
            sequence=sequence,
            event_type=event_type,
        )
        return Planned(
            self.sources[source], delivery_id, resource, sequence, event_type, body, headers
        )

    def send(self, items: list[Planned], label: str) -> Summary:
        summary = send_all(
            items,
            base_url=self.outputs["ApiUrl"],
            secrets=self.secrets,
            rate=50,
            concurrency=1,
            timeout=10,
            retries=2,
        )
        statuses = ", ".join(f"{o.planned.source.name}:{o.final.status}" for o in summary.outcomes)
        _say(f"  {label}: {statuses}")
        return summary

    def recorded(self, p: Planned) -> dict[str, Any] | None:
        from webhook_pipeline_ops.delivery_records import get_delivery

        return get_delivery(self.aws, p.source.name, p.delivery_id)

    def providers_with_duplicates(self) -> tuple[list[Planned], Summary, Summary]:
        """Step 2a: new deliveries from several providers (the first a Stripe customer's), then
        three of them again."""
        run, now = self.run, self.now
        firsts = [
            self.planned("stripe", f"cus_demo_{run}", now - 60, "customer.created"),
            self.planned("github", f"repo_{run}", now),
            self.planned("standard-webhooks", f"inv_{run}", now - 30, "invoice.paid"),
            self.planned("slack", f"chan_{run}", now),
            self.planned("shopify", f"ord_{run}", now - 20, "orders/create"),
            self.planned("shopify", f"ord_{run}", now - 10, "orders/updated"),
            self.planned("generic-hmac", f"thing_{run}", 1),
        ]
        n_sources = len({p.source.name for p in firsts})
        _say(f"\n== 1. {len(firsts)} new deliveries from {n_sources} sources, then duplicates")
        first = self.send(firsts, "new")
        dups = self.send(
            [firsts[1], firsts[3], firsts[6]], "duplicates (same delivery id and body)"
        )
        return firsts, first, dups

    def out_of_order(self, customer: str) -> tuple[Planned, Planned]:
        """Step 2b: the newer event of ``customer`` first, recorded, then the older one."""
        _say("\n== 2. an out-of-order pair on one Stripe customer: the newer event arrives first")
        newer = self.planned("stripe", customer, self.now - 5, "customer.updated")
        older = self.planned("stripe", customer, self.now - 30, "customer.updated")
        self.send([newer], "newer (sequence t-5)")
        wait_until(lambda: self.recorded(newer), timeout=30)
        self.send([older], "older (sequence t-30)")
        return newer, older

    def poison_to_dlq(self) -> tuple[Planned, str] | None:
        """Step 3: a claim-check envelope without its body onto the main queue, until the DLQ
        holds it; ``(the delivery, its missing object's key)``, ``None`` when it never got there."""
        _say(
            "\n== 3. one poison message: a claim-check envelope whose S3 body is missing; the "
            "processor records it as malformed (retries cannot bring the body back), and restoring "
            "the body fixes it without touching code"
        )
        poison = self.planned("stripe", f"cus_poison_{self.run}", self.now - 1, "customer.deleted")
        message, key = poison_envelope(
            self.outputs["PayloadBucketName"],
            poison.body,
            source="stripe",
            delivery_id=poison.delivery_id,
            resource=poison.resource,
            sequence=poison.sequence,
            event_type="customer.deleted",
        )
        sqs = self.aws.client("sqs")
        sqs.send_message(QueueUrl=self.outputs["MainQueueUrl"], MessageBody=message)
        budget = (self.receives + 2) * (self.visibility + 1.5) + 15
        _say(
            f"  sent {poison.delivery_id} straight to the main queue; waiting for the DLQ "
            f"(SQS moves it after {self.receives} failed receives, {self.visibility} s apart; "
            f"up to {budget:.0f} s)..."
        )

        def dlq_depth() -> int:
            attrs = sqs.get_queue_attributes(
                QueueUrl=self.outputs["DeadLetterQueueUrl"],
                AttributeNames=["ApproximateNumberOfMessages"],
            )
            return int(attrs["Attributes"]["ApproximateNumberOfMessages"])

        started = time.monotonic()
        if not wait_until(dlq_depth, timeout=budget, interval=0.5):
            _say("  the poison message did not reach the DLQ in time")
            return None
        _say(
            f"  in the DLQ after {time.monotonic() - started:.1f} s (its receive count adds the "
            "peek's own receive to those on the main queue):"
        )
        _cli("dlq", "peek", "--local")
        return poison, key

    def fix_and_replay(self, poison: Planned, key: str) -> dict[str, Any] | None:
        """Step 4: restore the missing body, replay the delivery; its record once applied."""
        _say(
            "\n== 4. fix the malformed delivery's cause (restore its claim-check body), then replay"
        )
        self.aws.client("s3").put_object(
            Bucket=self.outputs["PayloadBucketName"], Key=key, Body=poison.body
        )
        _cli("replay", "--local", "--delivery-id", poison.delivery_id, "--no-progress")
        applied = wait_until(lambda: self.recorded(poison), timeout=60)
        _say(f"  replayed delivery recorded: {bool(applied)}")
        return cast("dict[str, Any] | None", applied)

    def show_results(self, deliveries: list[Planned], customer: str, poisoned: str) -> None:
        """Step 5: each delivery's outcome, the resources' watermarks, the DLQ and the queues."""
        _say("\n== 5. recorded deliveries (outcome per delivery)")
        for p in deliveries:
            item = self.recorded(p) or {}
            _say(
                f"  {p.source.name:18} {p.delivery_id:40} {item.get('outcome', '-'):8} "
                f"resource={item.get('resource_key', '-')} sequence={item.get('sequence', '-')}"
            )
        _say("\n== resource watermarks")
        for source, resource in (
            ("stripe", customer),
            ("shopify", f"ord_{self.run}"),
            ("standard-webhooks", f"inv_{self.run}"),
            ("stripe", poisoned),
        ):
            resource_key = _resource_key(source, resource)
            _say(f"-- {source} {resource_key}")
            _cli("resources", "get", "--local", source, resource_key)
        _say("\n== dead-letter queue")
        _cli("dlq", "peek", "--local")
        _say("\n== status")
        _cli("status", "--local")


def _finish(ready: dict[str, Any], private_dir: Path | None) -> None:
    """Stop the demo's private stack; a shared one keeps running (said how to stop it)."""
    if private_dir is not None:
        stop_running(private_dir)
        _say("the demo's private stack is stopped")
    else:
        _say(
            f"the local stack keeps running (pid {ready['pid']}): `{command_name()} local stop` "
            f"stops it; `{command_name()} console --local` shows it in a browser"
        )


def _resource_key(source: str, resource: str) -> str:
    """The resource key the source's ``resource_key`` location reads from our payloads."""
    if source == "shopify":
        return f"gid://shopify/Order/{resource}"
    return resource


__all__ = ["poison_envelope", "run_demo", "wait_until"]
