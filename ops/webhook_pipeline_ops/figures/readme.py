"""The README's figures: each block's text from the committed results, the cost model and the
provider registry (see :mod:`webhook_pipeline_ops.figures`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from webhook_pipeline_ops.figures.render import Results

#: The asymmetric signature schemes of the verification figures (the rest are HMAC or tokens).
ASYMMETRIC = {"sendgrid": "SendGrid's ECDSA", "discord": "Discord's Ed25519"}
#: Below this tolerance (seconds) a provider's signed timestamp can expire during one
#: ``sam local invoke`` (a container start): the README lists those providers.
SHORT_TOLERANCE_SECONDS = 300
RECEIVERS = {"inline": "inline", "inline+lock": "inline + lock", "queue": "queue"}


def _count(value: float) -> str:
    """``100``, ``7,000``."""
    return f"{value:,.0f}"


def _ms(value: float) -> str:
    return f"{value:,.0f} ms"


def inline_vs_queue_table(results: Results) -> str:
    """The duplicate processings / gave up / ack p99 table, one row per downstream delay."""
    rows = results("inline_vs_queue.json")["rows"]
    delays = sorted({r["delay_s"] for r in rows})
    cells: dict[tuple[float, str], str] = {}
    for r in rows:
        dup, gave_up = r["duplicate_processings_per_100"], r["gave_up_per_100"]
        dup_text = f"**{_count(dup)}**" if dup else _count(dup)
        gave_text = f"**{_count(gave_up)}**" if gave_up else _count(gave_up)
        cells[(r["delay_s"], r["mode"])] = f"{dup_text} / {gave_text} / {_ms(r['ack_p99_ms'])}"
    lines = [
        "| D (s) | inline | inline + lock | queue (ingest + SQS + processor) |",
        "|---:|---|---|---|",
    ]
    for d in delays:
        lines.append(f"| {d:g} | " + " | ".join(cells[(d, m)] for m in RECEIVERS) + " |")
    return "\n" + "\n".join(lines) + "\n"


def inline_vs_queue_prose(results: Results) -> str:
    """The queue's ack p50 and p99 ranges and when the last delivery is recorded at the
    longest delay."""
    rows = [r for r in results("inline_vs_queue.json")["rows"] if r["mode"] == "queue"]
    p50 = [r["ack_p50_ms"] for r in rows]
    p99 = [r["ack_p99_ms"] for r in rows]
    last = max(rows, key=lambda r: r["delay_s"])
    return (
        f"Behind the queue the answer comes in {min(p50):.0f}-{max(p50):.0f} ms (p50) whatever "
        f"D is (the p99, the slowest of 100 answers, ranges {min(p99):.0f}-{max(p99):.0f} ms on "
        "this shared 2-core machine, where the sender, the receiver, the processor, Redis and "
        "moto all run); the work still takes D per delivery (the last of 100 is recorded "
        f"{last['last_processing_done_s']:.0f} s after the first is sent at "
        f"D = {last['delay_s']:g} s"
    )


def inline_lock_refusals(results: Results) -> str:
    """The lock's refusals (non-2xx answers) at the first delay where the inline receiver
    processes twice."""
    rows = results("inline_vs_queue.json")["rows"]
    first = min(
        (r for r in rows if r["mode"] == "inline" and r["duplicate_processings_per_100"]),
        key=lambda r: r["delay_s"],
    )
    locked = next(
        r for r in rows if r["mode"] == "inline+lock" and r["delay_s"] == first["delay_s"]
    )
    return (
        f"{locked['non_2xx_answers_per_100']:.0f} answers of 409 per 100 webhooks at "
        f"D = {first['delay_s']:g} s"
    )


def ingest_overhead_table(results: Results) -> str:
    """Ours over each other handler, wall p50, new and duplicate deliveries."""
    over = results("ingest_overhead.json")["ours_over"]
    columns = {
        "bare": "bare",
        "bare_observed": "bare + our observability",
        "powertools_redis": "Powertools Redis",
        "powertools_redis_observed": "Powertools Redis + our observability",
        "powertools_dynamodb": "Powertools DynamoDB",
    }
    lines = [
        "  | delivery | " + " | ".join(columns.values()) + " |",
        "  |---|" + "---:|" * len(columns),
    ]
    for delivery in ("new", "duplicate"):
        ratios = " | ".join(f"{over[delivery][c]['wall_p50']:.2f}x" for c in columns)
        lines.append(f"  | {delivery} | {ratios} |")
    return "\n" + "\n".join(lines) + "\n  "  # the closing marker stays in the list item


def cold_start(results: Results) -> str:
    """The Lambda container's cold start with and without the shipped bytecode."""
    data = results("cold_start.json")
    container = data["results"]["lambda_container"]
    ingest = container["IngestFunction"]
    others = ", ".join(
        f"{container[f]['source_only_over_compiled']:.2f}x for the {name}"
        for f, name in (("ProcessorFunction", "processor"), ("ReplayFunction", "replay function"))
    )
    return (
        f"takes {ingest['compiled']['cold_s_median']:.2f} s with the shipped `.pyc` files and "
        f"{ingest['source_only']['cold_s_median']:.2f} s without them "
        f"({ingest['source_only_over_compiled']:.2f}x, medians of {data['runs_each']} fresh "
        f"containers), and {others}"
    )


def import_ratios(results: Results) -> str:
    """Our modules' import over their third-party dependencies, in instructions."""
    data = results("import_instructions.json")["results"]
    ratios = [f"{name} {data[name]['app_import_over_deps']:.3f}x" for name in data]
    ratios[0] += " its third-party dependencies"
    met = "met" if all(v["target_met"] for v in data.values()) else "not met"
    return f"{', '.join(ratios)} (target 1.10: {met}"


def cost(results: Results) -> str:
    """The as-deployed bill at 1 and 100 million webhooks a month, as ``webhook-pipeline cost``
    computes it (see :func:`webhook_pipeline_ops.figures.cost.model`)."""
    from webhook_pipeline_ops.figures.cost import LARGE, SMALL, model

    bills = model(results)
    small, large = bills.at(SMALL), bills.at(LARGE)
    return (
        f"${small.total:,.2f} a month at {SMALL / 1e6:g} million webhooks (of which "
        f"${small.fixed:,.2f} fixed), ${large.per_million():,.2f} per million at "
        f"{LARGE / 1e6:g} million"
    )


def chaos(results: Results) -> str:
    """The committed chaos run's reconciliation."""
    data = results("chaos.json")
    rec = data["reconciliation"]
    kinds = len(data["faults_by_kind"])
    return (
        f"{rec['deliveries']:,} deliveries in {rec['copies']:,} copies with all {kinds} fault "
        f"kinds, lost {rec['lost']}, double-applied {rec['double_applied']}, out-of-order "
        f"applied {rec['out_of_order_applied']}, settled {data['settle_seconds']:g} s after the "
        "traffic"
    )


def verify_costs(results: Results) -> str:
    """The per-provider verification cost: the range of the symmetric schemes, then the
    asymmetric ones."""
    providers = results("verify.json")["providers"]
    others = [v["median_us"] for k, v in providers.items() if k not in ASYMMETRIC]
    slow = [providers[k]["median_us"] for k in ASYMMETRIC]
    return (
        f"{min(others):.0f}-{max(others):.0f} us for the HMAC and token schemes, "
        f"{min(slow):.0f}-{max(slow):.0f} us for {' and '.join(ASYMMETRIC.values())}"
    )


def short_tolerances(results: Results) -> str:
    """The providers whose signed timestamp is valid for less than
    :data:`SHORT_TOLERANCE_SECONDS`, from the provider registry (tolerance ascending)."""
    from webhook_pipeline.providers import all_providers

    short = sorted(
        (cls.default_tolerance_seconds, cls.name, cls.title)
        for cls in all_providers().values()
        if cls.default_tolerance_seconds is not None
        and cls.default_tolerance_seconds < SHORT_TOLERANCE_SECONDS
    )
    return ", ".join(f"{title} (`{name}`, {seconds} s)" for seconds, name, title in short)


def secrets_max_age(results: Results) -> str:
    """The ingest function's default secrets cache lifetime (``SECRETS_MAX_AGE_SECONDS``)."""
    from webhook_pipeline.settings import IngestSettings

    return f"{IngestSettings.model_fields['secrets_max_age_seconds'].default} s"


FIGURES: Mapping[str, Callable[[Results], str]] = {
    "chaos": chaos,
    "inline-vs-queue": inline_vs_queue_table,
    "inline-vs-queue-prose": inline_vs_queue_prose,
    "inline-lock-refusals": inline_lock_refusals,
    "ingest-overhead": ingest_overhead_table,
    "verify": verify_costs,
    "cold-start": cold_start,
    "import": import_ratios,
    "cost": cost,
    "short-tolerances": short_tolerances,
    "secrets-max-age": secrets_max_age,
}


def figures(results: Results) -> dict[str, str]:
    """Every README block's text by name."""
    return {name: figure(results) for name, figure in FIGURES.items()}


#: Blocks whose text comes from the registry or the settings, not from a result file.
NOT_FROM_RESULTS = frozenset({"short-tolerances", "secrets-max-age"})
