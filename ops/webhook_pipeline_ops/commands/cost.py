"""``webhook-pipeline cost``: what the pipeline costs per month, and per million webhooks.

The bill is usage x price, line by line (docs/cost.md explains each line):

- usage per delivery and per invocation is *measured* on the real functions by
  ``bench/bench_cost_inputs.py`` (durations, log bytes, envelope and item sizes, Redis bytes per
  claim, the EMF metrics emitted) and read from ``bench/results/cost_inputs.json``;
- sizes and settings come from ``template.yaml`` (memory, batch size and window, TTLs and
  retentions, interface endpoints, alarms, tracing, architecture) and the number of sources
  from ``layers/common/sources.toml``;
- prices are parameters: :data:`DEFAULT_PRICES` is a dated list-price table for one region
  (:data:`PRICES_AS_OF`, :data:`PRICES_REGION`; free tiers left out); ``--price NAME=VALUE``
  overrides one.

Variants show what a design change would do to the same traffic: ``no-redis`` (the gate as a
DynamoDB conditional put, the ingest function out of the VPC), ``unordered`` (no source orders
its events: one conditional put per delivery instead of the two-item transaction),
``lean-logs`` (no per-delivery INFO line, no Lambda platform lines) and ``no-tracing``.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import replace
from pathlib import Path
from typing import Any

from webhook_pipeline_ops.aws import OpsError
from webhook_pipeline_ops.cost.bill import Bill
from webhook_pipeline_ops.cost.estimate import bills
from webhook_pipeline_ops.cost.inputs import load_usage
from webhook_pipeline_ops.cost.prices import PRICES_AS_OF, PRICES_REGION, Prices, parse_prices
from webhook_pipeline_ops.cost.usage import DYNAMODB_MS, Scenario, Usage
from webhook_pipeline_ops.cost.variants import VARIANTS
from webhook_pipeline_ops.output import print_json, print_table

#: Webhook requests a month when ``--per-month`` is not given.
DEFAULT_PER_MONTH = 1e6


def register(subparsers: Any) -> None:
    """Add ``cost``."""
    parser = subparsers.add_parser(
        "cost",
        help="monthly cost and cost per million webhooks, line by line, with design variants",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _traffic_options(parser)
    parser.add_argument(
        "--variant",
        choices=[*VARIANTS, "all"],
        default="all",
        help="print this variant's breakdown (default: as deployed, then all)",
    )
    parser.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="NAME=USD",
        help="override one price (names: --list-prices)",
    )
    parser.add_argument("--list-prices", action="store_true", help="print the price table")
    _input_options(parser)
    parser.add_argument("--json", action="store_true", help="JSON instead of tables")
    parser.set_defaults(func=run)


def _traffic_options(parser: argparse.ArgumentParser) -> None:
    """The :class:`~webhook_pipeline_ops.cost.usage.Scenario`'s options."""
    parser.add_argument(
        "--per-month",
        type=float,
        default=DEFAULT_PER_MONTH,
        metavar="N",
        help="webhook requests a month (default 1e6, the README's figure; e.g. 1e8)",
    )
    parser.add_argument(
        "--duplicate-share",
        type=float,
        default=0.0,
        metavar="F",
        help="share of requests that are sender retries of a delivery (0-1)",
    )
    parser.add_argument(
        "--ordered-share",
        type=float,
        default=1.0,
        metavar="F",
        help="share of deliveries from sources with resource key + sequence",
    )
    parser.add_argument(
        "--large-body-share",
        type=float,
        default=0.0,
        metavar="F",
        help="share of deliveries whose body goes to S3 (over 150 kB)",
    )


def _input_options(parser: argparse.ArgumentParser) -> None:
    """Where the :class:`~webhook_pipeline_ops.cost.usage.Usage` comes from, and overrides."""
    parser.add_argument("--inputs", type=Path, help="cost_inputs.json (bench/bench_cost_inputs.py)")
    parser.add_argument("--template", type=Path, help="template.yaml (default: the repository's)")
    parser.add_argument("--sources", type=int, help="sources (secrets); default: sources.toml")
    parser.add_argument("--ingest-ms", type=float, help="override the measured ingest duration")
    parser.add_argument(
        "--processor-ms-per-record",
        type=float,
        help="override the measured processor duration per record",
    )
    parser.add_argument(
        "--dynamodb-ms",
        type=float,
        default=DYNAMODB_MS,
        help=f"DynamoDB wait per processor invocation, ms (default {DYNAMODB_MS:g})",
    )


def usage_for(args: argparse.Namespace) -> Usage:
    """The :class:`~webhook_pipeline_ops.cost.usage.Usage` for the command's arguments.

    Raises
    ------
    OpsError
        The inputs file or the template is missing or unreadable.
    """
    usage = load_usage(args.inputs, args.template, args.sources, args.dynamodb_ms)
    if args.ingest_ms is not None:
        usage = replace(usage, ingest_ms_accepted=args.ingest_ms)
    if args.processor_ms_per_record is not None:
        usage = replace(usage, processor_ms_per_record=args.processor_ms_per_record)
    return usage


def _check_share(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise OpsError(f"--{name} must be between 0 and 1, got {value}", exit_code=2)


def _money(value: float) -> str:
    return f"{value:,.2f}" if abs(value) >= 0.995 or value == 0 else f"{value:.4f}"


def bill_json(bill: Bill) -> dict[str, Any]:
    """A bill as the ``--json`` output shows it (USD rounded: totals to 4 places, lines to 6)."""
    return {
        "variant": bill.variant,
        "usd_month": round(bill.total, 4),
        "usd_month_fixed": round(bill.fixed, 4),
        "usd_per_million": round(bill.per_million(), 4),
        "usd_per_additional_million": round(bill.per_million(include_fixed=False), 4),
        "lines": [
            {**dataclasses.asdict(line), "usd_month": round(line.usd_month, 6)}
            for line in bill.lines
        ],
    }


def run(args: argparse.Namespace) -> int:
    """Print the price table, or the bills of the arguments' traffic (tables or JSON)."""
    prices = parse_prices(args.price)
    if args.list_prices:
        _print_prices(prices)
        return 0
    if args.per_month <= 0:
        raise OpsError("--per-month must be positive", exit_code=2)
    for name in ("duplicate_share", "ordered_share", "large_body_share"):
        _check_share(name.replace("_", "-"), getattr(args, name))
    usage = usage_for(args)
    scenario = Scenario(
        per_month=args.per_month,
        duplicate_share=args.duplicate_share,
        ordered_share=args.ordered_share,
        large_body_share=args.large_body_share,
    )
    all_bills = bills(usage, scenario, prices)
    if args.json:
        print_json(
            {
                "prices": {
                    "region": PRICES_REGION,
                    "as_of": PRICES_AS_OF,
                    **dataclasses.asdict(prices),
                },
                "scenario": dataclasses.asdict(scenario),
                "usage": dataclasses.asdict(usage),
                "bills": [bill_json(b) for b in all_bills.values()],
                "archive_per_million_30_days": archive_comparison(usage, scenario, prices),
            }
        )
        return 0
    shown = "as deployed" if args.variant == "all" else args.variant
    _print_bill(all_bills[shown])
    if args.variant == "all":
        print()
        _print_variants(all_bills)
    if usage.archive_bytes_per_record > 0:
        print()
        print(
            f"the archive at {usage.archive_bytes_per_record:g} bytes a delivery (measured at "
            "2 KB bodies), kept 30 days, USD per million webhooks:"
        )
        for name, value in archive_comparison(usage, scenario, prices).items():
            print(f"  {name}: {_money(value)}")
    return 0


def archive_comparison(usage: Usage, scenario: Scenario, prices: Prices) -> dict[str, float]:
    """USD per million webhooks of each archive mechanism, the archive kept 30 days
    (:func:`webhook_pipeline_ops.cost.archive.alternatives`); empty without measured sizes."""
    from webhook_pipeline_ops.cost.archive import alternatives, per_million
    from webhook_pipeline_ops.cost.estimate import traffic

    if usage.archive_bytes_per_record <= 0:
        return {}
    counts = traffic(usage, scenario)
    return {
        name: round(per_million(lines, counts), 4)
        for name, lines in alternatives(usage, counts, prices).items()
    }


def _print_prices(prices: Prices) -> None:
    print(f"list prices, {PRICES_REGION}, as of {PRICES_AS_OF} (USD, free tiers excluded)")
    for f in dataclasses.fields(Prices):
        print(f"  {f.name} = {getattr(prices, f.name)}")


def _print_bill(bill: Bill) -> None:
    """One variant's lines, with each one's share of the total, then the totals."""
    total = bill.total
    print(
        f"{bill.variant}: {bill.scenario.per_month:,.0f} webhooks a month, prices "
        f"{PRICES_REGION} {PRICES_AS_OF} (USD)"
    )
    rows = [
        {
            "service": line.service,
            "item": line.item + (" (fixed)" if line.fixed else ""),
            "quantity": f"{line.quantity:,.4g} {line.unit}",
            "usd_month": _money(line.usd_month),
            "share": f"{100 * line.usd_month / total:.1f}%" if total else "-",
        }
        for line in bill.lines
    ]
    print_table(rows, ["service", "item", "quantity", "usd_month", "share"])
    print(
        f"total {_money(total)} a month ({_money(bill.fixed)} fixed); "
        f"{_money(bill.per_million())} per million, "
        f"{_money(bill.per_million(include_fixed=False))} per additional million"
    )


def _print_variants(all_bills: dict[str, Bill]) -> None:
    print_table(
        [
            {
                "variant": b.variant,
                "usd_month": _money(b.total),
                "per_million": _money(b.per_million()),
                "per_additional_million": _money(b.per_million(include_fixed=False)),
            }
            for b in all_bills.values()
        ],
        ["variant", "usd_month", "per_million", "per_additional_million"],
    )
