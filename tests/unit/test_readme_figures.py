"""The README's measured figures are what ``make readme`` writes from bench/results, the cost
model and the provider registry now: a result file, the template or a provider that changes
without the README fails here (``make readme`` rewrites it)."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from webhook_pipeline_ops import readme_figures
from webhook_pipeline_ops.readme_figures import BLOCK, FIGURES, README, blocks, render

pytestmark = pytest.mark.unit

#: Figures that do not come from a result file (the provider registry, the settings).
NOT_FROM_RESULTS = {"short-tolerances", "secrets-max-age"}


def block_texts(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for match in BLOCK.finditer(text):
        found.setdefault(match.group(1), []).append(" ".join(match.group(2).split()))
    return found


def test_the_readme_figures_are_what_the_results_give_now() -> None:
    text = README.read_text()
    assert set(blocks(text)) == set(FIGURES), "a figures block is missing or its marker broken"
    assert render(text) == text, "run `make readme` and commit README.md"


def perturbed(value: Any) -> Any:
    """Every number of a result file changed (ints + 7, floats x 1.37), the structure kept."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value + 7
    if isinstance(value, float):
        return value * 1.37
    if isinstance(value, dict):
        return {k: perturbed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [perturbed(v) for v in value]
    return value


@pytest.mark.parametrize("name", sorted(set(FIGURES) - NOT_FROM_RESULTS))
def test_each_block_is_read_from_its_result_file(name: str) -> None:
    # Given the README, and results whose numbers all differ from the committed ones
    text = README.read_text()
    cache: dict[str, Any] = {}

    def other_results(file: str) -> Any:
        if file not in cache:
            cache[file] = perturbed(readme_figures._load(file))
        return copy.deepcopy(cache[file])

    # When the README is rendered from them, then this block's text changes
    before = block_texts(text)[name]
    after = block_texts(render(text, other_results))[name]
    assert after != before, f"{name} does not depend on its result file"


def test_the_cost_figures_are_those_the_cost_command_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from webhook_pipeline_ops.cli import main

    def bill(per_month: str) -> dict[str, Any]:
        assert main(["cost", "--per-month", per_month, "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        return next(b for b in doc["bills"] if b["variant"] == "as deployed")

    small, large = bill("1e6"), bill("1e8")
    (cost,) = block_texts(README.read_text())["cost"]
    figures = [float(v.replace(",", "")) for v in re.findall(r"\$([\d,.]+)", cost)]
    assert figures == [
        round(small["usd_month"], 2),
        round(small["usd_month_fixed"], 2),
        round(large["usd_per_million"], 2),
    ]


def test_the_short_tolerances_are_the_registrys() -> None:
    from webhook_pipeline.providers import all_providers

    (listed,) = block_texts(README.read_text())["short-tolerances"]
    named = set(re.findall(r"\(`([a-z0-9-]+)`, (\d+) s\)", listed))
    short = {
        (cls.name, str(cls.default_tolerance_seconds))
        for cls in all_providers().values()
        if cls.default_tolerance_seconds is not None and cls.default_tolerance_seconds < 300
    }
    assert named == short and "discord" in {n for n, _ in named}
