"""The documents' measured figures (README.md, docs/cost.md, docs/performance.md) are what
``make readme`` writes from bench/results, the cost model and the provider registry now: a result
file, the template or a provider that changes without the documents fails here (``make readme``
rewrites them)."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from webhook_pipeline_ops.figures import DOCUMENTS, Document
from webhook_pipeline_ops.figures.render import BLOCK, blocks, load

pytestmark = pytest.mark.unit

BY_NAME = {doc.path.name: doc for doc in DOCUMENTS}


def block_texts(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for match in BLOCK.finditer(text):
        found.setdefault(match.group(1), []).append(" ".join(match.group(2).split()))
    return found


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda d: d.path.name)
def test_the_figures_are_what_the_results_give_now(doc: Document) -> None:
    text = doc.path.read_text()
    assert set(blocks(text)) == set(doc.figures()), (
        "a figures block is missing or its marker broken"
    )
    assert doc.render(text) == text, f"run `make readme` and commit {doc.path.name}"


def perturbed(value: Any) -> Any:
    """Every number of a result file changed (ints x 2 + 7, floats x 1.37), the structure kept."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value * 2 + 7
    if isinstance(value, float):
        return value * 1.37
    if isinstance(value, dict):
        return {k: perturbed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [perturbed(v) for v in value]
    return value


@pytest.mark.parametrize(
    ("doc", "name"),
    [
        (doc, name)
        for doc in DOCUMENTS
        for name in sorted(set(doc.figures()) - doc.not_from_results)
    ],
    ids=lambda v: v.path.name if isinstance(v, Document) else v,
)
def test_each_block_is_read_from_its_result_file(doc: Document, name: str) -> None:
    # Given a document, and results whose numbers all differ from the committed ones
    text = doc.path.read_text()
    cache: dict[str, Any] = {}

    def other_results(file: str) -> Any:
        if file not in cache:
            cache[file] = perturbed(load(file))
        return copy.deepcopy(cache[file])

    # When it is rendered from them, then this block's text changes
    before = block_texts(text)[name]
    after = block_texts(doc.render(text, other_results))[name]
    assert after != before, f"{name} does not depend on its result file"


def bill(capsys: pytest.CaptureFixture[str], per_month: str) -> dict[str, Any]:
    from webhook_pipeline_ops.cli import main

    assert main(["cost", "--per-month", per_month, "--json"]) == 0
    return {b["variant"]: b for b in json.loads(capsys.readouterr().out)["bills"]}


def dollars(text: str) -> list[float]:
    return [float(v.replace(",", "")) for v in re.findall(r"\$([\d,]+\.\d\d)", text)]


def test_the_readme_cost_figures_are_those_the_cost_command_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    small, large = bill(capsys, "1e6")["as deployed"], bill(capsys, "1e8")["as deployed"]
    (cost,) = block_texts(BY_NAME["README.md"].path.read_text())["cost"]
    assert dollars(cost) == [
        round(small["usd_month"], 2),
        round(small["usd_month_fixed"], 2),
        round(large["usd_per_million"], 2),
    ]


def test_the_cost_tables_are_those_the_cost_command_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given the cost command's bills at 1, 10 and 100 million webhooks a month
    volumes = [bill(capsys, n) for n in ("1e6", "1e7", "1e8")]
    text = BY_NAME["cost.md"].path.read_text()
    (table,) = block_texts(text)["cost-bill"]
    (variants,) = block_texts(text)["cost-variants"]

    def row(table: str, label: str) -> list[float]:
        cells = re.search(re.escape(label) + r"[^|]* \|([^|]*)\|([^|]*)\|([^|]*)\|", table)
        assert cells, label
        return [float(c.strip(" *").replace(",", "")) for c in cells.groups()]

    # Then the bill's totals and the variants' totals are the command's, rounded to cents
    deployed = [v["as deployed"] for v in volumes]
    assert row(table, "**total a month**") == [round(b["usd_month"], 2) for b in deployed]
    assert row(table, "of which fixed") == [round(b["usd_month_fixed"], 2) for b in deployed]
    assert row(table, "**per million webhooks**") == [
        round(b["usd_per_million"], 2) for b in deployed
    ]
    assert row(table, "per additional million") == [
        round(b["usd_per_additional_million"], 2) for b in deployed
    ]
    for variant in volumes[0]:
        label = variant if variant == "as deployed" else f"`{variant}`"
        pattern = r"\| " + re.escape(label) + r" \|[^|]*\| ([\d,.]+) \| ([\d,.]+) \| ([\d,.]+) \|"
        totals = re.search(pattern, variants)
        assert totals, variant
        assert [float(t.replace(",", "")) for t in totals.groups()] == [
            round(v[variant]["usd_month"], 2) for v in volumes
        ]
    # and the bill's lines add up to its total in every column (each line rounded to cents)
    rows = re.findall(r"\| ([A-Z][^|*]*?) \| ([\d,.]+) \| ([\d,.]+) \| ([\d,.]+) \|", table)
    per_request = [r for r in rows if not r[0].startswith(("of which", "per "))]
    assert len(per_request) >= 10
    for column in range(3):
        lines = sum(float(r[column + 1].replace(",", "")) for r in per_request)
        assert lines == pytest.approx(deployed[column]["usd_month"], abs=0.01 * len(per_request))


def test_the_fixed_figure_of_the_outside_estimate_is_the_bills(
    capsys: pytest.CaptureFixture[str],
) -> None:
    small = bill(capsys, "1e6")["as deployed"]
    (left_out,) = block_texts(BY_NAME["cost.md"].path.read_text())["cost-left-out"]
    assert dollars(left_out)[-1] == round(small["usd_month_fixed"], 2)


def test_the_short_tolerances_are_the_registrys() -> None:
    from webhook_pipeline.providers import all_providers

    (listed,) = block_texts(BY_NAME["README.md"].path.read_text())["short-tolerances"]
    named = set(re.findall(r"\(`([a-z0-9-]+)`, (\d+) s\)", listed))
    short = {
        (cls.name, str(cls.default_tolerance_seconds))
        for cls in all_providers().values()
        if cls.default_tolerance_seconds is not None and cls.default_tolerance_seconds < 300
    }
    assert named == short and "discord" in {n for n, _ in named}
