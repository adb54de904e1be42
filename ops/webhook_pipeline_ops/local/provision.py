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
"""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

ACCOUNT_ID = "123456789012"  # moto's default account
DEFAULT_STACK_NAME = "webhook-pipeline-local"

_NO_VALUE = object()


class UnresolvableError(Exception):
    """A template value refers to something the local stack does not have."""


# ------------------------------------------------------------------------------------------------
# template loading and intrinsic functions


def load_template(path: str | Path) -> dict[str, Any]:
    """Parse a CloudFormation/SAM template (YAML short tags become their ``Fn::`` long form).

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    """
    from cfn_tools import load_yaml

    text = Path(path).read_text()
    data: dict[str, Any] = _plain(load_yaml(text))
    return data


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@dataclass
class Resolved:
    """What ``!Ref`` and ``!GetAtt`` give for one created (or named) resource."""

    ref: str
    attrs: dict[str, Any] = field(default_factory=dict)


class Resolver:
    """Evaluate intrinsic functions against parameters, conditions and created resources."""

    def __init__(
        self,
        template: Mapping[str, Any],
        *,
        region: str,
        stack_name: str,
        parameter_overrides: Mapping[str, str] | None = None,
    ) -> None:
        self.template = template
        self.region = region
        self.stack_name = stack_name
        self.resources: dict[str, Resolved] = {}
        self.parameters: dict[str, Any] = {}
        overrides = dict(parameter_overrides or {})
        for name, spec in (template.get("Parameters") or {}).items():
            if name in overrides:
                value: Any = overrides.pop(name)
            elif "Default" in spec:
                value = spec["Default"]
            else:
                continue  # unresolvable when referenced
            if str(spec.get("Type", "")).startswith(("CommaDelimitedList", "List<")):
                value = [v.strip() for v in value.split(",")] if isinstance(value, str) else value
            elif not isinstance(value, list):
                value = str(value)
            self.parameters[name] = value
        for name in overrides:
            log.warning("parameter override %s is not a template parameter; ignored", name)
        self._conditions: dict[str, bool] = {}

    # pseudo parameters ---------------------------------------------------------------------
    def pseudo(self, name: str) -> Any:
        table = {
            "AWS::Region": self.region,
            "AWS::AccountId": ACCOUNT_ID,
            "AWS::StackName": self.stack_name,
            "AWS::StackId": f"arn:aws:cloudformation:{self.region}:{ACCOUNT_ID}:stack/"
            f"{self.stack_name}/00000000-0000-0000-0000-000000000000",
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::NotificationARNs": [],
        }
        if name == "AWS::NoValue":
            return _NO_VALUE
        if name not in table:
            raise UnresolvableError(f"pseudo parameter {name}")
        return table[name]

    def condition(self, name: str) -> bool:
        if name not in self._conditions:
            spec = (self.template.get("Conditions") or {}).get(name)
            if spec is None:
                raise UnresolvableError(f"condition {name}")
            self._conditions[name] = bool(self.resolve(spec))
        return self._conditions[name]

    def ref(self, name: str) -> Any:
        if name.startswith("AWS::"):
            return self.pseudo(name)
        if name in self.parameters:
            return self.parameters[name]
        if name in self.resources:
            return self.resources[name].ref
        raise UnresolvableError(f"Ref {name}")

    def get_att(self, name: str, attr: str) -> Any:
        res = self.resources.get(name)
        if res is None or attr not in res.attrs:
            raise UnresolvableError(f"GetAtt {name}.{attr}")
        return res.attrs[attr]

    # evaluation ----------------------------------------------------------------------------
    def resolve(self, value: Any) -> Any:
        """Return ``value`` with every intrinsic function evaluated.

        Raises
        ------
        UnresolvableError
            A reference to a resource, parameter or function the local stack cannot resolve.
        """
        if isinstance(value, list):
            items = [self.resolve(v) for v in value]
            return [v for v in items if v is not _NO_VALUE]
        if not isinstance(value, Mapping):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            fn = self._functions().get(key)
            if fn is not None:
                return fn(arg)
        out = {}
        for k, v in value.items():
            r = self.resolve(v)
            if r is not _NO_VALUE:
                out[k] = r
        return out

    def _functions(self) -> dict[str, Callable[[Any], Any]]:
        return {
            "Ref": lambda a: self.ref(str(a)),
            "Fn::GetAtt": self._fn_get_att,
            "Fn::Sub": self._fn_sub,
            "Fn::Join": lambda a: str(self.resolve(a[0])).join(
                str(x) for x in self._as_list(self.resolve(a[1]))
            ),
            "Fn::Select": lambda a: self._as_list(self.resolve(a[1]))[int(self.resolve(a[0]))],
            "Fn::Split": lambda a: str(self.resolve(a[1])).split(str(self.resolve(a[0]))),
            "Fn::If": lambda a: self.resolve(a[1] if self.condition(a[0]) else a[2]),
            "Fn::Equals": lambda a: str(self.resolve(a[0])) == str(self.resolve(a[1])),
            "Fn::Not": lambda a: not self.resolve(a[0]),
            "Fn::And": lambda a: all(self.resolve(x) for x in a),
            "Fn::Or": lambda a: any(self.resolve(x) for x in a),
            "Condition": lambda a: self.condition(str(a)),
            "Fn::FindInMap": self._fn_find_in_map,
            "Fn::GetAZs": lambda a: [f"{self.region}{z}" for z in "abc"],
            "Fn::Base64": lambda a: base64.b64encode(str(self.resolve(a)).encode()).decode(),
            "Fn::ToJsonString": lambda a: json.dumps(self.resolve(a), separators=(",", ":")),
            "Fn::ImportValue": self._unresolvable("Fn::ImportValue"),
            "Fn::Cidr": self._unresolvable("Fn::Cidr"),
            "Fn::Transform": self._unresolvable("Fn::Transform"),
        }

    @staticmethod
    def _unresolvable(name: str) -> Callable[[Any], Any]:
        def fail(arg: Any) -> Any:
            raise UnresolvableError(f"{name} {arg!r}")

        return fail

    @staticmethod
    def _as_list(value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise UnresolvableError(f"expected a list, got {value!r}")
        return value

    def _fn_get_att(self, arg: Any) -> Any:
        if isinstance(arg, str):
            name, _, attr = arg.partition(".")
        else:
            name, attr = str(arg[0]), str(self.resolve(arg[1]))
        return self.get_att(name, attr)

    def _fn_find_in_map(self, arg: Any) -> Any:
        mapping, top, second = (self.resolve(x) for x in arg)
        try:
            return self.template["Mappings"][mapping][top][second]
        except KeyError as exc:
            raise UnresolvableError(f"FindInMap {mapping}/{top}/{second}") from exc

    def _fn_sub(self, arg: Any) -> str:
        if isinstance(arg, list):
            text, variables = str(arg[0]), {k: self.resolve(v) for k, v in arg[1].items()}
        else:
            text, variables = str(arg), {}

        def repl(match: re.Match[str]) -> str:
            expr = match.group(1)
            if expr.startswith("!"):
                return "${" + expr[1:] + "}"
            if expr in variables:
                return str(variables[expr])
            if "." in expr and not expr.startswith("AWS::"):
                name, _, attr = expr.partition(".")
                return str(self.get_att(name, attr))
            return str(self.ref(expr))

        return re.sub(r"\$\{([^}]+)\}", repl, text)


# ------------------------------------------------------------------------------------------------
# what provisioning produces


@dataclass
class QueueInfo:
    logical_id: str
    name: str
    url: str
    arn: str
    attributes: dict[str, str]

    @property
    def visibility_timeout(self) -> int:
        return int(self.attributes.get("VisibilityTimeout", "30"))

    @property
    def max_receive_count(self) -> int | None:
        policy = self.attributes.get("RedrivePolicy")
        return int(json.loads(policy)["maxReceiveCount"]) if policy else None


@dataclass
class SqsEventSource:
    """A function's SQS event (the event source mapping)."""

    queue_arn: str
    batch_size: int = 10
    maximum_batching_window_seconds: int = 0
    report_batch_item_failures: bool = False
    enabled: bool = True


#: API Gateway's integration timeout of an HTTP API route without ``TimeoutInMillis`` (also
#: its maximum): the request is answered 503 when the function's answer is not back by then.
HTTP_API_INTEGRATION_TIMEOUT_MS = 30_000


@dataclass
class HttpRoute:
    method: str  # upper case or ANY
    path: str  # /webhooks/{source}
    timeout_ms: int = HTTP_API_INTEGRATION_TIMEOUT_MS  # the event's TimeoutInMillis


@dataclass
class FunctionSpec:
    """A SAM function as the local runtime needs it."""

    logical_id: str
    name: str
    code_dir: Path
    handler: str  # module.function
    timeout_seconds: int
    memory_mb: int
    environment: dict[str, str]
    unresolved_environment: list[str]
    sqs_events: list[SqsEventSource]
    http_routes: list[HttpRoute]
    #: Every variable name the template gives the function (``Globals`` merged), resolvable
    #: locally or not, conditional ones included: the names ``sam local --env-vars`` can set.
    declared_environment: list[str] = field(default_factory=list)

    @property
    def arn(self) -> str:
        return self.name


@dataclass
class Stack:
    """Everything :func:`provision` created or read, by logical id."""

    stack_name: str
    region: str
    queues: dict[str, QueueInfo] = field(default_factory=dict)
    tables: dict[str, str] = field(default_factory=dict)
    buckets: dict[str, str] = field(default_factory=dict)
    topics: dict[str, str] = field(default_factory=dict)
    alarms: list[str] = field(default_factory=list)
    functions: dict[str, FunctionSpec] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    def queue_by_arn(self, arn: str) -> QueueInfo:
        for queue in self.queues.values():
            if queue.arn == arn:
                return queue
        raise KeyError(arn)


# ------------------------------------------------------------------------------------------------
# resource creators

_QUEUE_ATTRIBUTES = {
    "DelaySeconds",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "VisibilityTimeout",
    "FifoQueue",
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "FifoThroughputLimit",
}


def _attr_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


def _physical_name(stack_name: str, logical_id: str, *, lower: bool = False) -> str:
    name = f"{stack_name}-{logical_id}"
    return name.lower() if lower else name


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
        # Names for what is not created but is referred to (functions, the API): first, so
        # that alarms on a function or the API resolve.
        for logical_id, spec in resources.items():
            kind = spec.get("Type", "")
            if kind == "AWS::Serverless::Function":
                name = _physical_name(self.stack.stack_name, logical_id)
                props = spec.get("Properties") or {}
                if isinstance(props.get("FunctionName"), str):
                    name = props["FunctionName"]
                arn = f"arn:aws:lambda:{self.stack.region}:{ACCOUNT_ID}:function:{name}"
                self.resolver.resources[logical_id] = Resolved(name, {"Arn": arn})
            elif kind in ("AWS::Serverless::HttpApi", "AWS::Serverless::Api"):
                # The local gateway stands in for the API; its id in alarms and dashboards.
                self.resolver.resources[logical_id] = Resolved("local", {"ApiEndpoint": ""})
                self.stack.skipped[logical_id] = "served by the local HTTP gateway"
        pending = {}
        for logical_id, spec in resources.items():
            cond = spec.get("Condition")
            if cond and not self._condition(cond):
                self.stack.skipped[logical_id] = f"condition {cond} is false"
                continue
            if spec.get("Type") in creators:
                pending[logical_id] = spec
        # Create in dependency order: retry what referred to a resource not created yet.
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
        for logical_id, spec in resources.items():
            if logical_id not in self.resolver.resources and logical_id not in self.stack.skipped:
                log.debug("skipped %s (%s): not emulated locally", logical_id, spec.get("Type"))
                self.stack.skipped[logical_id] = f"{spec.get('Type')} is not emulated locally"
        for logical_id, spec in resources.items():
            if spec.get("Type") == "AWS::Serverless::Function":
                self.stack.skipped.pop(logical_id, None)
                self._function(logical_id, spec.get("Properties") or {})
        for name, spec in (self.template.get("Outputs") or {}).items():
            try:
                cond = spec.get("Condition")
                if cond and not self._condition(cond):
                    continue
                self.stack.outputs[name] = self.resolver.resolve(spec.get("Value"))
            except UnresolvableError as exc:
                log.debug("output %s not resolvable locally: %s", name, exc)
        return self.stack

    def _condition(self, name: str) -> bool:
        try:
            return self.resolver.condition(name)
        except UnresolvableError:
            return True

    # queues --------------------------------------------------------------------------------
    def _queue(self, logical_id: str, props: dict[str, Any]) -> None:
        p = self.resolver.resolve(props)
        fifo = bool(p.get("FifoQueue"))
        name = p.get("QueueName") or _physical_name(self.stack.stack_name, logical_id)
        if fifo and not name.endswith(".fifo"):
            name += ".fifo"
        attributes = {k: _attr_str(v) for k, v in p.items() if k in _QUEUE_ATTRIBUTES}
        if self.visibility_timeout is not None:
            attributes["VisibilityTimeout"] = str(self.visibility_timeout)
        if "RedrivePolicy" in p:
            policy = p["RedrivePolicy"]
            policy = json.loads(policy) if isinstance(policy, str) else dict(policy)
            policy["maxReceiveCount"] = int(policy["maxReceiveCount"])
            attributes["RedrivePolicy"] = json.dumps(policy)
        if "RedriveAllowPolicy" in p:
            attributes["RedriveAllowPolicy"] = _attr_str(p["RedriveAllowPolicy"])
        for k in set(p) - _QUEUE_ATTRIBUTES - {"QueueName", "RedrivePolicy", "RedriveAllowPolicy"}:
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
        name = p.get("TableName") or _physical_name(self.stack.stack_name, logical_id)
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
        name = p.get("BucketName") or _physical_name(self.stack.stack_name, logical_id, lower=True)
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
        name = p.get("TopicName") or _physical_name(self.stack.stack_name, logical_id)
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
        args.setdefault("AlarmName", _physical_name(self.stack.stack_name, logical_id))
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

    # functions -----------------------------------------------------------------------------
    def _function(self, logical_id: str, props: Mapping[str, Any]) -> None:
        globals_fn = dict((self.template.get("Globals") or {}).get("Function") or {})
        merged: dict[str, Any] = {**globals_fn, **props}
        variables: dict[str, Any] = {
            **((globals_fn.get("Environment") or {}).get("Variables") or {}),
            **((props.get("Environment") or {}).get("Variables") or {}),
        }
        environment: dict[str, str] = {}
        unresolved: list[str] = []
        for key, raw in variables.items():
            try:
                value = self.resolver.resolve(raw)
            except UnresolvableError as exc:
                log.debug("%s: env %s not resolvable locally (%s)", logical_id, key, exc)
                unresolved.append(key)
                continue
            if value is not _NO_VALUE:
                environment[key] = _attr_str(value)
        handler = str(self._resolve_or(merged.get("Handler"), "app.lambda_handler"))
        code_uri = self._resolve_or(merged.get("CodeUri"), ".")
        sqs_events: list[SqsEventSource] = []
        routes: list[HttpRoute] = []
        for event_id, event in (props.get("Events") or {}).items():
            kind = event.get("Type")
            try:
                ep = self.resolver.resolve(event.get("Properties") or {})
            except UnresolvableError as exc:
                log.debug("%s: event %s not resolvable locally (%s)", logical_id, event_id, exc)
                continue
            if kind == "SQS":
                sqs_events.append(
                    SqsEventSource(
                        queue_arn=str(ep["Queue"]),
                        batch_size=int(ep.get("BatchSize", 10)),
                        maximum_batching_window_seconds=int(
                            ep.get("MaximumBatchingWindowInSeconds", 0)
                        ),
                        report_batch_item_failures="ReportBatchItemFailures"
                        in (ep.get("FunctionResponseTypes") or []),
                        enabled=str(ep.get("Enabled", True)).lower() != "false",
                    )
                )
            elif kind in ("HttpApi", "Api"):
                routes.append(
                    HttpRoute(
                        method=str(ep.get("Method", "ANY")).upper(),
                        path=str(ep.get("Path", "/{proxy+}")),
                        timeout_ms=int(
                            self._resolve_or(
                                ep.get("TimeoutInMillis"), HTTP_API_INTEGRATION_TIMEOUT_MS
                            )
                        ),
                    )
                )
            else:
                log.debug(
                    "%s: event %s of type %s not emulated locally", logical_id, event_id, kind
                )
        self.stack.functions[logical_id] = FunctionSpec(
            logical_id=logical_id,
            name=self.resolver.resources[logical_id].ref,
            code_dir=(self.template_dir / str(code_uri)).resolve(),
            handler=handler,
            timeout_seconds=int(self._resolve_or(merged.get("Timeout"), 3)),
            memory_mb=int(self._resolve_or(merged.get("MemorySize"), 128)),
            environment=environment,
            unresolved_environment=unresolved,
            sqs_events=sqs_events,
            http_routes=routes,
            declared_environment=list(variables),
        )

    def _resolve_or(self, value: Any, default: Any) -> Any:
        if value is None:
            return default
        try:
            return self.resolver.resolve(value)
        except UnresolvableError:
            return default


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
