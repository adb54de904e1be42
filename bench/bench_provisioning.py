"""Provisioning benchmark (not a test): the local stack's template resolver against samtranslator
plus moto's CloudFormation, side by side on the same moto server.

Starts the local stack's own moto server process (``MotoProcess``, with the moto patches, as
``make run`` does) and, ``--runs`` times each, alternating, in a fresh interpreter per run (so the
imports each path needs count, as at ``local run``'s start):

* ``resolver``: ``provision(template.yaml)`` (``ops/webhook_pipeline_ops/local/provision.py``);
* ``cfn``: ``samtranslator`` transforms the template (local ``CodeUri``/``ContentUri`` replaced by
  ``s3://`` URIs, as ``sam validate`` does), the resources the local stack does not emulate are
  dropped (``--prune``: VPC, ElastiCache, IAM, Lambda, API Gateway), then ``CreateStack`` in moto
  and ``ListStackResources`` for the physical ids. This does *less* than the resolver (no function
  specifications, no alarms: moto's CloudFormation has no ``AWS::CloudWatch::Alarm``).

The server is reset (``POST /moto-api/reset``) before every run. After the last run of each path
the resulting moto state is read back and checked against the template's properties (queues and
redrive policy, the table's keys, GSI and projection, TTL, PITR, SSE, deletion protection, the
bucket's encryption, public access block, ownership controls, lifecycle and policy, the alarm
topic, the alarms, the dashboard, the log groups). The unpruned template is also sent to
``CreateStack`` once, and each resource type is looked up in moto's CloudFormation model map.

Result: ``bench/results/provisioning.json``.

    .venv/bin/python bench/bench_provisioning.py --runs 7
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import urllib.request
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "provisioning.json"
TEMPLATE = ROOT / "template.yaml"
sys.path.insert(0, str(ROOT / "ops"))

REGION = "us-east-1"
STACK = "webhook-pipeline-local"
#: Resource types the local stack stands in for (its Redis, its gateway, its workers).
NOT_EMULATED = (
    "AWS::EC2::",
    "AWS::ElastiCache::",
    "AWS::IAM::",
    "AWS::Lambda::",
    "AWS::ApiGatewayV2::",
)
#: What every run passes, like ``local run`` does (the gateway's URL).
PARAMETERS = {"PublicBaseUrl": "http://127.0.0.1:3000"}


def _session(endpoint: str) -> Any:
    import boto3

    session = boto3.session.Session(
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name=REGION,
    )
    from botocore.config import Config

    config = Config(retries={"max_attempts": 1})  # a 500 is a failure, not three retries

    class Clients:
        def __getattr__(self, service: str) -> Any:
            return session.client(service, endpoint_url=endpoint, config=config)  # type: ignore[call-overload]

    return Clients()


# ------------------------------------------------------------------------------------------------
# the two paths (each in its own interpreter: --one PATH)


def translate(parameters: dict[str, str], *, prune: bool) -> dict[str, Any]:
    """The template after the SAM transform (samtranslator), optionally without what the local
    stack does not emulate."""
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    from samtranslator.translator.transform import transform
    from webhook_pipeline_ops.local.template import load_template

    class NoManagedPolicies:
        def load(self) -> dict[str, str]:
            return {}

    template = load_template(TEMPLATE)
    for spec in template["Resources"].values():
        props = spec.get("Properties") or {}
        for key in ("CodeUri", "ContentUri"):
            if isinstance(props.get(key), str) and not props[key].startswith("s3://"):
                props[key] = "s3://local-code/" + props[key].strip("/")
    values = {**parameters, "AWS::Region": REGION, "AWS::StackName": STACK}
    out: dict[str, Any] = transform(copy.deepcopy(template), values, NoManagedPolicies())
    if prune:
        out["Resources"] = {
            k: v for k, v in out["Resources"].items() if not v["Type"].startswith(NOT_EMULATED)
        }
        # The dashboard and the 5xx alarm name the functions and the API, dropped above.
        out["Resources"].pop("Dashboard", None)
        out.pop("Outputs", None)
    return out


def run_cfn(endpoint: str, *, prune: bool = True) -> dict[str, Any]:
    clients = _session(endpoint)
    started = time.perf_counter()
    body = translate(PARAMETERS, prune=prune)
    translated = time.perf_counter() - started
    cfn = clients.cloudformation
    cfn.create_stack(
        StackName=STACK,
        TemplateBody=json.dumps(body),
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in PARAMETERS.items()],
        Capabilities=["CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND"],
    )
    resources = cfn.list_stack_resources(StackName=STACK)["StackResourceSummaries"]
    return {"resources": len(resources), "translate_seconds": translated}


def run_resolver(endpoint: str) -> dict[str, Any]:
    from webhook_pipeline_ops.local.provision import provision

    stack = provision(
        TEMPLATE, clients=_session(endpoint), region=REGION, parameter_overrides=PARAMETERS
    )
    return {
        "resources": len(stack.queues)
        + len(stack.tables)
        + len(stack.buckets)
        + len(stack.topics)
        + len(stack.alarms)
    }


def one(path: str, endpoint: str) -> None:
    import boto3  # noqa: F401 - both paths need it; not what is compared

    warnings.simplefilter("ignore")
    started = time.perf_counter()
    detail = run_cfn(endpoint) if path == "cfn" else run_resolver(endpoint)
    print(json.dumps({"seconds": time.perf_counter() - started, **detail}))


# ------------------------------------------------------------------------------------------------
# fidelity: the moto state read back


def state(endpoint: str) -> dict[str, Any]:
    c = _session(endpoint)
    out: dict[str, Any] = {"queues": {}, "tables": {}, "buckets": {}}
    for url in c.sqs.list_queues().get("QueueUrls", []):
        attrs = c.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        out["queues"][url.rsplit("/", 1)[1]] = attrs
    for name in c.dynamodb.list_tables()["TableNames"]:
        table = c.dynamodb.describe_table(TableName=name)["Table"]
        ttl = c.dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        backups = c.dynamodb.describe_continuous_backups(TableName=name)[
            "ContinuousBackupsDescription"
        ]
        out["tables"][name] = {"table": table, "ttl": ttl, "backups": backups}
    for bucket in c.s3.list_buckets()["Buckets"]:
        name, got = bucket["Name"], {}
        for key, call in (
            ("encryption", "get_bucket_encryption"),
            ("public_access_block", "get_public_access_block"),
            ("ownership", "get_bucket_ownership_controls"),
            ("lifecycle", "get_bucket_lifecycle_configuration"),
            ("policy", "get_bucket_policy"),
        ):
            try:
                got[key] = getattr(c.s3, call)(Bucket=name)
            except Exception as exc:
                got[key] = f"absent ({type(exc).__name__})"
        out["buckets"][name] = got
    out["topics"] = [t["TopicArn"] for t in c.sns.list_topics()["Topics"]]
    alarms = c.cloudwatch.describe_alarms()
    out["alarms"] = [a["AlarmName"] for a in alarms["MetricAlarms"]]
    out["dashboards"] = [
        d["DashboardName"] for d in c.cloudwatch.list_dashboards()["DashboardEntries"]
    ]
    out["log_groups"] = [g["logGroupName"] for g in c.logs.describe_log_groups()["logGroups"]]
    return out


def checks(s: dict[str, Any]) -> dict[str, bool]:
    """One named check per template property; True when moto holds it as the template says."""
    main: dict[str, Any] = next((a for n, a in s["queues"].items() if "MainQueue" in n), {})
    dlq: dict[str, Any] = next((a for n, a in s["queues"].items() if "DeadLetterQueue" in n), {})
    redrive = json.loads(main.get("RedrivePolicy", "{}"))
    table: dict[str, Any] = next(
        iter(s["tables"].values()), {"table": {}, "ttl": {}, "backups": {}}
    )
    gsi = {g["IndexName"]: g for g in table["table"].get("GlobalSecondaryIndexes", [])}
    proj = gsi.get("ByReceivedTime", {}).get("Projection", {})
    pitr = table["backups"].get("PointInTimeRecoveryDescription", {})
    bucket: dict[str, Any] = next(iter(v for k, v in s["buckets"].items() if "payload" in k), {})
    return {
        "queue: main VisibilityTimeout 390": main.get("VisibilityTimeout") == "390",
        "queue: main MessageRetentionPeriod 345600": main.get("MessageRetentionPeriod") == "345600",
        "queue: main MaximumMessageSize 262144": main.get("MaximumMessageSize") == "262144",
        "queue: main SqsManagedSseEnabled": main.get("SqsManagedSseEnabled") == "true",
        "queue: redrive to the DLQ ARN": redrive.get("deadLetterTargetArn") == dlq.get("QueueArn"),
        "queue: redrive maxReceiveCount 5": str(redrive.get("maxReceiveCount")) == "5",
        "queue: DLQ MessageRetentionPeriod 1209600": dlq.get("MessageRetentionPeriod") == "1209600",
        "queue: DLQ VisibilityTimeout 60": dlq.get("VisibilityTimeout") == "60",
        "table: keys pk/sk": [k["AttributeName"] for k in table["table"].get("KeySchema", [])]
        == ["pk", "sk"],
        "table: PAY_PER_REQUEST": table["table"].get("BillingModeSummary", {}).get("BillingMode")
        == "PAY_PER_REQUEST",
        "table: GSI ByReceivedTime keys": [
            k["AttributeName"] for k in gsi.get("ByReceivedTime", {}).get("KeySchema", [])
        ]
        == ["received_shard", "received_key"],
        "table: GSI projection INCLUDE 12 attributes": proj.get("ProjectionType") == "INCLUDE"
        and len(proj.get("NonKeyAttributes", [])) == 12,
        "table: TTL expires_at enabled": table["ttl"].get("AttributeName") == "expires_at"
        and table["ttl"].get("TimeToLiveStatus") == "ENABLED",
        "table: PITR enabled": pitr.get("PointInTimeRecoveryStatus") == "ENABLED",
        "table: SSE enabled": table["table"].get("SSEDescription", {}).get("Status") == "ENABLED",
        "table: DeletionProtectionEnabled (default false)": table["table"].get(
            "DeletionProtectionEnabled"
        )
        is False,
        "bucket: exists": bool(bucket),
        "bucket: AES256 encryption": "AES256" in json.dumps(bucket.get("encryption", "")),
        "bucket: public access block": "BlockPublicAcls"
        in json.dumps(bucket.get("public_access_block", "")),
        "bucket: ownership BucketOwnerEnforced": "BucketOwnerEnforced"
        in json.dumps(bucket.get("ownership", "")),
        "bucket: lifecycle ExpireClaimCheckBodies": "ExpireClaimCheckBodies"
        in json.dumps(bucket.get("lifecycle", "")),
        "bucket: policy (TLS only)": "aws:SecureTransport" in json.dumps(bucket.get("policy", "")),
        "topic: alarm topic": any("AlarmTopic" in t for t in s["topics"]),
        "alarms: the template's 13": len(s["alarms"]) == 13,
        "dashboard": bool(s["dashboards"]),
        "log groups: 4": len(s["log_groups"]) == 4,
    }


# ------------------------------------------------------------------------------------------------


def reset(endpoint: str) -> None:
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"))


def timed(path: str, endpoint: str) -> dict[str, Any]:
    reset(endpoint)
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--one", path, "--endpoint", endpoint],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1], "process_seconds": wall}
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "process_seconds": wall}


def type_support() -> dict[str, str]:
    warnings.simplefilter("ignore")
    from moto.cloudformation.parsing import NULL_MODELS, get_model_map

    body = translate(PARAMETERS, prune=False)
    kinds = sorted({r["Type"] for r in body["Resources"].values()})
    return {
        k: "supported"
        if k in get_model_map()
        else "null model (no-op)"
        if k in NULL_MODELS
        else "not supported: skipped with a warning, reported CREATE_COMPLETE"
        for k in kinds
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--one", choices=["resolver", "cfn"])
    parser.add_argument("--endpoint")
    args = parser.parse_args()
    if args.one:
        one(args.one, args.endpoint)
        return
    from webhook_pipeline_ops.local.moto_server import MotoProcess

    moto = MotoProcess()
    moto.start()
    host, port = moto.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        runs: dict[str, list[dict[str, Any]]] = {"resolver": [], "cfn": []}
        for _ in range(args.runs):
            for path in runs:
                runs[path].append(timed(path, endpoint))
        fidelity = {}
        for path in runs:
            timed(path, endpoint)
            fidelity[path] = checks(state(endpoint))
        reset(endpoint)
        try:
            run_cfn(endpoint, prune=False)
            unpruned = "CREATE_COMPLETE"
        except Exception as exc:
            unpruned = f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        moto.stop()

    def summary(rs: list[dict[str, Any]], key: str) -> dict[str, float]:
        xs = [r[key] for r in rs if key in r]
        return (
            {
                "median": round(statistics.median(xs), 3),
                "min": round(min(xs), 3),
                "max": round(max(xs), 3),
            }
            if xs
            else {}
        )

    result = {
        "command": f".venv/bin/python bench/bench_provisioning.py --runs {args.runs}",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "moto": __import__("importlib.metadata").metadata.version("moto"),
        "aws_sam_translator": __import__("importlib.metadata").metadata.version(
            "aws-sam-translator"
        ),
        "runs": args.runs,
        "seconds_in_provisioning": {p: summary(rs, "seconds") for p, rs in runs.items()},
        "seconds_with_interpreter_start": {
            p: summary(rs, "process_seconds") for p, rs in runs.items()
        },
        "cfn_seconds_in_samtranslator": summary(runs["cfn"], "translate_seconds"),
        "errors": {p: [r["error"] for r in rs if "error" in r] for p, rs in runs.items()},
        "fidelity": {
            name: {p: fidelity[p][name] for p in fidelity} for name in fidelity["resolver"]
        },
        "fidelity_passed": {p: sum(v.values()) for p, v in fidelity.items()},
        "fidelity_checks": len(fidelity["resolver"]),
        "unpruned_create_stack": unpruned,
        "resource_types_in_moto_cloudformation": type_support(),
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
