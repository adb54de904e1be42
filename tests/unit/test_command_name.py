"""The CLI's name in printed hints: what the user can type from where they are."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from webhook_pipeline_ops.output import command_name


def test_the_plain_name_when_it_is_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "webhook-pipeline"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert command_name() == "webhook-pipeline"


def test_the_venv_script_relative_to_the_folder_when_not_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "webhook-pipeline").write_text("#!/bin/sh\n")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(sys, "executable", str(venv_bin / "python"))
    monkeypatch.chdir(tmp_path)
    assert command_name() == ".venv/bin/webhook-pipeline"
    monkeypatch.chdir(tmp_path / ".venv")
    assert command_name() == "bin/webhook-pipeline"
    elsewhere = tmp_path / "elsewhere"  # not above the venv: the full path
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert command_name() == str(venv_bin / "webhook-pipeline")
