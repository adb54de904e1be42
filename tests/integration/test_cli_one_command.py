"""A CLI run imports only the module of its own command (``build_parser(command)``): an
``archive search`` does not import the other commands' modules, and a word that is no module's
command still gets the full parser (its usage error, or another module's command)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from webhook_pipeline_ops.cli import REGISTRARS, build_parser

from tests.conftest import ROOT

pytestmark = pytest.mark.integration

PROBE = """
import json, sys
from webhook_pipeline_ops.cli import REGISTRARS, main
code = main(sys.argv[1:])
loaded = sorted(m for m in REGISTRARS if m in sys.modules)
print("\\n" + json.dumps({"code": code, "loaded": loaded}))
"""


def probe(*argv: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    report: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def test_a_command_imports_only_its_own_module() -> None:
    report = probe("archive", "search", "--help")
    assert report == {"code": 0, "loaded": ["webhook_pipeline_ops.commands.archive"]}


def test_help_and_unknown_words_get_every_command() -> None:
    assert probe("--help") == {"code": 0, "loaded": sorted(REGISTRARS)}
    assert probe("no-such-command") == {"code": 2, "loaded": sorted(REGISTRARS)}
    full = build_parser()
    commands = next(a for a in full._actions if a.dest == "command").choices
    assert commands is not None and len(commands) >= len(REGISTRARS)
    for word in commands:
        one = build_parser(word)
        mine = next(a for a in one._actions if a.dest == "command").choices
        assert mine is not None and word in mine  # each command still parses
