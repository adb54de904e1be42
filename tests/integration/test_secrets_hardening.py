"""Secrets read as stored and validated as the provider needs (case C14): a value with
surrounding whitespace verifies like the stripped value; a value not in the provider's format
is a configuration error naming the source and the problem, answered 503, counted
(``SecretInvalid``) and fetched once per cache lifetime, not per request; ``sources check``
prints one line per source."""

from __future__ import annotations

import base64
import io
import json
from contextlib import redirect_stdout
from typing import Any

import boto3
import pytest
from webhook_pipeline.errors import SecretInvalidError
from webhook_pipeline.source_secrets import parse_secret
from webhook_pipeline_ops import cli
from webhook_pipeline_ops.simulator.deliveries import (
    example_sources,
    http_api_event,
    signed_delivery,
)

from tests.helpers import metric_total
from tests.integration.ingest_harness import SECRETS_PREFIX

pytestmark = pytest.mark.integration

SOURCES = example_sources()
STORED = "whsec_dGVzdHNlY3JldDEyMzQ1Njc4OTA=\n"  # the exact C14 value: echo's trailing newline


def put(source: str, value: str) -> None:
    boto3.client("secretsmanager").put_secret_value(
        SecretId=f"{SECRETS_PREFIX}{source}", SecretString=value
    )


def sw_event(secret: str) -> dict[str, Any]:
    return http_api_event(signed_delivery(SOURCES["standard-webhooks"], secret=secret))


@pytest.mark.parametrize(
    "stored",
    [STORED, " " + STORED, "\t" + STORED.strip() + " \r\n", json.dumps({"current": STORED})],
)
def test_c14_surrounding_whitespace_is_removed_once_everywhere(make_ingest, stored: str) -> None:
    put("standard-webhooks", stored)
    harness = make_ingest()
    assert harness.invoke(sw_event(STORED.strip()))["statusCode"] == 202


def test_c14_whitespace_around_a_previous_secret_and_a_verify_token(make_ingest) -> None:
    parsed = parse_secret(
        json.dumps({"current": " a \n", "previous": "\tb\n", "verify_token": " t "})
    )
    assert (parsed.signing, parsed.verify_token) == (["a", "b"], "t")
    put("standard-webhooks", json.dumps({"current": STORED, "previous": " " + STORED}))
    assert make_ingest().invoke(sw_event(STORED.strip()))["statusCode"] == 202


@pytest.mark.parametrize(
    ("stored", "problem"),
    [("whsec_QQ==", "decodes to 1 bytes"), ("whsec_!!!!", "not whsec_<base64>")],
)
def test_c14_a_value_not_in_the_provider_format_is_503_counted_and_fetched_once(
    make_ingest,
    aws_calls: list[tuple[str, str]],
    capsys: pytest.CaptureFixture[str],
    log_lines: list[dict[str, Any]],
    stored: str,
    problem: str,
) -> None:
    put("standard-webhooks", stored)
    harness = make_ingest()
    aws_calls.clear()
    for _ in range(3):
        response = harness.invoke(sw_event(STORED.strip()))
        assert response["statusCode"] == 503 and "retry-after" in response["headers"]
        assert json.loads(response["body"])["reason"] == "secret_invalid"
    assert aws_calls.count(("secretsmanager", "GetSecretValue")) == 1
    assert metric_total(capsys.readouterr().out, "SecretInvalid") == 3
    error = next(x for x in log_lines if x["message"] == "source secret is invalid")
    assert problem in error["error"] and stored not in json.dumps(log_lines)
    assert harness.messages() == []
    # Other sources keep working.
    github = http_api_event(signed_delivery(SOURCES["github"]))
    assert harness.invoke(github)["statusCode"] == 202


FIRST_KEY = STORED.strip()
SECOND_KEY = "whsec_" + base64.b64encode(b"the second key, 32 bytes long..!").decode()


@pytest.mark.parametrize(
    "steps",
    [
        # (the value stored, the key the delivery is signed with, the status it must get)
        [
            (FIRST_KEY, FIRST_KEY, 202),
            ("whsec_!!!!", FIRST_KEY, 503),
            (SECOND_KEY, SECOND_KEY, 202),
        ],
        [
            ("whsec_!!!!", FIRST_KEY, 503),
            (FIRST_KEY, FIRST_KEY, 202),
            ("whsec_QQ==", FIRST_KEY, 503),
        ],
    ],
    ids=["valid-first", "invalid-first"],
)
def test_each_stored_value_is_validated_on_its_own_as_the_secret_is_rotated(
    make_ingest, steps: list[tuple[str, str, int]]
) -> None:
    """Validation is remembered per value, not per source: rotated in Secrets Manager between
    requests (each one past the cache age), an invalid value is 503 ``secret_invalid`` as soon
    as it is read (never a 500) and a fixed one verifies at once, without a cold start."""
    harness = make_ingest(SECRETS_MAX_AGE_SECONDS="0")
    answers = []
    for stored, signed_with, _ in steps:
        put("standard-webhooks", stored)
        response = harness.invoke(sw_event(signed_with))
        answers.append((response["statusCode"], json.loads(response["body"]).get("reason")))
    assert answers == [(code, "secret_invalid" if code == 503 else None) for *_, code in steps]
    assert len(harness.messages()) == sum(code == 202 for *_, code in steps)


def test_an_invalid_current_secret_is_a_configuration_error_naming_the_source() -> None:
    from webhook_pipeline.adapters.secrets_manager import SecretsManagerStore

    class Provider:
        def get(self, name: str, max_age: int) -> str:
            return "{broken json"

    with pytest.raises(SecretInvalidError) as err:
        SecretsManagerStore("p/", Provider()).get("stripe")
    assert "p/stripe" in str(err.value.detail) and err.value.status == 503


def run_check(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = cli.main(["sources", "check", "--secrets-prefix", SECRETS_PREFIX, *argv])
    return code, out.getvalue()


def test_sources_check_prints_ok_missing_and_the_exact_problem(make_ingest) -> None:
    make_ingest()  # provisions the development secrets under SECRETS_PREFIX
    code, out = run_check()
    assert code == 0, out
    assert {line.split()[1] for line in out.splitlines()[1:]} == {"ok"}
    put("standard-webhooks", "whsec_!!!!")
    boto3.client("secretsmanager").delete_secret(
        SecretId=f"{SECRETS_PREFIX}github", ForceDeleteWithoutRecovery=True
    )
    code, out = run_check("--json")
    report = json.loads(out)
    assert code == 1
    assert report["stripe"] == {"status": "ok", "detail": f"{SECRETS_PREFIX}stripe"}
    assert report["github"]["status"] == "missing"
    assert report["standard-webhooks"] == {
        "status": "invalid",
        "detail": f"{SECRETS_PREFIX}standard-webhooks: the current secret: "
        "the secret is not whsec_<base64>",
    }
