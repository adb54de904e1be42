"""Rewriting the figures blocks of a Markdown document.

A block is ``<!-- figures:NAME -->TEXT<!-- /figures:NAME -->``. A block whose text starts with a
newline (a table) is replaced as it is; a block inside a paragraph is wrapped, with the rest of
its line, at :data:`WIDTH` (continuation lines indented as the block's first line), never
breaking inside a marker or between a number and its unit.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "bench" / "results"
#: A block and the rest of the line it ends on.
BLOCK = re.compile(r"<!-- figures:([a-z0-9-]+) -->(.*?)<!-- /figures:\1 -->([^\n]*)", re.DOTALL)
WIDTH = 100  # the documents' line length

#: A result file's parsed JSON by its name in ``bench/results/``.
Results = Callable[[str], Any]


def load(name: str) -> Any:
    """``bench/results/NAME`` parsed (the committed results)."""
    return json.loads((RESULTS / name).read_text())


def blocks(text: str) -> list[str]:
    """The names of the figures blocks in ``text``, in order."""
    return [m.group(1) for m in BLOCK.finditer(text)]


def render(text: str, figures: Mapping[str, str]) -> str:
    """``text`` with every figures block's text replaced by ``figures[name]``.

    Raises
    ------
    KeyError
        A block names no figure of ``figures``.
    """

    def block(match: re.Match[str]) -> str:
        name, rest = match.group(1), match.group(3)
        body = figures[name]
        if body.startswith("\n"):  # a table between its markers, on lines of its own
            return f"<!-- figures:{name} -->{body}<!-- /figures:{name} -->{rest}"
        # prose inside a paragraph: the block and the rest of its line wrapped
        line = text[text.rfind("\n", 0, match.start()) + 1 : match.start()]
        body = _UNIT.sub(_KEEP, body)  # never a number at a line's end and its unit on the next
        marked = (
            f"<!--{_KEEP}figures:{name}{_KEEP}-->{body}<!--{_KEEP}/figures:{name}{_KEEP}-->{rest}"
        )
        return _wrap(marked, line)[len(line) :].replace(_KEEP, " ")

    return BLOCK.sub(block, text)


_KEEP = "\x01"  # a space no line may break at (inside a marker, before a unit)
_ITEM = re.compile(r" *(?:[-*]|\d+\.) +")
_UNIT = re.compile(r"(?<=\d) (?=(?:s|ms|us|%|bytes|MB|KB|write|unit|units)(?:\W|$))")


def _wrap(text: str, line: str) -> str:
    """``text`` wrapped at :data:`WIDTH` as if it followed ``line`` (the start of its line),
    continuation lines indented as ``line`` is (as its text, for a list item's first line)."""
    item = _ITEM.match(line)
    indent = " " * len(item.group(0)) if item else line[: len(line) - len(line.lstrip(" "))]
    wrapped = textwrap.fill(
        _KEEP * len(line) + text,
        width=WIDTH,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return line + wrapped[len(line) :]


def table(header: list[str], align: str, rows: list[list[str]], indent: str = "") -> str:
    """A Markdown table as a block's text: ``align`` is one character per column, ``l`` or
    ``r``; the closing marker goes on a line of its own, indented by ``indent``."""
    rule = "|" + "".join("---:|" if a == "r" else "---|" for a in align)
    lines = ["| " + " | ".join(header) + " |", rule]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n" + "\n".join(indent + line for line in lines) + "\n" + indent


def bullets(items: list[str], indent: str = "") -> str:
    """A Markdown list as a block's text, each item wrapped at :data:`WIDTH` (never between a
    number and its unit)."""
    lines = [
        textwrap.fill(
            _UNIT.sub(_KEEP, item),
            WIDTH,
            initial_indent=indent + "- ",
            subsequent_indent=indent + "  ",
            break_on_hyphens=False,
            break_long_words=False,
        ).replace(_KEEP, " ")
        for item in items
    ]
    return "\n" + "\n".join(lines) + "\n"
