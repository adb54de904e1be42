"""Configuration errors a person can act on: the file, the source, the key, what is wrong, and the
nearest valid key or value, with no library URL.

pydantic's own message names the model and ends each error with an ``errors.pydantic.dev`` link;
:func:`describe_validation_error` rewrites it as one line per error::

    sources.toml: [sources.stripe] key 'tolerance_secs': unknown key (did you mean
    'tolerance_seconds'?)
    sources.toml: [sources.stripe] key 'tolerance_seconds': Input should be a valid integer
    (got the string '300')
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ValidationError


def nearest(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices`` (difflib ratio >= 0.6), or ``""``."""
    match = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _fields(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The valid keys at the table that holds the key ``loc`` names (nested models followed)."""
    current: Any = model
    for part in loc[:-1]:
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return []
        annotation = field.annotation
        args = getattr(annotation, "__args__", ()) or (annotation,)
        current = next((a for a in args if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if current is None:
            return []
    return list(getattr(current, "model_fields", {}))


def describe_settings_error(exc: ValidationError, model: type[BaseModel]) -> str:
    """One line per error of a function's environment: ``environment of IngestSettings:
    variable 'QUEUE_URL': Field required``, with the nearest valid name of an unknown one."""
    text = describe_validation_error(exc, file="environment", table="", model=model)
    return "\n".join(
        re.sub(
            r"^environment: \[\] key '([^']*)'",
            lambda m: f"environment of {model.__name__}: variable {m.group(1).upper()!r}",
            line,
        )
        for line in text.splitlines()
    )


def describe_validation_error(
    exc: ValidationError, *, file: str, table: str, model: type[BaseModel]
) -> str:
    """One line per error of ``exc``: ``FILE: [TABLE] key 'a.b': what is wrong``.

    Parameters
    ----------
    file : str
        The file name shown first (``sources.toml``).
    table : str
        The TOML table the errors are in (``sources.stripe``).
    model : type[BaseModel]
        The model validated, to suggest the nearest valid key of an unknown one.
    """
    lines = []
    for error in exc.errors(include_url=False):
        loc = tuple(p for p in error["loc"] if not isinstance(p, int) or p < 0) or ("?",)
        key = ".".join(str(p) for p in error["loc"]) or "?"
        if error["type"] == "extra_forbidden":
            what = "unknown key" + nearest(str(loc[-1]), _fields(model, loc))
        else:
            what = str(error["msg"])
            given = error.get("input")
            if error["type"].endswith("_type") and isinstance(given, str):
                what += f" (got the string {given[:40]!r})"
            elif error["type"] == "literal_error" and isinstance(given, str):
                what += nearest(given, re.findall(r"'([^']*)'", str(error["ctx"]["expected"])))
        lines.append(f"{file}: [{table}] key {key!r}: {what}")
    return "\n".join(lines)
