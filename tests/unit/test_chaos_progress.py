"""``chaos`` says what it is doing: the expected length of the run, one progress line per 5 % of
the traffic with the answers so far, and what is left of the schedule."""

from __future__ import annotations

import argparse
import re
import threading
import time
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest
from webhook_pipeline_ops.chaos.run import Run
from webhook_pipeline_ops.chaos.traffic import AttemptLog, Copy
from webhook_pipeline_ops.commands import chaos as commands_chaos
from webhook_pipeline_ops.simulator import sender as simulator

pytestmark = pytest.mark.unit


def test_the_traffic_prints_its_length_and_a_progress_line_every_5_percent(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a run of 1,200 copies whose sends are answered 202, except every tenth (503)
    run: Any = Run.__new__(Run)
    run.args = argparse.Namespace(rate=20_000.0, concurrency=8, burst_size=10, seed=1)
    run.t0, run.done, run.total = time.monotonic(), 0, 0
    run.lock, run.finals = threading.Lock(), Counter()
    monkeypatch.setattr(simulator, "recorded_resource_key", lambda planned: None)

    def deliver(planned: Any, copy: Copy) -> None:
        status = 503 if planned.n % 10 == 0 else 202
        copy.attempts.append(AttemptLog(status, 0.0, 1.0))

    run.deliver = deliver
    order = [
        (SimpleNamespace(n=n, source=SimpleNamespace(name="stripe"), delivery_id=f"e{n}",
                         sequence=n), False)
        for n in range(1200)
    ]  # fmt: skip
    # When it is sent
    copies, _ = run.send(order)
    err = capsys.readouterr().err
    # Then the expected length is printed first, then one line per 60 answered copies
    assert len(copies) == 1200
    assert re.search(r"traffic: 1200 copies at 20000/s with bursts: about \d+ s", err), err
    lines = [x for x in err.splitlines() if "copies answered" in x]
    assert [int(re.search(r"(\d+)/1200", x).group(1)) for x in lines] == list(  # type: ignore[union-attr]
        range(60, 1201, 60)
    )
    assert "1200/1200 copies answered (100 %); 2xx 1080, 5xx 120;" in lines[-1], lines[-1]
    assert "of the schedule left" in lines[0]


def test_the_run_prints_its_expected_duration_before_starting_a_stack(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class Started(Exception):
        pass

    def no_stack(args: argparse.Namespace) -> Any:
        raise Started

    monkeypatch.setattr(commands_chaos, "local_stack", no_stack)
    args = commands_chaos_args("--count", "1000", "--rate", "40")
    with pytest.raises(Started):
        commands_chaos.run(args)
    err = capsys.readouterr().err
    assert "chaos: 1000 copies at 40/s: the traffic takes about 25 s at most" in err, err
    assert "--settle-timeout 1800 s" in err


def commands_chaos_args(*argv: str) -> argparse.Namespace:
    from webhook_pipeline_ops.cli import build_parser

    return build_parser().parse_args(["chaos", *argv])
