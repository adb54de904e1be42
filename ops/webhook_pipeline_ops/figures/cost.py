"""The cost model's bills, exactly as ``webhook-pipeline cost --per-month N`` computes them (its
:func:`~webhook_pipeline_ops.commands_cost.usage_from` over ``cost_inputs.json``, the template and
the number of sources, its default price table)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from webhook_pipeline_ops.figures.render import ROOT, Results

if TYPE_CHECKING:
    from webhook_pipeline_ops.commands_cost import Bill, Usage

#: The monthly volumes docs/cost.md quotes (webhooks a month); the README quotes the first and
#: the last.
SMALL, MIDDLE, LARGE = 1e6, 1e7, 1e8
VOLUMES = (SMALL, MIDDLE, LARGE)


@dataclass(frozen=True)
class Model:
    """The bills of every variant at :data:`VOLUMES`, and the usage they were computed from."""

    usage: Usage
    bills: Mapping[float, Mapping[str, Bill]]

    def at(self, per_month: float, variant: str = "as deployed") -> Bill:
        return self.bills[per_month][variant]


@functools.cache
def _template() -> Any:
    from webhook_pipeline_ops.local.provision import load_template

    return load_template(ROOT / "template.yaml")


def model(results: Results) -> Model:
    """The cost model over ``results("cost_inputs.json")``, the template and sources.toml, with
    the default prices and DynamoDB wait, at each of :data:`VOLUMES`."""
    from webhook_pipeline_ops.commands_cost import (
        DEFAULT_PRICES,
        DYNAMODB_MS,
        Scenario,
        bills,
        count_sources,
        usage_from,
    )

    usage = usage_from(
        results("cost_inputs.json"),
        _template(),
        count_sources(ROOT / "layers" / "common" / "sources.toml"),
        DYNAMODB_MS,
    )
    return Model(usage, {n: bills(usage, Scenario(per_month=n), DEFAULT_PRICES) for n in VOLUMES})
