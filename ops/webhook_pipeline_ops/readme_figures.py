"""The README's measured figures, written from the committed results so they cannot drift.

Each figure of the README that comes from a file of ``bench/results/`` or from the cost model
(``webhook-pipeline cost``) sits between ``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->``;
:func:`render` rewrites every such block from the results and the model as they are now (and the
short-tolerance list from the provider registry). ``make readme`` writes the README;
``tests/unit/test_readme_figures.py`` fails when the committed README differs from what it would
write. Run: ``.venv/bin/python -m webhook_pipeline_ops.readme_figures [--check]``.
"""

from __future__ import annotations

import argparse
import json
import re
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[2]
README = _ROOT / "README.md"
RESULTS = _ROOT / "bench" / "results"
#: A block and the rest of the line it ends on.
BLOCK = re.compile(r"<!-- figures:([a-z0-9-]+) -->(.*?)<!-- /figures:\1 -->([^\n]*)", re.DOTALL)
#: Volumes the README quotes the cost model at: a month's webhooks.
COST_SMALL, COST_LARGE = 1e6, 1e8
#: The asymmetric signature schemes of the verification figures (the rest are HMAC or tokens).
ASYMMETRIC = {"sendgrid": "SendGrid's ECDSA", "discord": "Discord's Ed25519"}
#: Below this tolerance (seconds) a provider's signed timestamp can expire during one
#: ``sam local invoke`` (a container start): the README lists those providers.
SHORT_TOLERANCE_SECONDS = 300
WIDTH = 100  # the README's line length
RECEIVERS = {"inline": "inline", "inline+lock": "inline + lock", "queue": "queue"}

Results = Callable[[str], Any]


def _load(name: str) -> Any:
    return json.loads((RESULTS / name).read_text())


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
    computes it (its :func:`usage_from` over ``cost_inputs.json``, the template and the number of
    sources, its price table)."""
    from webhook_pipeline_ops.commands_cost import (
        DEFAULT_PRICES,
        DYNAMODB_MS,
        Scenario,
        bills,
        count_sources,
        usage_from,
    )
    from webhook_pipeline_ops.local.provision import load_template

    usage = usage_from(
        results("cost_inputs.json"),
        load_template(_ROOT / "template.yaml"),
        count_sources(_ROOT / "layers" / "common" / "sources.toml"),
        DYNAMODB_MS,
    )
    small, large = (
        bills(usage, Scenario(per_month=n), DEFAULT_PRICES)["as deployed"]
        for n in (COST_SMALL, COST_LARGE)
    )
    return (
        f"${small.total:,.2f} a month at {COST_SMALL / 1e6:g} million webhooks (of which "
        f"${small.fixed:,.2f} fixed), ${large.per_million():,.2f} per million at "
        f"{COST_LARGE / 1e6:g} million"
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


def blocks(text: str) -> list[str]:
    """The names of the figures blocks in ``text``, in order."""
    return [m.group(1) for m in BLOCK.finditer(text)]


def render(text: str, results: Results = _load) -> str:
    """``text`` with every figures block rewritten from ``results`` (a result file's parsed
    JSON by name).

    Raises
    ------
    KeyError
        A block names no known figure.
    """

    def block(match: re.Match[str]) -> str:
        name, rest = match.group(1), match.group(3)
        body = FIGURES[name](results)
        if body.startswith("\n"):  # a table between its markers, on lines of its own
            return f"<!-- figures:{name} -->{body}<!-- /figures:{name} -->{rest}"
        # prose inside a paragraph: the block and the rest of its line wrapped as the README is
        line = text[text.rfind("\n", 0, match.start()) + 1 : match.start()]
        body = _UNIT.sub(_KEEP, body)  # never a number at a line's end and its unit on the next
        marked = (
            f"<!--{_KEEP}figures:{name}{_KEEP}-->{body}<!--{_KEEP}/figures:{name}{_KEEP}-->{rest}"
        )
        return _wrap(marked, line)[len(line) :].replace(_KEEP, " ")

    return BLOCK.sub(block, text)


_KEEP = "\x01"  # a space no line may break at (inside a marker, before a unit)
_UNIT = re.compile(r"(?<=\d) (?=(?:s|ms|us)\b)")


def _wrap(text: str, line: str) -> str:
    """``text`` wrapped at :data:`WIDTH` as if it followed ``line`` (the start of its line),
    continuation lines indented as ``line`` is."""
    indent = line[: len(line) - len(line.lstrip(" "))]
    wrapped = textwrap.fill(
        _KEEP * len(line) + text,
        width=WIDTH,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return line + wrapped[len(line) :]


def main(argv: list[str] | None = None) -> int:
    """Rewrite the README's figures (``--check``: exit 1 when they differ, write nothing)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report a difference")
    args = parser.parse_args(argv)
    text = README.read_text()
    if missing := set(FIGURES) - set(blocks(text)):
        print(f"README lacks the figures blocks {sorted(missing)} (or a marker is broken)")
        return 1
    updated = render(text)
    if updated == text:
        print("README figures are up to date")
        return 0
    if args.check:
        print("README figures differ from bench/results: run `make readme`")
        return 1
    README.write_text(updated)
    print("README figures rewritten from bench/results")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
