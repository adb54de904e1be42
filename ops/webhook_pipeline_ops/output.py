"""Output helpers of the CLI: JSON on stdout, plain-text tables, a progress line on stderr."""

from __future__ import annotations

import argparse
import base64
import json
import re
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any, TextIO

#: A reST role (``:func:`~pkg.name```, ``:data:`X```, ``:class:`text <target>```).
_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`(?P<body>[^`]+)`")
#: A reST inline literal (double backquotes).
_LITERAL = re.compile(r"``(?P<body>.+?)``", re.DOTALL)


def plain_text(text: str) -> str:
    """``text`` without reST/Sphinx markup, for terminal help.

    ``:func:`~webhook_pipeline.replay.replay``` -> ``replay``; ``:data:`REGISTRARS``` ->
    ``REGISTRARS``; ``:class:`the report <ReplayReport>``` -> ``the report``; an inline literal
    in double backquotes -> the same text between single backquotes.
    """

    def role(match: re.Match[str]) -> str:
        body = match["body"]
        if "<" in body and body.endswith(">"):
            return body[: body.index("<")].strip()
        if body.startswith("~"):
            return body[1:].rsplit(".", 1)[-1]
        return body

    return _LITERAL.sub(lambda m: f"`{m['body']}`", _ROLE.sub(role, text))


def _default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return str(value)


def print_json(data: Any, stream: TextIO | None = None) -> None:
    """Pretty JSON (datetimes ISO 8601, Decimals as numbers, bytes as base64)."""
    print(json.dumps(data, indent=2, default=_default, sort_keys=False), file=stream or sys.stdout)


def print_table(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str], stream: TextIO | None = None
) -> None:
    """A left-aligned plain-text table with a header row (``-`` for missing values)."""
    out = stream or sys.stdout
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    print(
        "  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip(),
        file=out,
    )
    for r in cells:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip(), file=out)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    return str(value)


def human_age(seconds: float | None) -> str:
    """``3d4h``, ``5m12s``, ``42s``; ``-`` for ``None``."""
    if seconds is None:
        return "-"
    seconds = max(0, int(seconds))
    delta = timedelta(seconds=seconds)
    days, rest = delta.days, delta.seconds
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes}m"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


class Progress:
    """A one-line progress display on stderr, redrawn in place; silent when stderr is no TTY
    (or when disabled), so logs and pipes stay clean."""

    def __init__(self, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled and self.stream.isatty()
        self._width = 0

    def update(self, text: str) -> None:
        if not self.enabled:
            return
        padded = text.ljust(self._width)
        self._width = len(text)
        self.stream.write("\r" + padded)
        self.stream.flush()

    def done(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\n")
            self.stream.flush()


def command_name() -> str:
    """How to type this CLI in hints: ``webhook-pipeline`` when that name is on ``PATH`` (an
    activated venv), else the path of the script beside this interpreter, relative to the
    current folder when it is below it (``.venv/bin/webhook-pipeline``, as the README runs it)."""
    import os
    import shutil
    from pathlib import Path

    if shutil.which("webhook-pipeline"):
        return "webhook-pipeline"
    script = Path(sys.executable).with_name("webhook-pipeline")
    if not script.exists():
        return "webhook-pipeline"
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return os.fspath(script)


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` that ends each option's text with ``(default: X)``, except where there is no
    default to show (``None``, a flag's ``False``) or the text already names it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        shown = action.default
        if shown is None or shown is False or shown == argparse.SUPPRESS or "%(default)" in text:
            return text
        return super()._get_help_string(action)


def utc_time(moment: datetime) -> str:
    """The one time format of the console and the CLI's tables: ``YYYY-MM-DD HH:MM:SS.mmm UTC``
    (a naive ``moment`` is taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
