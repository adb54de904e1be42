"""``local run`` with a bad sources.toml fails before Redis, moto and provisioning start, with
the reason (file, source, key, nearest valid key) on the terminal."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration


def test_a_bad_sources_file_fails_local_run_before_anything_starts(tmp_path: Path) -> None:
    # Given a checkout whose sources.toml misspells a key
    shutil.copy(ROOT / "template.yaml", tmp_path / "template.yaml")
    sources = tmp_path / "layers" / "common" / "sources.toml"
    sources.parent.mkdir(parents=True)
    sources.write_text('[sources.stripe]\nprovider = "stripe"\ntolerance_secs = 5\n')
    state = tmp_path / "state"
    # When `local run` starts there
    process = subprocess.Popen(
        [sys.executable, "-m", "webhook_pipeline_ops.cli", "local", "run", "--port", "0"],
        cwd=tmp_path,
        env={**os.environ, "WEBHOOK_PIPELINE_LOCAL_DIR": str(state)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            process.communicate(timeout=60)
    # Then it exits 2 with the reason, and neither Redis nor moto was started
    assert process.returncode == 2, output
    assert (
        f"{sources}: [sources.stripe] key 'tolerance_secs': unknown key "
        "(did you mean 'tolerance_seconds'?)" in output
    )
    assert "redis:" not in output and "moto server" not in output, output
    assert not (state / "outputs.json").exists()
