"""The CLI starts fast: ``--help`` and the commands that do not talk to AWS import neither boto3
nor botocore's client machinery (about 1 s of imports on a quiet machine, 5 s under load)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration

#: Runs the CLI in a fresh interpreter, then prints which heavy modules it imported.
PROBE = """
import json, sys
from webhook_pipeline_ops.cli import main
code = main(sys.argv[1:])
heavy = ("boto3", "botocore.client", "botocore.session", "moto")
loaded = sorted(m for m in heavy if m in sys.modules)
print("\\n" + json.dumps({"code": code, "loaded": loaded}))
"""


@pytest.mark.parametrize("argv", [["--help"], ["send", "--help"], ["cost", "--help"]])
def test_help_runs_without_importing_boto3(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"code": 0, "loaded": []}, report
    assert "usage: webhook-pipeline" in done.stdout


def test_send_help_shows_each_default(capsys: pytest.CaptureFixture[str]) -> None:
    from webhook_pipeline_ops.cli import main

    assert main(["send", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())  # the help text re-wrapped on one line
    for option, default in [
        ("--count COUNT unique deliveries per source", "5"),
        ("--rate RATE requests per second", "20.0"),
        ("--concurrency CONCURRENCY parallel senders when paced", "8"),
        ("body (0..1)", "0.0"),
        ("--resources RESOURCES distinct resources per source", "1"),
        ("--timeout TIMEOUT sender-side timeout, seconds", "10.0"),
        ("after a timeout or 5xx", "2"),
    ]:
        assert f"{option} (default: {default})" in text, option
    assert "(default: None)" not in text and "(default: False)" not in text


def test_cost_runs_with_its_default_volume(capsys: pytest.CaptureFixture[str]) -> None:
    from webhook_pipeline_ops.cli import main

    assert main(["cost", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["scenario"]["per_month"] == 1_000_000
