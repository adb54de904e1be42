"""The bill: one :class:`Line` per priced quantity, and a :class:`Bill`'s totals."""

from __future__ import annotations

from dataclasses import dataclass, field

from webhook_pipeline_ops.cost.usage import Scenario


@dataclass(frozen=True)
class Line:
    """One line of the bill: ``quantity`` in ``unit`` a month, costing ``usd_month`` USD a month."""

    service: str
    item: str
    quantity: float
    unit: str
    usd_month: float
    fixed: bool = False  # does not grow with the number of webhooks


@dataclass
class Bill:
    """All lines for one scenario and variant, with totals."""

    variant: str
    scenario: Scenario
    lines: list[Line] = field(default_factory=list)

    @property
    def total(self) -> float:
        return sum(line.usd_month for line in self.lines)

    @property
    def variable(self) -> float:
        return sum(line.usd_month for line in self.lines if not line.fixed)

    @property
    def fixed(self) -> float:
        return sum(line.usd_month for line in self.lines if line.fixed)

    def per_million(self, *, include_fixed: bool = True) -> float:
        """USD per million requests (``include_fixed=False``: what each extra million adds)."""
        amount = self.total if include_fixed else self.variable
        return amount / self.scenario.per_month * 1e6 if self.scenario.per_month else 0.0

    def by_service(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for line in self.lines:
            out[line.service] = out.get(line.service, 0.0) + line.usd_month
        return out
