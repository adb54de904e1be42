"""The documents' measured figures, written from the committed results so they cannot drift.

Each figure of README.md, docs/cost.md and docs/performance.md that comes from a file of
``bench/results/`` or from the cost model (``webhook-pipeline cost``) sits between
``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->``; ``make readme`` rewrites every such
block from the results and the model as they are now (one module per document builds its
blocks' texts), and ``tests/unit/test_readme_figures.py`` fails when a committed document
differs from what it would write. Run:
``.venv/bin/python -m webhook_pipeline_ops.figures [--check]``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from webhook_pipeline_ops.figures import (
    archive_cost,
    archive_perf,
    cost,
    cost_prose,
    cost_sources,
    performance,
    readme,
)
from webhook_pipeline_ops.figures.render import ROOT, Results, blocks, load, render


@dataclass(frozen=True)
class Document:
    """A document with figures blocks and the functions that write their texts."""

    path: Path
    parts: Sequence[Callable[[Results], dict[str, str]]]
    #: Blocks whose text comes from the template, the prices, the registry or the settings
    #: alone, not from a result file.
    not_from_results: frozenset[str] = frozenset()

    def figures(self, results: Results = load) -> dict[str, str]:
        """Every block's text by name, from ``results``."""
        out: dict[str, str] = {}
        for part in self.parts:
            out.update(part(results))
        return out

    def render(self, text: str, results: Results = load) -> str:
        """``text`` with every block rewritten from ``results``.

        Raises
        ------
        KeyError
            A block names no figure of this document.
        """
        return render(text, self.figures(results))


DOCUMENTS = (
    Document(ROOT / "README.md", (readme.figures,), readme.NOT_FROM_RESULTS),
    Document(
        ROOT / "docs" / "cost.md",
        (cost_sources.figures, cost.figures, cost_prose.figures, archive_cost.figures),
        cost.NOT_FROM_RESULTS | cost_sources.NOT_FROM_RESULTS,
    ),
    Document(ROOT / "docs" / "performance.md", (performance.figures, archive_perf.figures)),
)


def main(argv: list[str] | None = None) -> int:
    """Rewrite every document's figures (``--check``: exit 1 when one differs, write nothing)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report a difference")
    args = parser.parse_args(argv)
    status = 0
    for doc in DOCUMENTS:
        name, text = doc.path.relative_to(ROOT), doc.path.read_text()
        if missing := set(doc.figures()) - set(blocks(text)):
            print(f"{name} lacks the figures blocks {sorted(missing)} (or a marker is broken)")
            status = 1
            continue
        updated = doc.render(text)
        if updated == text:
            print(f"{name}: figures up to date")
        elif args.check:
            print(f"{name}: figures differ from bench/results: run `make readme`")
            status = 1
        else:
            doc.path.write_text(updated)
            print(f"{name}: figures rewritten from bench/results")
    return status
