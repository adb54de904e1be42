"""A stored secret value the provider cannot use is reported as a typed result naming which
value is wrong (current or previous), which the ingest service branches on."""

from __future__ import annotations

import pytest
from webhook_pipeline.source_secrets import SecretProblem, SourceSecret
from webhook_pipeline_ops.simulator.deliveries import example_sources

VALID = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
INVALID = "whsec_!!!!"


@pytest.mark.parametrize(
    ("signing", "expected"),
    [
        ([VALID], None),
        ([VALID, VALID], None),
        ([INVALID], SecretProblem("current", "the secret is not whsec_<base64>")),
        ([INVALID, VALID], SecretProblem("current", "the secret is not whsec_<base64>")),
        ([VALID, INVALID], SecretProblem("previous", "the secret is not whsec_<base64>")),
    ],
    ids=["current-ok", "both-ok", "current-bad", "current-bad-previous-ok", "previous-bad"],
)
def test_the_problem_names_the_value_that_is_wrong(
    signing: list[str], expected: SecretProblem | None
) -> None:
    source = example_sources()["standard-webhooks"]
    assert source.secret_problem(SourceSecret(signing)) == expected


def test_the_problem_reads_as_the_operator_sees_it() -> None:
    problem = SecretProblem("previous", "key too short")
    assert str(problem) == "the previous secret: key too short"
