"""docs/cost.md's bill: the per-line table, the totals, the variants and the shares, from the
cost model exactly as ``webhook-pipeline cost --per-month N`` computes them (its
:func:`~webhook_pipeline_ops.cost.inputs.usage_from` over ``cost_inputs.json``, the template and
the number of sources, its default price table)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from webhook_pipeline_ops.figures.render import ROOT, Results, table

if TYPE_CHECKING:
    from webhook_pipeline_ops.cost.bill import Bill
    from webhook_pipeline_ops.cost.usage import Usage

#: The monthly volumes docs/cost.md quotes (webhooks a month); the README quotes the first and
#: the last.
SMALL, MIDDLE, LARGE = 1e6, 1e7, 1e8
VOLUMES = (SMALL, MIDDLE, LARGE)
#: The bill table's rows: label, service, the items' prefixes (none: every line of the service).
ROWS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("API Gateway HTTP API", "API Gateway", ()),
    ("Lambda requests + duration", "Lambda", ()),
    ("SQS", "SQS", ()),
    ("DynamoDB writes (the transaction)", "DynamoDB", ("processor writes", "gate writes")),
    ("DynamoDB storage + PITR", "DynamoDB", ("storage",)),
    ("ElastiCache (ECPU, storage floor, claims above it)", "ElastiCache", ()),
    ("CloudWatch Logs", "CloudWatch", ("log ",)),
    ("CloudWatch metrics, alarms, dashboard", "CloudWatch", ("custom", "alarms", "dashboard")),
    ("X-Ray", "X-Ray", ()),
    ("S3 claim checks", "S3", ()),
    ("Archive (queue, archiver, S3 objects and storage)", "Archive", ()),
    ("VPC interface endpoints (+ data)", "VPC", ()),
    ("Secrets Manager", "Secrets Manager", ()),
)
#: What each variant changes, in the order of the variants table.
VARIANTS = {
    "as deployed": "",
    "unordered": "no source orders its events: one conditional put (1 unit) instead of the "
    "transaction (4)",
    "no-redis": "the gate as a DynamoDB conditional put + update (a duplicate's failed put still "
    "costs its unit), no cache, ingest out of the VPC",
    "lean-logs": "`POWERTOOLS_LOG_LEVEL: WARNING` (no per-delivery INFO line) and "
    "`LoggingConfig: {LogFormat: JSON, SystemLogLevel: WARN}` (no START/END/REPORT)",
    "no-tracing": "`Tracing: PassThrough`",
}
_WORDS = {1: "one", 2: "two", 3: "three", 4: "four"}


@dataclass(frozen=True)
class Model:
    """The bills of every variant at :data:`VOLUMES`, and the usage they were computed from."""

    usage: Usage
    bills: Mapping[float, Mapping[str, Bill]]

    def at(self, per_month: float, variant: str = "as deployed") -> Bill:
        return self.bills[per_month][variant]


@functools.cache
def template() -> Any:
    """template.yaml parsed (once a run)."""
    from webhook_pipeline_ops.local.template import load_template

    return load_template(ROOT / "template.yaml")


def model(results: Results) -> Model:
    """The cost model over ``results("cost_inputs.json")``, the template and sources.toml, with
    the default prices and DynamoDB wait, at each of :data:`VOLUMES`."""
    from webhook_pipeline_ops.cost.estimate import bills
    from webhook_pipeline_ops.cost.inputs import usage_from
    from webhook_pipeline_ops.cost.prices import DEFAULT_PRICES
    from webhook_pipeline_ops.cost.template import count_sources
    from webhook_pipeline_ops.cost.usage import DYNAMODB_MS, Scenario

    usage = usage_from(
        results("cost_inputs.json"),
        template(),
        count_sources(ROOT / "layers" / "common" / "sources.toml"),
        DYNAMODB_MS,
        results("archive_size.json"),
    )
    return Model(usage, {n: bills(usage, Scenario(per_month=n), DEFAULT_PRICES) for n in VOLUMES})


def usd(bill: Bill, service: str, *items: str) -> float:
    """USD a month of ``bill``'s lines of ``service`` whose item starts with one of ``items``
    (all of the service's lines when none is given)."""
    return sum(
        line.usd_month
        for line in bill.lines
        if line.service == service and (not items or line.item.startswith(items))
    )


def money(value: float) -> str:
    """``1,234.50``."""
    return f"{value:,.2f}"


def share(part: float, whole: float) -> str:
    """``35 %``."""
    return f"{100 * part / whole:.0f} %"


def bill_table(m: Model) -> str:
    """One row per :data:`ROWS` entry that costs something at some volume, then the totals.

    Raises
    ------
    ValueError
        A line of the bill belongs to no row (the table would not add up to its total).
    """
    deployed = [m.at(n) for n in VOLUMES]
    for bill in deployed:
        for line in bill.lines:
            if not any(line.service == s and line.item.startswith(i or ("",)) for _, s, i in ROWS):
                raise ValueError(f"no row of the bill table for {line.service}: {line.item}")
    rows = [
        [label, *(money(usd(b, service, *items)) for b in deployed)]
        for label, service, items in ROWS
        if any(usd(b, service, *items) for b in deployed)
    ]
    rows += [
        ["**total a month**", *(f"**{money(b.total)}**" for b in deployed)],
        ["of which fixed", *(money(b.fixed) for b in deployed)],
        ["**per million webhooks**", *(f"**{money(b.per_million())}**" for b in deployed)],
        ["per additional million", *(money(b.per_million(include_fixed=False)) for b in deployed)],
    ]
    header = ["line", *(f"{n / 1e6:g} million" for n in VOLUMES)]
    header[1] += " a month"
    return table(header, "lrrr", rows)


def variants_table(m: Model) -> str:
    """A month's total of each variant at each volume.

    Raises
    ------
    KeyError
        The cost model has a variant :data:`VARIANTS` does not describe.
    """
    rows = [
        [f"`{name}`" if name != "as deployed" else name, VARIANTS[name]]
        + [money(m.at(n, name).total) for n in VOLUMES]
        for name in sorted(m.bills[SMALL], key=list(VARIANTS).index)
    ]
    header = ["variant", "what changes", *(f"{n / 1e6:g} million" for n in VOLUMES)]
    return table(header, "llrrr", rows)


def fixed_items(m: Model) -> str:
    """The two largest fixed lines at the small volume: the endpoints and the cache minimum."""
    bill = m.at(SMALL)
    endpoints = _WORDS.get(m.usage.interface_endpoints, str(m.usage.interface_endpoints))
    return (
        f"the {endpoints} interface endpoints (${money(usd(bill, 'VPC', 'interface'))}), the "
        f"cache's storage minimum (${money(usd(bill, 'ElastiCache', 'storage (minimum'))})"
    )


def large_shares(m: Model) -> str:
    """The four largest per-request lines at the large volume, by share of the total."""
    bill = m.at(LARGE)
    days = m.usage.dedup_ttl_s / 86_400
    parts = sorted(
        (
            ("the DynamoDB transaction", usd(bill, "DynamoDB", "processor writes")),
            ("API Gateway", usd(bill, "API Gateway")),
            ("logs", usd(bill, "CloudWatch", "log ")),
            (
                f"the claims held in the cache for {days:.1f} days on average",
                usd(bill, "ElastiCache", "storage above"),
            ),
        ),
        key=lambda p: -p[1],
    )
    named = [f"{name} ({share(value, bill.total)})" for name, value in parts]
    return ", ".join(named[:-1]) + " and " + named[-1]


def duration_share(m: Model) -> str:
    """Lambda duration's largest share of the bill over :data:`VOLUMES`."""
    top = max(usd(b, "Lambda", "ingest", "processor") / b.total for b in map(m.at, VOLUMES))
    return f"about {100 * top:.1f} %"  # one decimal: a whole percent hides a 20 % change


def figures(results: Results) -> dict[str, str]:
    """The bill's blocks of docs/cost.md by name."""
    m = model(results)
    deployed, unordered = m.at(LARGE), m.at(LARGE, "unordered")
    return {
        "cost-bill": bill_table(m),
        "cost-duration-share": duration_share(m),
        "cost-fixed-items": fixed_items(m),
        "cost-large-shares": large_shares(m),
        "cost-variants": variants_table(m),
        "cost-unordered-floor": f"{share(unordered.total - deployed.total, deployed.total)} at "
        f"{LARGE / 1e6:g} million a month",
    }


#: Blocks from the template, the log formats, the price table and the volume alone, and the
#: write units (the results move them only past 1 KB items).
NOT_FROM_RESULTS = frozenset(
    {
        "cost-unordered-units",
        "reduce-units",
        "cost-fixed-items",
        "cost-platform-lines",
        "reduce-api",
        "reduce-endpoints",
        "reduce-transaction",
        "reduce-xray",
    }
)
