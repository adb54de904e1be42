"""docs/cost.md's archive section: the measured compression (bench/results/archive_size.json),
the archive's cost per million webhooks at 2 KB bodies kept 30 days for each mechanism
(:func:`webhook_pipeline_ops.cost.archive.alternatives`) at the document's volumes, and the
deployed mechanism's lines with their quantities."""

from __future__ import annotations

from typing import Any

from webhook_pipeline_ops.figures.cost import VOLUMES, model, money
from webhook_pipeline_ops.figures.render import Results, table

#: Days the archive is kept in the figure (the issue's yardstick; the template's default is 90).
FIGURE_RETENTION_DAYS = 30.0


def _alternatives(results: Results) -> dict[float, dict[str, Any]]:
    from webhook_pipeline_ops.cost.archive import alternatives
    from webhook_pipeline_ops.cost.estimate import traffic
    from webhook_pipeline_ops.cost.prices import DEFAULT_PRICES
    from webhook_pipeline_ops.cost.usage import Scenario

    usage = model(results).usage
    out: dict[float, dict[str, Any]] = {}
    for n in VOLUMES:
        counts = traffic(usage, Scenario(per_month=n))
        out[n] = {
            "traffic": counts,
            "lines": alternatives(usage, counts, DEFAULT_PRICES, FIGURE_RETENTION_DAYS),
        }
    return out


def compression(results: Results) -> str:
    """The measured bytes per archived delivery and the ratio to its body."""
    size = results("archive_size.json")
    (case,) = (c for c in size["cases"] if c["case"] == "batch over all sources")
    return (
        f"{case['bytes_per_record']:g} bytes per delivery of a {size['body_bytes_mean']:g}-byte "
        f"body ({case['ratio_to_body']:g} x smaller than the body, "
        f"{case['ratio_to_line']:g} x smaller than its {size['line_bytes_mean']:g}-byte JSON line;"
        f" objects of {size['batch']} records over {len(size['sources'])} sources)"
    )


def mechanisms_table(results: Results) -> str:
    """USD per million webhooks of each mechanism (fixed lines included) at each volume."""
    from webhook_pipeline_ops.cost.archive import MECHANISMS, per_million

    alts = _alternatives(results)
    rows = [
        [name, *(money(per_million(alts[n]["lines"][name], alts[n]["traffic"])) for n in VOLUMES)]
        for name in MECHANISMS
    ]
    header = ["mechanism (USD per million, 30 days)", *(f"{n / 1e6:g} million" for n in VOLUMES)]
    header[1] += " a month"
    return table(header, "lrrr", rows)


def _quantity(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:,.2f}"


def lines_table(results: Results) -> str:
    """The deployed archive's lines (quantity and USD a month) at the smallest and largest
    volumes."""
    from webhook_pipeline_ops.cost.archive import MECHANISMS

    alts = _alternatives(results)
    deployed = next(iter(MECHANISMS))
    small, large = (alts[n]["lines"][deployed] for n in (VOLUMES[0], VOLUMES[-1]))
    rows = [
        [
            a.item + (" (fixed)" if a.fixed else ""),
            f"{_quantity(a.quantity)} {a.unit}",
            money(a.usd_month),
            f"{_quantity(b.quantity)} {b.unit}",
            money(b.usd_month),
        ]
        for a, b in zip(small, large, strict=True)
    ]
    header = [
        "line",
        f"{VOLUMES[0] / 1e6:g} million: quantity",
        "USD",
        f"{VOLUMES[-1] / 1e6:g} million: quantity",
        "USD",
    ]
    return table(header, "lrrrr", rows)


def headline(results: Results) -> str:
    """The deployed archive's cost per million at the largest volume (batches full)."""
    from webhook_pipeline_ops.cost.archive import MECHANISMS, per_million

    alts = _alternatives(results)[VOLUMES[-1]]
    deployed = alts["lines"][next(iter(MECHANISMS))]
    value = per_million(deployed, alts["traffic"])
    storage = per_million([a for a in deployed if a.item.startswith("storage")], alts["traffic"])
    bytes_per_record = model(results).usage.archive_bytes_per_record
    return (
        f"${money(value)} per million webhooks at {VOLUMES[-1] / 1e6:g} million a month, of "
        f"which ${storage:.3f} is the storage of {bytes_per_record:g} bytes a delivery"
    )


def figures(results: Results) -> dict[str, str]:
    """The archive blocks of docs/cost.md by name."""
    return {
        "archive-compression": compression(results),
        "archive-headline": headline(results),
        "archive-mechanisms": mechanisms_table(results),
        "archive-lines": lines_table(results),
    }
