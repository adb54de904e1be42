"""Per-provider verification cost (not a test): microseconds per ``Provider.verify`` call.

For every provider in the registry (``webhook_pipeline.providers.registry.all_providers``), a
sample delivery of the local stack's source for it is signed with the provider's development
secret (``Provider.sign_request`` through
``webhook_pipeline_ops.simulator.deliveries.signed_delivery``) and
``verify`` is timed on that request against the stored verification secret (the public key for
asymmetric schemes), in this process, warm. Each figure is the median over ``REPEATS`` runs of
the mean of ``CALLS`` calls (microseconds); ``min_us`` is the fastest run.

Run: ``.venv/bin/python bench/bench_verify.py`` (``--quick`` for fewer calls; written to
``bench/results/verify.quick.json``, git-ignored); figures go to ``bench/results/verify.json``
with the command that produced them.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

ROOT = Path(__file__).resolve().parents[1]
QUICK = "--quick" in sys.argv
RESULTS = ROOT / "bench" / "results" / ("verify.quick.json" if QUICK else "verify.json")
CALLS = 50 if QUICK else 300
REPEATS = 3 if QUICK else 7


def measure() -> dict[str, Any]:
    from webhook_pipeline.providers.registry import all_providers
    from webhook_pipeline.webhook_request import WebhookRequest
    from webhook_pipeline_ops.simulator.deliveries import example_sources, signed_delivery

    sources: dict[str, Any] = {}
    for source in example_sources().values():
        sources.setdefault(source.provider.name, source)
    figures: dict[str, Any] = {}
    for name, cls in all_providers().items():
        source = sources.get(name)
        if source is None:
            figures[name] = {"skipped": "no example source serves this provider"}
            continue
        provider = source.provider
        url = f"https://localhost/webhooks/{source.name}"
        now = int(time.time())
        delivery = signed_delivery(source, timestamp=now, url=url)
        parts = urlsplit(url)
        request = WebhookRequest(
            method="POST",
            source=source.name,
            headers={k.lower(): v for k, v in delivery.headers.items()},
            body=delivery.body,
            query=dict(parse_qsl(delivery.query_string, keep_blank_values=True)),
            path=parts.path,
            raw_query=delivery.query_string,
            host=parts.netloc,
            public_url=f"{url}?{delivery.query_string}" if delivery.query_string else url,
            request_id=delivery.request_id,
        )
        secrets = [provider.verification_secret(provider.dev_secret)]
        provider.verify(request, secrets, float(now))  # raises if the sample does not verify
        runs: list[float] = []
        for _ in range(REPEATS):
            started = time.perf_counter()
            for _ in range(CALLS):
                provider.verify(request, secrets, float(now))
            runs.append((time.perf_counter() - started) / CALLS * 1e6)
        figures[name] = {
            "title": cls.title,
            "signs": str(getattr(cls.signs, "value", cls.signs)),
            "body_bytes": len(delivery.body),
            "median_us": round(statistics.median(runs), 1),
            "min_us": round(min(runs), 1),
        }
    return figures


def table(figures: dict[str, Any]) -> str:
    """The Markdown table of the figures (for docs/performance.md)."""
    lines = [
        "| provider | body bytes | verify median (us) | fastest run (us) |",
        "|---|---:|---:|---:|",
    ]
    for name, f in sorted(figures.items(), key=lambda kv: -kv[1].get("median_us", 0)):
        if "skipped" in f:
            lines.append(f"| {name} | - | skipped: {f['skipped']} | - |")
        else:
            lines.append(f"| {name} | {f['body_bytes']} | {f['median_us']} | {f['min_us']} |")
    return "\n".join(lines)


def main() -> None:
    figures = measure()
    results = {
        "command": " ".join(
            [".venv/bin/python", str(Path(sys.argv[0]).resolve().relative_to(ROOT)), *sys.argv[1:]]
        ),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "calls_per_run": CALLS,
        "runs": REPEATS,
        "providers": figures,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(table(figures))
    print(f"written to {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
