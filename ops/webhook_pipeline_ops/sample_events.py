"""Write the ingest events of ``events/`` (``webhook-pipeline events``).

The committed files are signed with the development secrets at a fixed time
(:data:`FIXED_TIME`), so their delivery ids and signatures never change. Schemes that sign a
timestamp (Stripe, Standard Webhooks, Slack, generic HMAC) reject such old events as stale; run
``webhook-pipeline events --now --out DIR`` to write copies signed at the current time for
``sam local invoke``.
"""

from __future__ import annotations

import argparse
import base64
import json
from pathlib import Path
from typing import Any

from webhook_pipeline_ops.samples import (
    DEV_VERIFY_TOKENS,
    SampleDelivery,
    example_sources,
    http_api_event,
    rest_api_event,
    signed_delivery,
    subscription_get_event,
)

FIXED_TIME = 1_767_225_600  # 2026-01-01T00:00:00Z
DEFAULT_OUT = Path(__file__).resolve().parents[2] / "events"


def build_events(now: int) -> dict[str, dict[str, Any]]:
    """Return ``{file name: API Gateway event}`` for every interesting ingest case, signed at
    ``now`` (Unix seconds)."""
    src = example_sources()
    events: dict[str, dict[str, Any]] = {}

    def valid(name: str, **kw: Any) -> SampleDelivery:
        return signed_delivery(src[name], timestamp=now, **kw)

    events["ingest-stripe.json"] = http_api_event(
        valid("stripe", delivery_id="evt_1NsQLk2eZvKYlo2C0sample", resource="cus_1", sequence=now)
    )
    events["ingest-github.json"] = http_api_event(
        valid("github", delivery_id="72d3162e-cc78-11e3-81ab-4c9367dc0958")
    )
    events["ingest-standard-webhooks.json"] = http_api_event(
        valid(
            "standard-webhooks",
            delivery_id="msg_2KWPBgLlAfxdpx2AI54pPJ85f4W",
            resource="inv_1",
            sequence=now,
        )
    )
    events["ingest-slack.json"] = http_api_event(valid("slack", delivery_id="Ev08MFMKH6A1"))
    events["ingest-shopify.json"] = http_api_event(
        valid(
            "shopify",
            delivery_id="b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
            resource="820982911946154508",
            sequence=now,
        )
    )
    events["ingest-generic-hmac.json"] = http_api_event(
        valid("generic-hmac", delivery_id="dlv_0001", resource="acct_9", sequence=3)
    )
    # The same delivery again: 200 duplicate once ingest-stripe.json was accepted.
    events["ingest-stripe-duplicate.json"] = events["ingest-stripe.json"]
    # Signed with the wrong secret: 401 signature_invalid.
    events["ingest-bad-signature.json"] = http_api_event(
        signed_delivery(
            src["github"],
            timestamp=now,
            secret="not-the-secret",  # noqa: S106 - deliberately wrong
            delivery_id="5a0e3c0a-0000-4000-8000-000000000001",
        )
    )
    # Signed correctly, but 10 minutes old (tolerance 300 s): 401 timestamp_stale.
    events["ingest-stale.json"] = http_api_event(
        signed_delivery(
            src["stripe"],
            timestamp=now - 600,
            delivery_id="evt_stale_sample",
            resource="cus_1",
            sequence=now - 600,
        )
    )
    # Case C02: form body sent base64-encoded by API Gateway, signed over the decoded bytes.
    form = signed_delivery(
        src["generic-hmac"],
        timestamp=now,
        delivery_id="dlv_form_0001",
        body=b"token=xyz&text=hi",
        extra_headers={"content-type": "application/x-www-form-urlencoded"},
    )
    events["ingest-base64-body.json"] = http_api_event(form, base64_body=True)
    # REST API (payload 1.0) shape of a GitHub delivery.
    events["ingest-rest-v1.json"] = rest_api_event(
        valid("github", delivery_id="0b6e4f8e-cc78-11e3-81ab-4c9367dc0958")
    )
    # Slack's url_verification handshake: 200 with the challenge once verified.
    challenge = json.dumps(
        {
            "type": "url_verification",
            "token": "legacy",
            "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
        },
        separators=(",", ":"),
    ).encode()
    events["ingest-slack-url-verification.json"] = http_api_event(
        signed_delivery(src["slack"], timestamp=now, body=challenge, delivery_id="unused")
    )
    # Meta (WhatsApp) notification, and Meta's GET endpoint verification (hub.challenge).
    events["ingest-meta.json"] = http_api_event(
        valid("meta", delivery_id="HBgLMTU1NTAxMjM0NTYVAgASGBQzQUE", resource="102290129340398")
    )
    events["ingest-meta-subscribe.json"] = subscription_get_event(
        "meta",
        {
            "hub.mode": "subscribe",
            "hub.verify_token": DEV_VERIFY_TOKENS["meta"],
            "hub.challenge": "1158201444",
        },
    )
    # No such source: 404.
    events["ingest-unknown-source.json"] = http_api_event(
        valid("github", delivery_id="5a0e3c0a-0000-4000-8000-000000000002"), path_source="nope"
    )
    return events


def write_events(out: Path, now: int) -> list[Path]:
    """Write :func:`build_events` into ``out``; return the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, event in build_events(now).items():
        event.get("requestContext", {}).pop("timeEpoch", None)
        path = out / name
        path.write_text(json.dumps(event, indent=2) + "\n")
        written.append(path)
    return written


def decoded_body(event: dict[str, Any]) -> bytes:
    """The raw body bytes of an API Gateway event."""
    body = event.get("body") or ""
    return base64.b64decode(body) if event.get("isBase64Encoded") else body.encode()


def register(subparsers: Any) -> None:
    """Add ``events`` to the operator CLI."""
    parser = subparsers.add_parser(
        "events",
        help="write the sample ingest events (events/*.json)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="output folder (default: events/)"
    )
    parser.add_argument(
        "--now",
        action="store_true",
        help="sign at the current time instead of the fixed time of the committed files",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import sys
    import time

    if args.now and args.out.resolve() == DEFAULT_OUT.resolve():
        print(
            "webhook-pipeline events: --now writes copies that expire (300 s for signed "
            "timestamps); give --out DIR so the committed events/ stay as they are",
            file=sys.stderr,
        )
        return 2
    for path in write_events(args.out, int(time.time()) if args.now else FIXED_TIME):
        print(path)
    return 0
