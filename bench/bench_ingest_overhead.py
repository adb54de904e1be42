"""Ingest overhead benchmark (not a test): the real warm handler against the floor and the
alternative users would otherwise pick, side by side in one run.

Four handlers answer the same signed GitHub deliveries, warm, in this process, against one real
redis-server (started here on a free port) and one moto server (a separate process, so the CPU
time measured here is the handler's own and never the emulator's):

``ours``
    ``functions/ingest/app.py``'s ``lambda_handler`` as deployed (Logger, Metrics and Tracer
    decorators, INFO logging written to /dev/null; tracing is off here: no X-Ray daemon).
``bare``
    The floor with identical I/O: parse the API Gateway event, verify the signature, ``SET key
    token NX EX ttl``, and for a new delivery one ``SendMessage`` of the body in a JSON envelope.
    No logging, metrics or tracing, no body-consistency digest, no pending/done claim states.
``powertools_redis``
    Powertools ``idempotent_function`` (``CachePersistenceLayer`` on the same redis-server)
    around the same ``SendMessage``, after the same verification, keyed on the delivery id.
``powertools_dynamodb``
    The same with ``DynamoDBPersistenceLayer`` on the moto server.
``bare_observed``, ``powertools_redis_observed``
    ``bare`` and ``powertools_redis`` with the observability ours keeps (the same Powertools
    Logger, Tracer and Metrics decorators, one INFO line and the same two metrics per request):
    what separates ours from them is then ours alone.

For each, per request: wall and CPU (``time.process_time``) time p50/p99 for new deliveries and
for their duplicates; Redis commands (``INFO commandstats`` deltas) and round trips (packed
sends on the connection) per request; AWS calls per request. Rounds are interleaved (every
variant in turn, request by request) and ratios are of the medians of the per-round p50s: the
machine is shared and noisy, so ratios are what to read. Targets: ours <= 1.10x bare for a new
delivery, <= 2.0x bare for a duplicate, both at or below both Powertools variants.

Run: ``.venv/bin/python bench/bench_ingest_overhead.py`` (``--quick`` for a short run; written to
``bench/results/ingest_overhead.quick.json``, git-ignored). Figures go to
``bench/results/ingest_overhead.json`` with the command that produced them. ``--profile``
instead runs cProfile over the warm real handler (new deliveries, then their duplicates) and
prints the functions with the most cumulative and own time on each path (nothing is written).
"""

from __future__ import annotations

import base64
import json
import os
import platform
import random
import shutil
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
QUICK = "--quick" in sys.argv
PROFILE = "--profile" in sys.argv
RESULTS = (
    ROOT / "bench" / "results" / ("ingest_overhead.quick.json" if QUICK else "ingest_overhead.json")
)
N_PER_ROUND = 100 if QUICK else 300
ROUNDS = 2 if QUICK else 5
N_COUNT = 50
SOURCE = "github"
CLAIM_TTL = 30
DONE_TTL = 3 * 86_400

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on port {port}")


@contextmanager
def servers() -> Any:
    """A redis-server and a moto server on free ports (stopped on exit, by their own pids)."""
    redis_port, moto_port = free_port(), free_port()
    redis_proc = subprocess.Popen(
        [
            *(shutil.which("redis-server") or "redis-server", "--port", str(redis_port)),
            *("--bind", "127.0.0.1", "--save", "", "--appendonly", "no"),
        ],
        stdout=subprocess.DEVNULL,
    )
    moto_bin = Path(PY).with_name("moto_server")
    moto_proc = subprocess.Popen(
        [str(moto_bin), "-H", "127.0.0.1", "-p", str(moto_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(redis_port)
        wait_port(moto_port)
        yield redis_port, moto_port
    finally:
        for proc in (redis_proc, moto_proc):
            proc.terminate()
            proc.wait(timeout=10)


class Ctx:
    """A Lambda context as Powertools reads it."""

    function_name = "IngestFunction"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:IngestFunction"
    function_version = "$LATEST"

    def __init__(self) -> None:
        self.aws_request_id = uuid.uuid4().hex

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 10_000


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def setup(redis_port: int, moto_port: int) -> dict[str, Any]:
    """Provision moto, import the real handler, build the three others; returns them."""
    endpoint = f"http://127.0.0.1:{moto_port}"
    os.environ.update(
        {
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_ENDPOINT_URL": endpoint,
            "POWERTOOLS_SERVICE_NAME": "ingest",
            "POWERTOOLS_METRICS_NAMESPACE": "WebhookPipeline",
            "POWERTOOLS_LOG_LEVEL": "INFO",  # as deployed (template.yaml)
            "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
            "GATE_COOLDOWN_SECONDS": "0",
        }
    )
    import boto3

    sys.path.insert(0, str(ROOT))
    from tests.integration.ingest_harness import provision

    os.environ.update(provision())
    ddb = boto3.client("dynamodb")
    ddb.create_table(
        TableName="idempotency",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    # Every handler's log lines and EMF metrics go to /dev/null (fd 1), as CloudWatch would
    # take them; this process reports on stderr and in the results file.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.path.insert(0, str(ROOT / "functions" / "ingest"))
    import app  # the real handler module
    from aws_lambda_powertools.utilities.idempotency import (
        IdempotencyConfig,
        idempotent_function,
    )
    from aws_lambda_powertools.utilities.idempotency.persistence.cache import (
        CachePersistenceLayer,
    )
    from aws_lambda_powertools.utilities.idempotency.persistence.dynamodb import (
        DynamoDBPersistenceLayer,
    )
    from webhook_pipeline.adapters.clients import aws_client
    from webhook_pipeline.adapters.redis_gate import redis_client
    from webhook_pipeline.webhook_request import request_from_event
    from webhook_pipeline_ops.simulator.deliveries import dev_secret_value

    settings = app.settings
    source = app.SOURCES[SOURCE]
    secret = dev_secret_value(SOURCE)
    QUEUE["url"] = settings.queue_url

    def new_redis() -> Any:
        return redis_client(
            settings.redis_url,
            settings.redis_connect_timeout_ms,
            settings.redis_read_timeout_ms,
            settings.redis_cluster_mode,
        )

    bare_redis, bare_sqs = new_redis(), aws_client("sqs", settings)

    def envelope_body(request: Any, delivery_id: str) -> str:
        return json.dumps(
            {
                "source": SOURCE,
                "delivery_id": delivery_id,
                "received_at": time.time(),
                "body_b64": base64.b64encode(request.body).decode(),
            },
            separators=(",", ":"),
        )

    def send(request: Any, delivery_id: str, sqs: Any) -> str:
        return str(
            sqs.send_message(
                QueueUrl=QUEUE["url"],
                MessageBody=envelope_body(request, delivery_id),
                MessageAttributes={
                    "source": {"DataType": "String", "StringValue": SOURCE},
                    "delivery_id": {"DataType": "String", "StringValue": delivery_id},
                },
            )["MessageId"]
        )

    def answer(status: int, state: str, delivery_id: str) -> dict[str, Any]:
        return {
            "statusCode": status,
            "headers": {"content-type": "application/json"},
            "body": json.dumps({"status": state, "delivery_id": delivery_id}),
        }

    def verified(event: dict[str, Any]) -> tuple[Any, str]:
        request = request_from_event(event)
        source.provider.verify(request, [secret], time.time())
        return request, request.headers["x-github-delivery"]

    def bare(event: dict[str, Any], context: Any) -> dict[str, Any]:
        request, delivery_id = verified(event)
        key = f"bare:{SOURCE}:{delivery_id}"
        if not bare_redis.set(key, uuid.uuid4().hex, nx=True, ex=DONE_TTL):
            return answer(200, "duplicate", delivery_id)
        send(request, delivery_id, bare_sqs)
        return answer(202, "accepted", delivery_id)

    def powertools(persistence: Any) -> Handler:
        sqs = aws_client("sqs", settings)
        sent: list[str] = []
        config = IdempotencyConfig(expires_after_seconds=DONE_TTL)

        @idempotent_function(
            data_keyword_argument="delivery", persistence_store=persistence, config=config
        )
        def enqueue(delivery: dict[str, str], request: Any) -> dict[str, str]:
            sent.append(delivery["delivery_id"])
            return {"message_id": send(request, delivery["delivery_id"], sqs)}

        def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
            request, delivery_id = verified(event)
            config.register_lambda_context(context)
            sent.clear()
            enqueue(delivery={"source": SOURCE, "delivery_id": delivery_id}, request=request)
            if sent:
                return answer(202, "accepted", delivery_id)
            return answer(200, "duplicate", delivery_id)  # the stored result was returned

        return handler

    from webhook_pipeline.observability import MetricName, count, logger, metrics, tracer

    def observed(inner: Handler) -> Handler:
        """``inner`` with the observability ours keeps: the same Logger, Tracer and Metrics
        decorators, one INFO line and the same two metrics per request."""

        @logger.inject_lambda_context(clear_state=True)
        @tracer.capture_lambda_handler(capture_response=False)
        @metrics.log_metrics
        def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
            started = time.perf_counter()
            response = inner(event, context)
            accepted = response["statusCode"] == 202
            count(MetricName.ACCEPTED if accepted else MetricName.DUPLICATE_DISCARDED)
            logger.info("accepted" if accepted else "duplicate discarded at the gate")
            metrics.add_metric(
                name=MetricName.ACK_LATENCY,
                unit="Milliseconds",
                value=round((time.perf_counter() - started) * 1000, 3),
            )
            return response

        return handler

    handlers: dict[str, Handler] = {
        "ours": app.lambda_handler,
        "bare": bare,
        "bare_observed": observed(bare),
        "powertools_redis": powertools(CachePersistenceLayer(client=new_redis())),
        "powertools_redis_observed": observed(
            powertools(CachePersistenceLayer(client=new_redis()))
        ),
        "powertools_dynamodb": powertools(
            DynamoDBPersistenceLayer(
                table_name="idempotency", boto3_client=aws_client("dynamodb", settings)
            )
        ),
    }
    return {"handlers": handlers, "app": app, "source": source}


def deliveries(source: Any, n: int) -> list[dict[str, Any]]:
    from webhook_pipeline_ops.simulator.deliveries import http_api_event, signed_delivery

    return [http_api_event(signed_delivery(source)) for _ in range(n)]


FAILED: dict[str, int] = {}


def run(
    handler: Handler, events: list[dict[str, Any]], name: str = ""
) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of each request; an answer other than 200/202 (the emulator timed
    out under load: 503) is counted in ``FAILED`` and left out of the timings."""
    walls: list[float] = []
    cpus: list[float] = []
    for event in events:
        context = Ctx()
        c0, w0 = time.process_time(), time.perf_counter()
        response = handler(event, context)
        w1, c1 = time.perf_counter(), time.process_time()
        if response["statusCode"] not in (200, 202):
            FAILED[name] = FAILED.get(name, 0) + 1
            continue
        walls.append(w1 - w0)
        cpus.append(c1 - c0)
    return walls, cpus


def redis_calls(client: Any) -> int:
    stats = client.info("commandstats")
    return sum(
        int(v["calls"]) for k, v in stats.items() if k not in ("cmdstat_info", "cmdstat_ping")
    )


def counts(handlers: dict[str, Handler], source: Any, redis_port: int) -> dict[str, Any]:
    """Redis commands, round trips and AWS calls per request, counted on a separate pass."""
    import botocore.client
    import redis
    from redis.connection import Connection

    probe = redis.Redis(port=redis_port)
    aws: list[str] = []
    trips = [0]
    original_call = botocore.client.BaseClient._make_api_call
    original_send = Connection.send_packed_command

    def recording(self: Any, op: str, params: Any) -> Any:
        aws.append(f"{self.meta.service_model.service_name}:{op}")
        return original_call(self, op, params)

    def sending(self: Any, command: Any, check_health: bool = True) -> None:
        trips[0] += 1
        return original_send(self, command, check_health)

    botocore.client.BaseClient._make_api_call = recording  # type: ignore[method-assign]
    Connection.send_packed_command = sending  # type: ignore[method-assign]
    result: dict[str, Any] = {}
    try:
        for name, handler in handlers.items():
            events = deliveries(source, N_COUNT)
            per: dict[str, Any] = {}
            for kind in ("new", "duplicate"):
                aws.clear()
                before = redis_calls(probe)
                trips[0] = 0
                run(handler, events)
                round_trips = trips[0]
                commands = redis_calls(probe) - before
                per[kind] = {
                    # no pipelines on these paths: one command per round trip
                    "redis_round_trips": round_trips / N_COUNT,
                    # INFO commandstats counts the commands a Lua script runs as well
                    "redis_server_commands": commands / N_COUNT,
                    "aws_calls": len(aws) / N_COUNT,
                    "aws_operations": sorted(set(aws)),
                }
            result[name] = per
    finally:
        botocore.client.BaseClient._make_api_call = original_call  # type: ignore[method-assign]
        Connection.send_packed_command = original_send  # type: ignore[method-assign]
    return result


QUEUE = {"url": "", "passes": 0}
ORDER_RNG = random.Random(15)  # seeded: the same orders on every run
# variant -> the variant that ran right before it -> how many times (timed requests only)
PREDECESSORS: dict[str, dict[str, int]] = {}


def fresh_queue(app: Any) -> None:
    """Point every handler at a new, empty queue and delete the last one (moto's SendMessage
    slows down as a queue grows; PurgeQueue is allowed once a minute)."""
    import boto3

    sqs = boto3.client("sqs")
    QUEUE["passes"] += 1
    url = sqs.create_queue(QueueName=f"bench-{QUEUE['passes']}")["QueueUrl"]
    old, QUEUE["url"] = QUEUE["url"], url
    app.service().queue.queue_url = url
    if old:
        sqs.delete_queue(QueueUrl=old)


def timings(handlers: dict[str, Handler], source: Any, app: Any) -> dict[str, Any]:
    samples: dict[str, dict[str, list[dict[str, float]]]] = {
        name: {"new": [], "duplicate": []} for name in handlers
    }
    names = list(handlers)
    PREDECESSORS.update({name: {} for name in names})
    for _round in range(ROUNDS):
        events = {name: deliveries(source, N_PER_ROUND) for name in names}
        for kind in ("new", "duplicate"):
            # Interleaved request by request, in an order shuffled for every request: what the
            # shared machine does to one variant at a moment it does to the others within
            # milliseconds. A rotation would keep the cyclic order, so one variant would always
            # run right after the slowest one (DynamoDB on moto: a 7 ms wait that leaves the CPU
            # caches cold and doubles the next request's time); see ``predecessors`` in the
            # results, which counts how often each variant ran right after each other one.
            walls: dict[str, list[float]] = {name: [] for name in names}
            cpus: dict[str, list[float]] = {name: [] for name in names}
            previous = "(start)"
            for i in range(N_PER_ROUND):
                order = ORDER_RNG.sample(names, len(names))
                for name in order:
                    PREDECESSORS[name][previous] = PREDECESSORS[name].get(previous, 0) + 1
                    previous = name
                    w, c = run(handlers[name], [events[name][i]], name)
                    walls[name] += w
                    cpus[name] += c
            fresh_queue(app)
            for name in names:
                samples[name][kind].append(
                    {
                        "wall_p50": pct(walls[name], 0.5),
                        "wall_p99": pct(walls[name], 0.99),
                        "cpu_p50": pct(cpus[name], 0.5),
                        "cpu_p99": pct(cpus[name], 0.99),
                    }
                )
    summary: dict[str, Any] = {}
    for name, kinds in samples.items():
        summary[name] = {
            kind: {
                stat: round(statistics.median(r[stat] for r in rounds) * 1000, 3)
                for stat in ("wall_p50", "wall_p99", "cpu_p50", "cpu_p99")
            }
            | {"wall_p50_per_round_ms": [round(r["wall_p50"] * 1000, 3) for r in rounds]}
            for kind, rounds in kinds.items()
        }
    return summary


def ratios(summary: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ("new", "duplicate"):
        base = summary["bare"][kind]
        out[kind] = {
            name: {
                stat: round(summary[name][kind][stat] / base[stat], 3)
                for stat in ("wall_p50", "wall_p99", "cpu_p50", "cpu_p99")
            }
            for name in summary
        }
    return out


def profile(app: Any, source: Any, n: int = 2_000) -> None:
    """cProfile over ``n`` warm new deliveries and then their ``n`` duplicates (stderr)."""
    import cProfile
    import io
    import pstats

    events = deliveries(source, n)
    for kind in ("new", "duplicate"):
        profiler = cProfile.Profile()
        profiler.enable()
        run(app.lambda_handler, events)
        profiler.disable()
        dump = Path(os.environ.get("PROFILE_DIR", "/tmp")) / f"ingest_{kind}.prof"
        profiler.dump_stats(dump)
        print(f"== {kind}: profile written to {dump}", file=sys.stderr)
        for order in ("cumulative", "tottime"):
            out = io.StringIO()
            stats = pstats.Stats(profiler, stream=out).strip_dirs().sort_stats(order)
            stats.print_stats(35)
            print(f"== {kind}: {n} requests, by {order}\n{out.getvalue()}", file=sys.stderr)
        fresh_queue(app)


def main() -> None:
    if PROFILE:
        with servers() as (redis_port, moto_port):
            built = setup(redis_port, moto_port)
            run(built["app"].lambda_handler, deliveries(built["source"], 50))
            profile(built["app"], built["source"])
        return
    with servers() as (redis_port, moto_port):
        built = setup(redis_port, moto_port)
        handlers, source = built["handlers"], built["source"]
        for handler in handlers.values():  # warm each (connections, secrets, scripts, imports)
            run(handler, deliveries(source, 20))
        per_request = counts(handlers, source, redis_port)
        summary = timings(handlers, source, built["app"])
    ratio = ratios(summary)

    def ours_over(kind: str, other: str, stat: str = "wall_p50") -> float:
        return round(summary["ours"][kind][stat] / summary[other][kind][stat], 3)

    targets = {
        "new_wall_p50_le_1.10x_bare": ours_over("new", "bare") <= 1.10,
        "duplicate_wall_p50_le_2.0x_bare": ours_over("duplicate", "bare") <= 2.0,
        "new_at_or_below_powertools": all(
            ours_over("new", p) <= 1.0 for p in ("powertools_redis", "powertools_dynamodb")
        ),
        "duplicate_at_or_below_powertools": all(
            ours_over("duplicate", p) <= 1.0 for p in ("powertools_redis", "powertools_dynamodb")
        ),
        "same_observability": {
            "new_wall_p50_le_1.10x_bare_observed": ours_over("new", "bare_observed") <= 1.10,
            "duplicate_wall_p50_le_2.0x_bare_observed": ours_over("duplicate", "bare_observed")
            <= 2.0,
            "new_at_or_below_powertools_redis_observed": ours_over(
                "new", "powertools_redis_observed"
            )
            <= 1.0,
            "duplicate_at_or_below_powertools_redis_observed": ours_over(
                "duplicate", "powertools_redis_observed"
            )
            <= 1.0,
        },
    }
    ours_over_each = {
        kind: {
            other: {stat: ours_over(kind, other, stat) for stat in ("wall_p50", "cpu_p50")}
            for other in summary
            if other != "ours"
        }
        for kind in ("new", "duplicate")
    }
    results = {
        "command": f"{Path(PY).relative_to(ROOT) if Path(PY).is_relative_to(ROOT) else PY} "
        + " ".join([str(Path(sys.argv[0]).resolve().relative_to(ROOT)), *sys.argv[1:]]),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "setup": {
            "provider": SOURCE,
            "requests_per_round_each": N_PER_ROUND,
            "rounds": ROUNDS,
            "redis": "redis-server on 127.0.0.1 (this machine)",
            "aws": "moto server, a separate process on 127.0.0.1",
            "figures": "milliseconds; median over rounds of each round's percentile",
        },
        "per_request": per_request,
        "ms": summary,
        "ratio_to_bare": ratio,
        "ours_over": ours_over_each,
        "failed_requests_left_out": FAILED,
        "predecessors": PREDECESSORS,
        "targets_met": targets,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2), file=sys.stderr)
    print(f"written to {RESULTS.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
