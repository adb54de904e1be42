"""Conditions on a delivery's body fields: ``--where 'data.object.amount>=1000'``.

Grammar (spaces around the operator are allowed)::

    predicate := path op value
    path      := step ("." key | "[" digits "]")*      step := key | "[" digits "]"
    key       := [A-Za-z0-9_-]+  |  '"' any character but '"', '\\', '[' and ']' '"'
    op        := "=" | "!=" | ">" | ">=" | "<" | "<=" | "~"
    value     := a JSON number, a JSON "string", true, false, null, or a bare word (the
                 rest of the text, surrounding spaces removed, not starting with one of
                 ``= ! < > ~``) taken as a string

Meaning, the same locally (:meth:`Predicate.matches`) and in Athena (:meth:`Predicate.to_sql`):

* the path names a scalar of the body (an object or a list names nothing);
* a **missing path never matches**, whatever the operator: ``status!=paid`` does not select a
  body without ``status``;
* the body's value must have the literal's type: a number literal compares with JSON numbers
  only, numerically (as double precision floats); a string literal or bare word with JSON strings
  only, by code point; ``true``, ``false`` and ``null`` take ``=`` and ``!=`` only;
* ``~`` is "contains": a JSON string containing the literal string.

A text that does not parse raises :class:`PredicateError` naming the text and the position.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

OPERATORS = ("!=", ">=", "<=", "=", ">", "<", "~")
ORDERING = frozenset({">", ">=", "<", "<="})
_KEY = re.compile(r"[A-Za-z0-9_-]+")
_QUOTED_KEY = re.compile(r'"([^"\\\[\]]+)"')
_INDEX = re.compile(r"\[([0-9]+)\]")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
#: Keys Athena's JSON path takes after a dot; any other is written ``["key"]``.
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_]+")

Scalar = str | float | bool | None


class PredicateError(ValueError):
    """A predicate text that does not parse: ``text``, the 0-based ``position``, ``problem``."""

    def __init__(self, text: str, position: int, problem: str) -> None:
        super().__init__(f"cannot parse predicate {text!r} at position {position}: {problem}")
        self.text = text
        self.position = position
        self.problem = problem


@dataclass(frozen=True)
class Predicate:
    """One parsed condition (see the module docstring for its meaning).

    Attributes
    ----------
    text : str
        As given.
    path : tuple[str | int, ...]
        Object keys (``str``) and list indexes (``int``) from the body's root.
    op : str
        One of :data:`OPERATORS`.
    value : str | float | bool | None
        The literal: a number (``float``), a string, ``True``/``False`` or ``None`` (null).
    """

    text: str
    path: tuple[str | int, ...]
    op: str
    value: Scalar

    def matches(self, body: Any) -> bool:
        """Whether the parsed JSON ``body`` satisfies the condition (never raises)."""
        found, target = _lookup(body, self.path)
        if not found or isinstance(target, dict | list):
            return False
        if isinstance(self.value, bool) or self.value is None:
            if not (target is None or isinstance(target, bool)):
                return False
            same = target is self.value
            return same if self.op == "=" else not same
        if isinstance(self.value, float):
            if isinstance(target, bool) or not isinstance(target, int | float):
                return False
            return _compare(float(target), self.op, self.value)
        if not isinstance(target, str):
            return False
        if self.op == "~":
            return self.value in target
        return _compare(target, self.op, self.value)

    def json_path(self) -> str:
        """The path in Athena's JSON path syntax: ``$.data.object["a-b"][0]``."""
        parts = ["$"]
        for step in self.path:
            if isinstance(step, int):
                parts.append(f"[{step}]")
            elif _PLAIN_KEY.fullmatch(step):
                parts.append(f".{step}")
            else:
                parts.append(f'["{step}"]')
        return "".join(parts)

    def to_sql(self, column: str = "body") -> str:
        """The condition as an Athena (Trino) SQL boolean expression over the JSON text column
        ``column``: ``json_extract_scalar`` for the value, ``json_format(json_extract(...))`` for
        its JSON type, ``TRY_CAST(... AS DOUBLE)`` for numbers. Every literal is quoted with
        :func:`sql_string`."""
        path = sql_string(self.json_path())
        raw = f"json_format(json_extract({column}, {path}))"
        scalar = f"json_extract_scalar({column}, {path})"
        if isinstance(self.value, bool) or self.value is None:
            literal = sql_string(json.dumps(self.value))
            if self.op == "=":
                return f"({raw} = {literal})"
            return f"({raw} IN ('true', 'false', 'null') AND {raw} <> {literal})"
        if isinstance(self.value, float):
            number = f"TRY_CAST({scalar} AS DOUBLE)"
            return f"({raw} NOT LIKE '\"%' AND {number} {_sql_op(self.op)} DOUBLE '{self.value!r}')"
        text = sql_string(self.value)
        if self.op == "~":
            return f"({raw} LIKE '\"%' AND strpos({scalar}, {text}) > 0)"
        return f"({raw} LIKE '\"%' AND {scalar} {_sql_op(self.op)} {text})"


def sql_string(text: str) -> str:
    """``text`` as a SQL string literal (single quotes doubled, so no quote ends it early)."""
    return "'" + text.replace("'", "''") + "'"


def _sql_op(op: str) -> str:
    return "<>" if op == "!=" else op


def _compare(left: Any, op: str, right: Any) -> bool:
    if op == "=":
        return bool(left == right)
    if op == "!=":
        return bool(left != right)
    if op == ">":
        return bool(left > right)
    if op == ">=":
        return bool(left >= right)
    if op == "<":
        return bool(left < right)
    return bool(left <= right)


def _lookup(body: Any, path: tuple[str | int, ...]) -> tuple[bool, Any]:
    node = body
    for step in path:
        if isinstance(step, int):
            if not isinstance(node, list) or step >= len(node):
                return False, None
            node = node[step]
        else:
            if not isinstance(node, dict) or step not in node:
                return False, None
            node = node[step]
    return True, node


def parse_predicate(text: str) -> Predicate:
    """Parse one ``--where`` text.

    Raises
    ------
    PredicateError
        The text does not follow the grammar (the message names the text and the position).
    """
    path, pos = _parse_path(text)
    while pos < len(text) and text[pos] == " ":
        pos += 1
    op = next((o for o in OPERATORS if text.startswith(o, pos)), None)
    if op is None:
        raise PredicateError(text, pos, f"expected an operator ({' '.join(OPERATORS)})")
    value = _parse_value(text, pos + len(op))
    if (isinstance(value, bool) or value is None) and op not in ("=", "!="):
        raise PredicateError(text, pos, f"{json.dumps(value)} takes only = and !=")
    if op == "~" and not isinstance(value, str):
        raise PredicateError(text, pos, "~ (contains) takes a string")
    return Predicate(text=text, path=tuple(path), op=op, value=value)


def _parse_path(text: str) -> tuple[list[str | int], int]:
    path: list[str | int] = []
    pos = 0
    while True:
        index = _INDEX.match(text, pos)
        if index:
            path.append(int(index.group(1)))
            pos = index.end()
        elif path and not text.startswith(".", pos):
            return path, pos
        else:
            if path:
                pos += 1  # the dot
            key = _KEY.match(text, pos) or _QUOTED_KEY.match(text, pos)
            if key is None:
                raise PredicateError(
                    text, pos, 'expected a key (letters, digits, _ and -, or "quoted") or [n]'
                )
            path.append(key.group(1) if key.re is _QUOTED_KEY else key.group(0))
            pos = key.end()


def _parse_value(text: str, pos: int) -> Scalar:
    rest = text[pos:].strip()
    start = len(text) - len(text[pos:].lstrip())
    if not rest:
        raise PredicateError(text, start, "expected a value")
    if rest.startswith('"'):
        try:
            value = json.loads(rest)
        except json.JSONDecodeError as exc:
            raise PredicateError(text, start + exc.pos, f"not a JSON string: {exc.msg}") from None
        if not isinstance(value, str):
            raise PredicateError(text, start, "not a JSON string")
        return value
    if rest in ("true", "false", "null"):
        literal: bool | None = json.loads(rest)
        return literal
    if _NUMBER.fullmatch(rest):
        number = float(rest)
        if not math.isfinite(number):
            raise PredicateError(text, start, "number out of range")
        return number
    if rest[0] in "=!<>~":
        raise PredicateError(
            text, start, 'a bare word cannot start with = ! < > ~ (quote it: "...")'
        )
    return rest
