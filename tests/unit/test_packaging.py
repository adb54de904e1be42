"""Every Python package of the layer and the operator tree is in pyproject.toml's ``packages``
list, so a wheel (or a non-editable install) ships it: a package left out installs fine in
editable mode and is missing everywhere else."""

from __future__ import annotations

import tomllib

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.unit

ROOTS = {
    "webhook_pipeline": ROOT / "layers" / "common" / "webhook_pipeline",
    "webhook_pipeline_ops": ROOT / "ops" / "webhook_pipeline_ops",
}


def packages_on_disk() -> set[str]:
    found = set()
    for name, folder in ROOTS.items():
        for init in folder.rglob("__init__.py"):
            parts = init.parent.relative_to(folder).parts
            if "__pycache__" not in parts:
                found.add(".".join((name, *parts)))
    return found


def test_every_package_is_listed_once_in_pyproject() -> None:
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert len(listed) == len(set(listed)), "a package listed twice"
    assert packages_on_disk() - set(listed) == set()
