"""``webhook-pipeline local run --for-containers``: the local stack as the sam local invoke backend.

No Docker needed. Given the stack started as a subprocess with ``--for-containers`` on free ports
(once with its own redis-server, once with the in-process stand-in), then:

- ``sam-env.json`` holds, for each function of ``template.yaml``, only variables the template
  declares for it, with every URL pointing at ``host.docker.internal`` on the ports the stack
  really uses (moto, Redis), ``REDIS_CLUSTER_MODE=false`` and the local resource names;
- the moto server and Redis listen on 0.0.0.0: the kernel's socket table says so (tests reach
  them only through loopback; a container reaching them is the Docker test's job).

Without the option (the session's ``local_stack``) nothing changes: no ``sam-env.json``, moto on
127.0.0.1. Every process started here is stopped by its PID.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest

from tests.conftest import ROOT, free_port
from tests.e2e.conftest import LocalStack, running_local_stack

pytestmark = pytest.mark.e2e

CONTAINER_HOST = "host.docker.internal"
URL_VARIABLES = ("AWS_ENDPOINT_URL", "QUEUE_URL", "DLQ_URL", "REDIS_URL")


# ------------------------------------------------------------------------------ helpers


def _listening_addresses(port: int) -> set[str]:
    """IPv4 addresses with a socket in LISTEN state on ``port`` (from /proc/net/tcp)."""
    found: set[str] = set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            local, state = fields[1], fields[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                octets = [str(int(address[i : i + 2], 16)) for i in range(6, -1, -2)]
                found.add(".".join(octets))
    return found


def _declared_environment() -> dict[str, set[str]]:
    """Function logical id -> the variable names template.yaml declares for it (Globals too)."""
    from cfnlint.decode import cfn_yaml

    template = cfn_yaml.load(str(ROOT / "template.yaml"))
    glob = ((template.get("Globals") or {}).get("Function") or {}).get("Environment") or {}
    common = set(glob.get("Variables") or {})
    return {
        logical_id: common
        | set(((r.get("Properties") or {}).get("Environment") or {}).get("Variables") or {})
        for logical_id, r in template["Resources"].items()
        if r.get("Type") == "AWS::Serverless::Function"
    }


@dataclass
class ContainerStack:
    stack: LocalStack
    sam_env: dict[str, dict[str, str]]
    moto_port: int
    redis_port: int

    @property
    def ready(self) -> dict[str, Any]:
        return self.stack.ready

    @property
    def outputs(self) -> dict[str, Any]:
        return self.stack.outputs

    @property
    def state_dir(self) -> Path:
        return self.stack.state_dir


def _redis_modes() -> list[str]:
    modes = ["in-process"]
    if shutil.which("redis-server"):
        modes.insert(0, "server")
    return modes


@pytest.fixture(scope="module", params=_redis_modes())
def container_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ContainerStack]:
    """``local run --for-containers`` in a subprocess on free ports; stopped by its PID."""
    state = tmp_path_factory.mktemp(f"for-containers-{request.param}")
    moto_port = free_port()
    options = ["--for-containers", "--port", str(free_port()), "--moto-port", str(moto_port),
               "--redis", request.param]  # fmt: skip
    with running_local_stack(state, *options) as stack:
        yield ContainerStack(
            stack=stack,
            sam_env=json.loads((state / "sam-env.json").read_text()),
            moto_port=moto_port,
            redis_port=int(urlsplit(stack.ready["redis_url"]).port or 0),
        )


def _to_container(url: str) -> str:
    parts = urlsplit(url)
    return parts._replace(netloc=f"{CONTAINER_HOST}:{parts.port}").geturl()


# ------------------------------------------------------------------------------ sam-env.json


def test_the_env_file_covers_every_function_with_only_declared_variables(
    container_stack: ContainerStack,
) -> None:
    declared = _declared_environment()
    env = container_stack.sam_env
    assert set(env) == set(declared)
    for logical_id, variables in env.items():
        assert set(variables) <= declared[logical_id], logical_id
        assert "SOURCES_FILE" not in variables  # a path on this machine, not in the container
        # the template declares AWS_ENDPOINT_URL (Globals), so sam applies the value
        assert "AWS_ENDPOINT_URL" in declared[logical_id]
        assert (
            variables["AWS_ENDPOINT_URL"] == f"http://{CONTAINER_HOST}:{container_stack.moto_port}"
        )
        assert all(isinstance(v, str) for v in variables.values())
    assert container_stack.ready["for_containers"] is True
    assert Path(container_stack.ready["sam_env_file"]) == container_stack.state_dir / "sam-env.json"


def test_every_url_points_at_the_host_from_a_container(container_stack: ContainerStack) -> None:
    for logical_id, variables in container_stack.sam_env.items():
        for name, value in variables.items():
            assert "127.0.0.1" not in value and "localhost" not in value, (logical_id, name)
            if name in URL_VARIABLES:
                assert urlsplit(value).hostname == CONTAINER_HOST, (logical_id, name, value)


def test_the_env_file_names_the_resources_the_stack_created(
    container_stack: ContainerStack,
) -> None:
    outputs, env = container_stack.outputs, container_stack.sam_env
    ingest, processor, replay = (
        env["IngestFunction"],
        env["ProcessorFunction"],
        env["ReplayFunction"],
    )
    assert ingest["QUEUE_URL"] == _to_container(outputs["MainQueueUrl"])
    assert replay["QUEUE_URL"] == _to_container(outputs["MainQueueUrl"])
    assert replay["DLQ_URL"] == _to_container(outputs["DeadLetterQueueUrl"])
    assert ingest["PAYLOAD_BUCKET"] == processor["PAYLOAD_BUCKET"] == outputs["PayloadBucketName"]
    assert processor["TABLE_NAME"] == outputs["DeliveriesTableName"]
    assert ingest["REDIS_URL"] == f"redis://{CONTAINER_HOST}:{container_stack.redis_port}/0"
    assert ingest["REDIS_CLUSTER_MODE"] == "false"
    assert ingest["SECRETS_PREFIX"] == outputs["SecretsPrefix"]
    # the secrets the ingest function reads exist under that prefix
    secrets = boto3.client(
        "secretsmanager", endpoint_url=outputs["EndpointUrl"], region_name=outputs["Region"]
    )
    names = {s["Name"] for s in secrets.list_secrets()["SecretList"]}
    assert f"{ingest['SECRETS_PREFIX']}github" in names


# ------------------------------------------------------------------------------ listening


def test_moto_and_redis_listen_on_every_interface(container_stack: ContainerStack) -> None:
    assert _listening_addresses(container_stack.moto_port) == {"0.0.0.0"}
    assert _listening_addresses(container_stack.redis_port) == {"0.0.0.0"}


# ------------------------------------------------------------------------------ the default


def test_without_the_option_nothing_listens_beyond_loopback(local_stack: LocalStack) -> None:
    assert not (local_stack.state_dir / "sam-env.json").exists()
    assert local_stack.ready.get("for_containers") is False
    moto_port = int(urlsplit(local_stack.outputs["EndpointUrl"]).port or 0)
    assert _listening_addresses(moto_port) == {"127.0.0.1"}
    redis_port = int(urlsplit(local_stack.ready["redis_url"]).port or 0)
    assert _listening_addresses(redis_port) == {"127.0.0.1"}


# ------------------------------------------------------------------------------ the rewrite


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("http://127.0.0.1:5055", f"http://{CONTAINER_HOST}:5055"),
        ("http://localhost:5055/123456789012/q", f"http://{CONTAINER_HOST}:5055/123456789012/q"),
        ("redis://:pw@127.0.0.1:6390/0", f"redis://:pw@{CONTAINER_HOST}:6390/0"),
        ("rediss://user@LOCALHOST/0", f"rediss://user@{CONTAINER_HOST}/0"),
        ("http://0.0.0.0:1", f"http://{CONTAINER_HOST}:1"),
        ("http://[::1]:80/x", f"http://{CONTAINER_HOST}:80/x"),
        ("redis://cache.example.com:6379/0", "redis://cache.example.com:6379/0"),
        ("http://127.0.0.10:80", "http://127.0.0.10:80"),
        ("http://localhost.example.com/", "http://localhost.example.com/"),
        ("webhook-pipeline/webhook-pipeline-local/", "webhook-pipeline/webhook-pipeline-local/"),
        ("localhost", "localhost"),
    ],
)
def test_container_value(value: str, expected: str) -> None:
    from webhook_pipeline_ops.local.containers import container_value

    assert container_value(value) == expected


def test_the_invoke_api_is_served_on_its_own_loopback_port_only(
    container_stack: ContainerStack,
) -> None:
    import requests

    invoke = container_stack.ready["lambda_endpoint_url"]
    assert urlsplit(invoke).hostname == "127.0.0.1"
    assert urlsplit(invoke).port != urlsplit(container_stack.stack.api_url).port
    assert container_stack.stack.outputs["LambdaEndpointUrl"] == invoke
    path = "/2015-03-31/functions/ReplayFunction/invocations"
    report = requests.post(invoke + path, json={"dry_run": True}, timeout=30)
    assert report.status_code == 200 and report.json()["dry_run"] is True
    assert (
        requests.post(container_stack.stack.api_url + path, json={}, timeout=10).status_code == 404
    )
    assert requests.post(invoke + "/webhooks/stripe", data=b"{}", timeout=10).status_code == 404
