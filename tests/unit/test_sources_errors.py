"""A bad sources.toml is reported as the file, the source and the key, with the nearest valid key
or value, without pydantic's URLs; a string where a number or a boolean belongs is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from webhook_pipeline.errors import ConfigurationError
from webhook_pipeline.sources import load_sources

pytestmark = pytest.mark.unit


def _error(tmp_path: Path, table: str) -> str:
    file = tmp_path / "sources.toml"
    file.write_text('[sources.github]\nprovider = "github"\n\n[sources.stripe]\n' + table)
    with pytest.raises(ConfigurationError) as raised:
        load_sources(file)
    message = str(raised.value)
    assert "pydantic.dev" not in message and "https://" not in message, message
    assert message.startswith(f"{file}: [sources.stripe] "), message
    return message


def test_an_unknown_key_names_the_file_the_source_the_key_and_the_nearest_key(
    tmp_path: Path,
) -> None:
    message = _error(tmp_path, 'provider = "stripe"\ntolerance_secs = 120\n')
    assert "key 'tolerance_secs': unknown key (did you mean 'tolerance_seconds'?)" in message


def test_an_unknown_key_inside_a_field_location_suggests_its_own_keys(tmp_path: Path) -> None:
    message = _error(
        tmp_path, 'provider = "stripe"\n[sources.stripe.event_type]\nheadr = "X-Type"\n'
    )
    assert "key 'event_type.headr': unknown key (did you mean 'header'?)" in message


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ('tolerance_seconds = "300"', "tolerance_seconds"),
        ('dedup_ttl_seconds = "86400"', "dedup_ttl_seconds"),
        ('enabled = "false"', "enabled"),
        ('require_signed_id = "true"', "require_signed_id"),
    ],
)
def test_a_string_where_a_number_or_a_boolean_belongs_is_refused(
    tmp_path: Path, line: str, key: str
) -> None:
    message = _error(tmp_path, f'provider = "stripe"\n{line}\n')
    assert f"key {key!r}: Input should be a valid" in message and "(got the string" in message


def test_a_misspelt_value_and_a_misspelt_provider_get_the_nearest_one(tmp_path: Path) -> None:
    assert "(did you mean 'json'?)" in _error(
        tmp_path, 'provider = "stripe"\nbody_format = "jsn"\n'
    )
    message = _error(tmp_path, 'provider = "strpe"\n')
    assert "key 'provider': unknown provider 'strpe' (did you mean 'stripe'?)" in message


def test_every_error_of_a_table_is_one_line(tmp_path: Path) -> None:
    message = _error(tmp_path, 'provider = "stripe"\ntolerance_seconds = "1"\nenabld = true\n')
    lines = message.splitlines()
    assert len(lines) == 2 and all(x.startswith(str(tmp_path)) for x in lines), lines


def test_a_function_environment_error_names_the_variable_without_a_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from webhook_pipeline.settings import IngestSettings

    for name in ("QUEUE_URL", "PAYLOAD_BUCKET", "SECRETS_PREFIX", "REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLAIM_TTL_SECONDS", "soon")
    with pytest.raises(ConfigurationError) as raised:
        IngestSettings.load()
    message = str(raised.value)
    assert "pydantic.dev" not in message and "https://" not in message, message
    lines = message.splitlines()
    assert "environment of IngestSettings: variable 'QUEUE_URL': Field required" in lines, lines
    assert any(
        x.startswith("environment of IngestSettings: variable 'CLAIM_TTL_SECONDS': ") for x in lines
    ), lines
