"""Create the local stack's resources by reading ``template.yaml`` itself.

There is no second definition of the resources: queues (visibility timeout, retention, redrive
policy), DynamoDB tables (keys, billing, TTL, PITR), S3 buckets, SNS topics and CloudWatch alarms
are created in the moto server from their template properties, with ``!Ref`` parameters (their
``Default`` unless overridden), pseudo parameters, ``!GetAtt``, ``!Sub``, ``!Join``, ``!If`` and
friends resolved. The SAM functions are read too: handler file, timeout, memory, environment
variables (``Globals`` merged, then resolved to the local resource names and URLs) and their event
sources (the processor's SQS batch size and batching window, the ingest function's HTTP routes).

What cannot exist locally (ElastiCache, VPC, IAM, the HTTP API itself, layers) is skipped with a
debug line; the local stack stands in for those (its own Redis, its own HTTP gateway).

The template is read and resolved by :mod:`.template`, the functions by :mod:`.function_specs`;
what this produces is in :mod:`.resources`. The resource creators, one per service, are here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from webhook_pipeline_ops.local.function_specs import function_spec
from webhook_pipeline_ops.local.resources import (
    QUEUE_ATTRIBUTES,
    HttpRoute,
    QueueInfo,
    Stack,
    physical_name,
)
from webhook_pipeline_ops.local.template import (
    ACCOUNT_ID,
    DEFAULT_STACK_NAME,
    Resolved,
    Resolver,
    UnresolvableError,
    attr_str,
    load_template,
)

log = logging.getLogger(__name__)


class Provisioner:
    """Create the template's resources in the moto server through ``clients``."""

    def __init__(
        self,
        template: Mapping[str, Any],
        template_dir: Path,
        *,
        clients: Any,
        region: str,
        stack_name: str = DEFAULT_STACK_NAME,
        parameter_overrides: Mapping[str, str] | None = None,
        visibility_timeout: int | None = None,
    ) -> None:
        self.template = template
        self.template_dir = template_dir
        self.clients = clients
        self.resolver = Resolver(
            template, region=region, stack_name=stack_name, parameter_overrides=parameter_overrides
        )
        self.stack = Stack(stack_name=stack_name, region=region)
        self.visibility_timeout = visibility_timeout

    # entry point ---------------------------------------------------------------------------
    def run(self) -> Stack:
        resources: dict[str, Any] = dict(self.template.get("Resources") or {})
        creators: dict[str, Callable[[str, dict[str, Any]], None]] = {
            "AWS::SQS::Queue": self._queue,
            "AWS::DynamoDB::Table": self._table,
            "AWS::Serverless::SimpleTable": self._simple_table,
            "AWS::S3::Bucket": self._bucket,
            "AWS::SNS::Topic": self._topic,
            "AWS::CloudWatch::Alarm": self._alarm,
        }
        self._name_what_is_not_created(resources)
        pending = {}
        for logical_id, spec in resources.items():
            cond = spec.get("Condition")
            if cond and not self._condition(cond):
                self.stack.skipped[logical_id] = f"condition {cond} is false"
                continue
            if spec.get("Type") in creators:
                pending[logical_id] = spec
        self._create_in_order(pending, creators)
        for logical_id, spec in resources.items():
            if logical_id not in self.resolver.resources and logical_id not in self.stack.skipped:
                log.debug("skipped %s (%s): not emulated locally", logical_id, spec.get("Type"))
                self.stack.skipped[logical_id] = f"{spec.get('Type')} is not emulated locally"
        for logical_id, spec in resources.items():
            if spec.get("Type") == "AWS::Serverless::Function":
                self.stack.skipped.pop(logical_id, None)
                self.stack.functions[logical_id] = function_spec(
                    self.resolver,
                    self.template,
                    self.template_dir,
                    logical_id,
                    spec.get("Properties") or {},
                )
        self._resolve_outputs()
        return self.stack

    def _name_what_is_not_created(self, resources: Mapping[str, Any]) -> None:
        """Names for what is not created but is referred to (functions, the API): first, so
        that alarms on a function or the API resolve."""
        for logical_id, spec in resources.items():
            kind = spec.get("Type", "")
            if kind == "AWS::Serverless::Function":
                name = physical_name(self.stack.stack_name, logical_id)
                props = spec.get("Properties") or {}
                if isinstance(props.get("FunctionName"), str):
                    name = props["FunctionName"]
                arn = f"arn:aws:lambda:{self.stack.region}:{ACCOUNT_ID}:function:{name}"
                self.resolver.resources[logical_id] = Resolved(name, {"Arn": arn})
            elif kind in ("AWS::Serverless::HttpApi", "AWS::Serverless::Api"):
                # The local gateway stands in for the API; its id in alarms and dashboards.
                self.resolver.resources[logical_id] = Resolved("local", {"ApiEndpoint": ""})
                self.stack.skipped[logical_id] = "served by the local HTTP gateway"

    def _create_in_order(
        self,
        pending: dict[str, Any],
        creators: Mapping[str, Callable[[str, dict[str, Any]], None]],
    ) -> None:
        """Create in dependency order: retry what referred to a resource not created yet; what
        never resolves is skipped with its reason."""
        errors: dict[str, str] = {}
        while pending:
            progressed = False
            for logical_id, spec in list(pending.items()):
                try:
                    creators[spec["Type"]](logical_id, dict(spec.get("Properties") or {}))
                except UnresolvableError as exc:
                    errors[logical_id] = str(exc)
                    continue
                pending.pop(logical_id)
                errors.pop(logical_id, None)
                progressed = True
            if not progressed:
                for logical_id, reason in errors.items():
                    log.warning("not created locally: %s (%s)", logical_id, reason)
                    self.stack.skipped[logical_id] = reason
                break

    def _resolve_outputs(self) -> None:
        for name, spec in (self.template.get("Outputs") or {}).items():
            try:
                cond = spec.get("Condition")
                if cond and not self._condition(cond):
                    continue
                self.stack.outputs[name] = self.resolver.resolve(spec.get("Value"))
            except UnresolvableError as exc:
                log.debug("output %s not resolvable locally: %s", name, exc)

    def _condition(self, name: str) -> bool:
        try:
            return self.resolver.condition(name)
        except UnresolvableError:
            return True

    # queues --------------------------------------------------------------------------------
    def _queue(self, logical_id: str, props: dict[str, Any]) -> None:
        p = self.resolver.resolve(props)
        fifo = bool(p.get("FifoQueue"))
        name = p.get("QueueName") or physical_name(self.stack.stack_name, logical_id)
        if fifo and not name.endswith(".fifo"):
            name += ".fifo"
        attributes = {k: attr_str(v) for k, v in p.items() if k in QUEUE_ATTRIBUTES}
        if self.visibility_timeout is not None:
            attributes["VisibilityTimeout"] = str(self.visibility_timeout)
        if "RedrivePolicy" in p:
            policy = p["RedrivePolicy"]
            policy = json.loads(policy) if isinstance(policy, str) else dict(policy)
            policy["maxReceiveCount"] = int(policy["maxReceiveCount"])
            attributes["RedrivePolicy"] = json.dumps(policy)
        if "RedriveAllowPolicy" in p:
            attributes["RedriveAllowPolicy"] = attr_str(p["RedriveAllowPolicy"])
        for k in set(p) - QUEUE_ATTRIBUTES - {"QueueName", "RedrivePolicy", "RedriveAllowPolicy"}:
            log.debug("queue %s: property %s not applied locally", logical_id, k)
        sqs = self.clients.sqs
        url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        arn = got["QueueArn"]
        info = QueueInfo(
            logical_id, name, url, arn, {k: got[k] for k in (*attributes, "QueueArn") if k in got}
        )
        self.stack.queues[logical_id] = info
        self.resolver.resources[logical_id] = Resolved(
            url, {"Arn": arn, "QueueName": name, "QueueUrl": url}
        )
        log.info("queue %s -> %s %s", logical_id, url, attributes)

    # tables --------------------------------------------------------------------------------
    def _table(self, logical_id: str, props: dict[str, Any]) -> None:
        p = self.resolver.resolve(props)
        name = p.get("TableName") or physical_name(self.stack.stack_name, logical_id)
        args: dict[str, Any] = {
            "TableName": name,
            "AttributeDefinitions": p["AttributeDefinitions"],
            "KeySchema": p["KeySchema"],
        }
        billing = p.get("BillingMode", "PROVISIONED")
        args["BillingMode"] = billing
        if billing == "PROVISIONED":
            args["ProvisionedThroughput"] = {
                k: int(v)
                for k, v in (
                    p.get("ProvisionedThroughput")
                    or {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5}
                ).items()
            }
        for index_kind in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
            if p.get(index_kind):
                args[index_kind] = p[index_kind]
        if p.get("StreamSpecification"):
            args["StreamSpecification"] = {"StreamEnabled": True, **p["StreamSpecification"]}
        ddb = self.clients.dynamodb
        ddb.create_table(**args)
        ttl = p.get("TimeToLiveSpecification")
        if ttl and ttl.get("Enabled"):
            ddb.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]},
            )
        pitr = p.get("PointInTimeRecoverySpecification") or {}
        if pitr.get("PointInTimeRecoveryEnabled"):
            try:
                ddb.update_continuous_backups(
                    TableName=name,
                    PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
                )
            except Exception as exc:
                log.debug("table %s: PITR not applied locally: %s", logical_id, exc)
        arn = ddb.describe_table(TableName=name)["Table"]["TableArn"]
        self.stack.tables[logical_id] = name
        self.resolver.resources[logical_id] = Resolved(name, {"Arn": arn})
        log.info("table %s -> %s (ttl %s)", logical_id, name, (ttl or {}).get("AttributeName"))

    def _simple_table(self, logical_id: str, props: dict[str, Any]) -> None:
        p = self.resolver.resolve(props)
        key = p.get("PrimaryKey") or {"Name": "id", "Type": "String"}
        kind = {"String": "S", "Number": "N", "Binary": "B"}[key.get("Type", "String")]
        self._table(
            logical_id,
            {
                "TableName": p.get("TableName"),
                "AttributeDefinitions": [{"AttributeName": key["Name"], "AttributeType": kind}],
                "KeySchema": [{"AttributeName": key["Name"], "KeyType": "HASH"}],
                "BillingMode": "PAY_PER_REQUEST",
            }
            if p.get("TableName")
            else {
                "AttributeDefinitions": [{"AttributeName": key["Name"], "AttributeType": kind}],
                "KeySchema": [{"AttributeName": key["Name"], "KeyType": "HASH"}],
                "BillingMode": "PAY_PER_REQUEST",
            },
        )

    # buckets and topics --------------------------------------------------------------------
    def _bucket(self, logical_id: str, props: dict[str, Any]) -> None:
        p = self.resolver.resolve(props)
        name = p.get("BucketName") or physical_name(self.stack.stack_name, logical_id, lower=True)
        s3 = self.clients.s3
        if self.stack.region == "us-east-1":
            s3.create_bucket(Bucket=name)
        else:
            s3.create_bucket(
                Bucket=name, CreateBucketConfiguration={"LocationConstraint": self.stack.region}
            )
        for k in set(p) - {"BucketName"}:
            log.debug("bucket %s: property %s not applied locally", logical_id, k)
        self.stack.buckets[logical_id] = name
        self.resolver.resources[logical_id] = Resolved(
            name,
            {
                "Arn": f"arn:aws:s3:::{name}",
                "DomainName": f"{name}.s3.amazonaws.com",
                "RegionalDomainName": f"{name}.s3.{self.stack.region}.amazonaws.com",
            },
        )
        log.info("bucket %s -> %s", logical_id, name)

    def _topic(self, logical_id: str, props: dict[str, Any]) -> None:
        p = self.resolver.resolve(props)
        name = p.get("TopicName") or physical_name(self.stack.stack_name, logical_id)
        arn = self.clients.sns.create_topic(Name=name)["TopicArn"]
        self.stack.topics[logical_id] = arn
        self.resolver.resources[logical_id] = Resolved(arn, {"TopicArn": arn, "TopicName": name})

    # alarms --------------------------------------------------------------------------------
    _ALARM_KEYS = (
        "AlarmName",
        "AlarmDescription",
        "ActionsEnabled",
        "OKActions",
        "AlarmActions",
        "InsufficientDataActions",
        "MetricName",
        "Namespace",
        "Statistic",
        "ExtendedStatistic",
        "Dimensions",
        "Period",
        "Unit",
        "EvaluationPeriods",
        "DatapointsToAlarm",
        "Threshold",
        "ComparisonOperator",
        "TreatMissingData",
        "EvaluateLowSampleCountPercentile",
        "Metrics",
        "ThresholdMetricId",
    )
    _ALARM_INTS = ("Period", "EvaluationPeriods", "DatapointsToAlarm")

    def _alarm(self, logical_id: str, props: dict[str, Any]) -> None:
        p = self.resolver.resolve(props)
        args = {k: p[k] for k in self._ALARM_KEYS if k in p}
        args.setdefault("AlarmName", physical_name(self.stack.stack_name, logical_id))
        for k in self._ALARM_INTS:
            if k in args:
                args[k] = int(args[k])
        if "Threshold" in args:
            args["Threshold"] = float(args["Threshold"])
        if "ActionsEnabled" in args:
            args["ActionsEnabled"] = str(args["ActionsEnabled"]).lower() == "true"
        for query in args.get("Metrics") or []:
            if "Period" in query:
                query["Period"] = int(query["Period"])
            stat = query.get("MetricStat")
            if stat and "Period" in stat:
                stat["Period"] = int(stat["Period"])
            if "ReturnData" in query:
                query["ReturnData"] = str(query["ReturnData"]).lower() == "true"
        try:
            self.clients.cloudwatch.put_metric_alarm(**args)
        except Exception as exc:
            log.warning("alarm %s not created locally: %s", logical_id, exc)
            self.stack.skipped[logical_id] = f"put_metric_alarm failed: {exc}"
            return
        self.stack.alarms.append(args["AlarmName"])
        arn = f"arn:aws:cloudwatch:{self.stack.region}:{ACCOUNT_ID}:alarm:{args['AlarmName']}"
        self.resolver.resources[logical_id] = Resolved(args["AlarmName"], {"Arn": arn})


def provision(
    template_path: str | Path,
    *,
    clients: Any,
    region: str,
    stack_name: str = DEFAULT_STACK_NAME,
    parameter_overrides: Mapping[str, str] | None = None,
    visibility_timeout: int | None = None,
) -> Stack:
    """Create the resources of ``template_path`` through ``clients`` (pointed at moto).

    Parameters
    ----------
    template_path : str | Path
        The SAM template (``template.yaml``).
    clients : object
        Has ``sqs``, ``dynamodb``, ``s3``, ``sns`` and ``cloudwatch`` boto3 clients.
    region : str
        Region for ARNs and ``AWS::Region``.
    parameter_overrides : Mapping[str, str] | None
        Template parameter values instead of their ``Default``.
    visibility_timeout : int | None
        Seconds; overrides every queue's ``VisibilityTimeout`` (so a poison message reaches the
        DLQ in seconds in demos and tests).

    Returns
    -------
    Stack
    """
    path = Path(template_path)
    template = load_template(path)
    return Provisioner(
        template,
        path.parent,
        clients=clients,
        region=region,
        stack_name=stack_name,
        parameter_overrides=parameter_overrides,
        visibility_timeout=visibility_timeout,
    ).run()


#: ``HttpRoute`` (the local HTTP gateway) and ``load_template`` (the cost model) are still imported
#: from here by code being moved by others; new code imports them from :mod:`.resources` and
#: :mod:`.template`.
__all__ = ["HttpRoute", "Provisioner", "load_template", "provision"]
