"""A provider is one module: a throw-away provider registered from a temporary module appears in
the simulator, the sample events, the local stack's development secrets and the shared provider
tests, with no other edit anywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from webhook_pipeline.providers import all_providers, load_provider_modules
from webhook_pipeline_ops.local.dev_secrets import seed_secrets
from webhook_pipeline_ops.simulator.deliveries import example_sources
from webhook_pipeline_ops.simulator.event_files import build_events
from webhook_pipeline_ops.simulator.sender import plan

from tests.provider_fixtures import write_provider_module

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def throwaway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    folder = tmp_path / "mods"
    module = write_provider_module(folder, "tossed_provider", "tossed")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PROVIDER_MODULES", module)
    load_provider_modules([module])
    return module, folder


def test_it_is_registered_and_served_as_an_example_source(throwaway) -> None:
    assert "tossed" in all_providers()
    source = example_sources()["tossed"]
    assert source.provider.name == "tossed" and source.delivery_id.body == "id"


def test_the_simulator_signs_for_it(throwaway) -> None:
    source = example_sources()["tossed"]
    [planned] = plan([source], count=1)
    headers = planned.headers | source.provider.sign(
        planned.body, source.provider.dev_secret, timestamp=0, delivery_id=planned.delivery_id
    )
    assert headers["X-Test-Signature"]
    assert json.loads(planned.body)["id"] == planned.delivery_id


def test_the_sample_events_include_it(throwaway) -> None:
    event = build_events(1_700_000_000)["ingest-tossed.json"]
    assert event["pathParameters"] == {"source": "tossed"}
    assert "x-test-signature" in event["headers"]


def test_the_local_stack_seeds_its_secret(throwaway, aws: None) -> None:
    sm = boto3.client("secretsmanager")
    doc = seed_secrets(sm, "local/", None, random=False)
    assert doc["sources"]["tossed"]["provider"] == "tossed"
    stored = sm.get_secret_value(SecretId="local/tossed")["SecretString"]
    assert stored == "throwaway-secret"


def test_the_shared_provider_tests_run_for_it(throwaway) -> None:
    module, folder = throwaway
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]),
        "WEBHOOK_PIPELINE_TEST_PROVIDER_MODULES": module,
    }
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "tossed",
         "tests/unit/providers/test_shared.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:]
    passed = int(result.stdout.strip().splitlines()[-1].split(" passed")[0].split()[-1])
    assert passed >= 15, result.stdout[-2000:]


def test_the_simulator_signs_each_resend_afresh_even_within_one_second() -> None:
    # A duplicate sent in the same second as its original must not reuse Mailgun's one-time
    # token (the ingest refuses a reused token as replay_detected).
    import random

    from webhook_pipeline_ops.simulator.deliveries import example_sources
    from webhook_pipeline_ops.simulator.sender import signed_request

    (planned,) = plan([example_sources()["mailgun"]], count=1, rng=random.Random(3))
    first, again = (signed_request(planned, "key-1", attempt) for attempt in (0, 1))
    tokens = [json.loads(r.body)["signature"]["token"] for r in (first, again)]
    assert tokens[0] != tokens[1]
