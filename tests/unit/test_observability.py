"""The shared Logger writes the same lines as Powertools' defaults, only cheaper; the handler
decorator traces exactly when tracing is on."""

from __future__ import annotations

import io
import json
import logging
import os
import random
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools import Logger
from webhook_pipeline import observability
from webhook_pipeline.observability import message_deserializer

ROOT = Path(__file__).resolve().parents[2]

EDGE_MESSAGES = [
    "",
    " ",
    "duplicate discarded at the gate",
    "accepted",
    "failure note written",  # starts like "false"
    "null pointer",  # starts like "null"
    "NaN",
    "Infinity",
    "-Infinity",
    "true",
    "false",
    "null",
    "123",
    "-1.5e3",
    "0x10",
    '"quoted"',
    '{"a": 1, "b": [1, 2]}',
    "[1, 2, 3]",
    '  \n\t{"indented": true}',
    "{not json",
    "[unbalanced",
    '\u00a0{"a": 1}',  # a non-JSON blank before a JSON object
    '\u00e9t\u00e9 {"a": 1}',
    "ids: [1, 2]",
]


def powertools_reading(message: str) -> Any:
    """What Powertools' formatter does with a ``str`` message by default."""
    try:
        return json.loads(message)
    except (json.JSONDecodeError, TypeError, ValueError):
        return message


def ours_reading(message: str) -> Any:
    try:
        return message_deserializer(message)
    except (json.JSONDecodeError, TypeError, ValueError):
        return message


def same(a: Any, b: Any) -> bool:
    # NaN != NaN: compare what the formatter would write
    return json.dumps(a) == json.dumps(b) and type(a) is type(b)


@pytest.mark.parametrize("message", EDGE_MESSAGES)
def test_message_reading_is_powertools_own(message: str) -> None:
    assert same(ours_reading(message), powertools_reading(message))


def test_message_reading_matches_on_random_strings() -> None:
    rng = random.Random(7)
    alphabet = ' \t\n{}[]",:-.0123456789eEtrufalsnNIiy\u00a0\u00e9xyz'
    for _ in range(20_000):
        message = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert same(ours_reading(message), powertools_reading(message)), repr(message)


def test_plain_sentences_are_not_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of it: a sentence never goes through ``json.loads`` (and its exception)."""
    calls: list[str] = []
    real = json.loads
    monkeypatch.setattr(observability.json, "loads", lambda s: calls.append(s) or real(s))
    assert message_deserializer("duplicate discarded at the gate") == (
        "duplicate discarded at the gate"
    )
    assert calls == []
    assert message_deserializer('{"a": 1}') == {"a": 1}
    assert calls == ['{"a": 1}']


class Unserialisable:
    def __str__(self) -> str:
        return "<unserialisable>"


def _line(logger: Logger, stream: io.StringIO, message: Any, **extra: Any) -> dict[str, Any]:
    stream.seek(0)
    stream.truncate()
    logger.info(message, extra=extra)
    line = stream.getvalue()
    assert line.count("\n") == 1
    record: dict[str, Any] = json.loads(line)
    record.pop("timestamp")
    record.pop("location")  # the caller: the same line here for both
    return record


def test_log_lines_are_what_powertools_defaults_write() -> None:
    ours_stream, default_stream = io.StringIO(), io.StringIO()
    ours = Logger(
        service="obs-same",
        level="INFO",
        logger_handler=logging.StreamHandler(ours_stream),
        json_deserializer=message_deserializer,
        json_serializer=observability._log_serializer(),
    )
    # the same service name would hand back the first Logger's handler: one letter apart
    default = Logger(
        service="obs-samf", level="INFO", logger_handler=logging.StreamHandler(default_stream)
    )
    cases: list[tuple[Any, dict[str, Any]]] = [
        ("duplicate discarded at the gate", {"delivery_id": "d-1"}),
        ('{"structured": [1, 2]}', {}),
        ("12", {}),
        ({"a": "dict message"}, {}),
        ("non-ASCII \u00e9t\u00e9 \u2603", {"who": "\u00fcber", "amount": Decimal("1.50")}),
        ("an object", {"thing": Unserialisable()}),
    ]
    for message, extra in cases:
        ours_line = _line(ours, ours_stream, message, **extra)
        default_line = _line(default, default_stream, message, **extra)
        assert ours_line.pop("service") == "obs-same"
        assert default_line.pop("service") == "obs-samf"
        assert ours_line == default_line
        # byte for byte too (compact, UTF-8 kept), the service name and timestamp aside
        stamp = re.compile(r'"timestamp":"[^"]*"')
        assert stamp.sub("", ours_stream.getvalue().replace("obs-same", "obs-samf")) == (
            stamp.sub("", default_stream.getvalue())
        )


def test_powertools_dev_keeps_the_indented_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_DEV", "true")
    assert observability._log_serializer() is None
    monkeypatch.setenv("POWERTOOLS_DEV", "false")
    assert observability._log_serializer() is not None


def test_untraced_handler_is_the_handler_itself() -> None:
    assert observability.TRACING is False  # the tests run outside Lambda

    def handler(event: Any, context: Any) -> int:
        return 1

    assert observability.capture_lambda_handler(capture_response=False)(handler) is handler


def test_traced_handler_goes_through_the_tracer() -> None:
    code = (
        "import webhook_pipeline.observability as o\n"
        "def handler(event, context): return 1\n"
        "wrapped = o.capture_lambda_handler(capture_response=False)(handler)\n"
        "print(o.TRACING, wrapped is handler, wrapped.__wrapped__ is handler)\n"
        # the choice reaches Powertools as given; none given leaves it to its environment
        # variable (POWERTOOLS_TRACER_CAPTURE_RESPONSE), as the bare decorator does
        "seen = []\n"
        "real = o.tracer.capture_lambda_handler\n"
        "def spy(*args, **kw):\n"
        "    if not args: seen.append(kw)  # ours; Powertools then calls itself with the handler\n"
        "    return real(*args, **kw)\n"
        "o.tracer.capture_lambda_handler = spy\n"
        "o.capture_lambda_handler()(handler)\n"
        "o.capture_lambda_handler(capture_response=False)(handler)\n"
        "print(*(kw['capture_response'] for kw in seen))\n"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("POWERTOOLS_", "LAMBDA_"))}
    env = {
        **clean,
        "PYTHONPATH": str(ROOT / "layers" / "common"),
        "LAMBDA_TASK_ROOT": str(ROOT),
        "POWERTOOLS_TRACE_DISABLED": "false",
        "AWS_XRAY_CONTEXT_MISSING": "IGNORE_ERROR",
    }
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["True", "False", "True", "None", "False"]
