"""template.yaml's ``HooksModule`` parameter: the processor's ``HOOKS_MODULE``, which
:class:`ProcessorSettings` reads and :func:`load_hooks_module` imports at cold start."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from webhook_pipeline.settings import ProcessorSettings

pytestmark = pytest.mark.template

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    from cfn_tools import load_yaml

    return dict(load_yaml(TEMPLATE.read_text()))


def processor_env(template: dict[str, Any]) -> dict[str, Any]:
    function = template["Resources"]["ProcessorFunction"]["Properties"]
    return dict(function["Environment"]["Variables"])


def test_hooks_module_parameter_is_the_processors_hooks_module(
    template: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    parameter = template["Parameters"]["HooksModule"]
    assert (parameter["Type"], parameter["Default"]) == ("String", "")
    variables = processor_env(template)
    assert variables["HOOKS_MODULE"] == {"Ref": "HooksModule"}
    # the variable is the one the settings read (an empty default: no hooks)
    monkeypatch.setenv("TABLE_NAME", "table")
    monkeypatch.setenv("PAYLOAD_BUCKET", "bucket")
    monkeypatch.setenv("HOOKS_MODULE", "my_hooks")
    assert ProcessorSettings.load().hooks_module == "my_hooks"


@pytest.mark.parametrize(
    ("value", "allowed"),
    [
        ("", True),
        ("my_hooks", True),
        ("company.webhooks.hooks", True),
        ("my-hooks", False),
        ("hooks/my_hooks", False),
        ("my_hooks.", False),
        ("1hooks", False),
    ],
)
def test_hooks_module_takes_a_dotted_module_name_or_nothing(
    template: dict[str, Any], value: str, allowed: bool
) -> None:
    pattern = template["Parameters"]["HooksModule"]["AllowedPattern"]
    assert (re.fullmatch(pattern, value) is not None) is allowed


def test_the_processor_knows_the_sources_catalogue_for_provider_hooks(
    template: dict[str, Any],
) -> None:
    # The local stack turns SOURCES_CATALOGUE on only where the template declares it; a
    # deployed processor reads which source is which provider's from sources.toml alone.
    assert processor_env(template)["SOURCES_CATALOGUE"] == "false"
