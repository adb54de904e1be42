"""``webhook-pipeline local run``: start the whole pipeline on this machine.

Start order (:meth:`LocalStack.start`, one small step each): the gateway's port is bound first
(a port in use fails before anything starts), Redis (:mod:`.redis_runtime`), a moto server in
its own process on 127.0.0.1 (:mod:`.moto_server`, with :mod:`.moto_patches`), the resources of
``template.yaml`` (:mod:`.provision`), the development secrets of the example sources, the
functions' worker processes (:mod:`.runtime`: one interpreter per execution environment, cold
start with the template environment), the HTTP gateway and the SQS pollers. Then
``.local-stack/outputs.json``, ``secrets.json`` and ``ready`` are written. SIGINT/SIGTERM stop
everything in the reverse order (threads joined, the workers, the moto server and the
redis-server this stack started terminated by their PIDs) and remove ``ready``.

With ``--for-containers`` the moto server and the Redis the stack starts listen on 0.0.0.0, and
``sam-env.json`` is written: a ``sam local invoke --env-vars`` file with each function's resolved
environment as a Lambda container must see it (loopback hosts -> ``host.docker.internal``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import secrets as random_secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webhook_pipeline.source_secrets import parse_secret
from webhook_pipeline.sources import ResolvedSource

from webhook_pipeline_ops.local import (
    LOG_FILE,
    OUTPUTS_FILE,
    PID_FILE,
    READY_FILE,
    SAM_ENV_FILE,
    SECRETS_FILE,
    project_root,
    state_dir,
)
from webhook_pipeline_ops.local.faults import FAULTS_DIR_VARIABLE, FaultSwitches
from webhook_pipeline_ops.local.http_gateway import Gateway, Route, is_loopback
from webhook_pipeline_ops.local.moto_server import MotoProcess
from webhook_pipeline_ops.local.poller import SqsPoller
from webhook_pipeline_ops.local.provision import HttpRoute, Stack, provision
from webhook_pipeline_ops.local.redis_runtime import RedisRuntime, start_redis
from webhook_pipeline_ops.local.runtime import LocalFunction
from webhook_pipeline_ops.output import command_name

if TYPE_CHECKING:
    from mypy_boto3_secretsmanager import SecretsManagerClient

log = logging.getLogger("webhook_pipeline_ops.local")

REGION = "us-east-1"
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",  # moto accepts any credentials
    "AWS_SESSION_TOKEN": "testing",
}
CONSOLE_PORT = 8380  # webhook_pipeline_ops.console.DEFAULT_PORT (not imported: no web deps here)
DEFAULT_ROUTE = HttpRoute(method="POST", path="/webhooks/{source}")
#: How a Lambda container started by ``sam local invoke`` reaches this machine (sam is run with
#: ``--add-host host.docker.internal:host-gateway``, see samconfig.toml ``[local.*]``).
CONTAINER_HOST = "host.docker.internal"
ALL_INTERFACES = "0.0.0.0"  # noqa: S104 - only with --for-containers, documented as exposing
#: Variables that name paths on this machine: a container keeps the template's value instead.
HOST_ONLY_VARIABLES = frozenset({"SOURCES_FILE"})
_LOOPBACK_URL = re.compile(
    r"(?P<prefix>\b[a-z][a-z0-9+.-]*://(?:[^@/\s]*@)?)"
    r"(?:127\.0\.0\.1|localhost|0\.0\.0\.0|\[::1\])(?=[:/?#]|$)",
    re.IGNORECASE,
)


#: Seconds a poller may take to return once its function is stopped (a ReceiveMessage long
#: poll is 1 s; a slow moto answer is left behind: the threads are daemons).
POLLER_STOP_SECONDS = 5.0

LOCAL_HOOKS_VARIABLE = "WEBHOOK_PIPELINE_LOCAL_HOOKS_MODULE"
"""Names the processor's ``HOOKS_MODULE`` for the local stack (the e2e tests load the ledger)."""

#: The shortest signed-timestamp tolerance (seconds) of the ingest function ``sam local invoke``
#: runs: one container start outlasts Discord's 15 s (``LOCAL_MIN_TOLERANCE_SECONDS``).
CONTAINER_MIN_TOLERANCE_SECONDS = 300


def container_environment(env: dict[str, str]) -> None:
    """What ``--for-containers`` changes in a function's resolved environment, in place: where
    the template declares ``LOCAL_MIN_TOLERANCE_SECONDS``, :data:`CONTAINER_MIN_TOLERANCE_SECONDS`
    (every signed timestamp accepted for at least that long)."""
    if "LOCAL_MIN_TOLERANCE_SECONDS" in env:
        env["LOCAL_MIN_TOLERANCE_SECONDS"] = str(CONTAINER_MIN_TOLERANCE_SECONDS)


class StackError(Exception):
    """The local stack cannot start (port in use, bad template, a function fails its init)."""


@dataclass
class Options:
    """Options of ``local run`` (see :func:`add_run_arguments`)."""

    host: str = "127.0.0.1"
    port: int = 3000
    moto_port: int = 0
    template: Path | None = None
    parameters: dict[str, str] = field(default_factory=dict)
    visibility_timeout: int | None = None
    redis_url: str | None = None
    redis_mode: str = "auto"
    state_dir: Path | None = None
    stack_name: str = "webhook-pipeline-local"
    region: str = REGION
    random_secrets: bool = False
    for_containers: bool = False
    ingest_workers: int = 4
    invoke_port: int = 0

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Options:
        params = {}
        for item in args.parameter or []:
            key, sep, value = item.partition("=")
            if not sep:
                raise StackError(f"--parameter {item!r}: expected Key=Value")
            params[key] = value
        return cls(
            host=args.host,
            port=args.port,
            moto_port=args.moto_port,
            template=Path(args.template) if args.template else None,
            parameters=params,
            visibility_timeout=args.visibility_timeout,
            redis_url=args.redis_url
            if args.redis_url is not None
            else os.environ.get("REDIS_URL") or None,
            redis_mode=args.redis,
            state_dir=Path(args.state_dir) if args.state_dir else None,
            stack_name=args.stack_name,
            region=args.region,
            random_secrets=args.random_secrets,
            for_containers=getattr(args, "for_containers", False),
            ingest_workers=getattr(args, "ingest_workers", 4),
            invoke_port=getattr(args, "invoke_port", 0),
        )


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``local run`` (also accepted by ``local demo``)."""
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="gateway bind address (127.0.0.1; anything else exposes the webhooks and is warned "
        "about)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=3000,
        help="gateway port: http://HOST:PORT/webhooks/{source} (3000; 0 = free)",
    )
    parser.add_argument(
        "--moto-port",
        type=int,
        default=0,
        help="moto server port on 127.0.0.1 (default: a free port)",
    )
    parser.add_argument("--template", help="SAM template (default: template.yaml of the repo)")
    parser.add_argument(
        "--parameter",
        action="append",
        metavar="KEY=VALUE",
        help="template parameter override (repeatable)",
    )
    parser.add_argument(
        "--visibility-timeout",
        type=int,
        metavar="SECONDS",
        help="override every queue's VisibilityTimeout (e.g. 2 for demos/tests: "
        "a poison message then reaches the DLQ in seconds)",
    )
    parser.add_argument(
        "--redis-url",
        default=None,
        help="use this Redis (default: $REDIS_URL, else start redis-server)",
    )
    parser.add_argument(
        "--redis",
        choices=("auto", "server", "in-process"),
        default="auto",
        help="auto: redis-server if installed, else an in-process stand-in",
    )
    parser.add_argument(
        "--state-dir",
        help="folder of outputs.json, secrets.json, ready "
        "(default: .local-stack or $WEBHOOK_PIPELINE_LOCAL_DIR)",
    )
    parser.add_argument(
        "--stack-name", default="webhook-pipeline-local", help="AWS::StackName for resource names"
    )
    parser.add_argument("--region", default=REGION, help="region of the emulated resources")
    parser.add_argument(
        "--random-secrets",
        action="store_true",
        help="random signing secrets instead of the documented dev secrets",
    )
    parser.add_argument(
        "--for-containers",
        action="store_true",
        help="backend for `sam local invoke`: the moto server and the Redis started here listen "
        "on 0.0.0.0 (reachable from Lambda containers as host.docker.internal), and "
        "STATE_DIR/sam-env.json is written for `sam local invoke --env-vars`. SECURITY: 0.0.0.0 "
        "exposes the emulators (no authentication) to the machine's network; use it only for "
        "local development on a trusted network. A --redis-url Redis is used as is and must "
        "itself be reachable from the containers. Also serves the Lambda Invoke API "
        "(POST /2015-03-31/functions/NAME/invocations) on its own 127.0.0.1 port "
        "(--invoke-port; ready/outputs name it LambdaEndpointUrl), never on the webhook port",
    )
    parser.add_argument(
        "--invoke-port",
        type=int,
        default=0,
        help="loopback port of the Lambda Invoke API with --for-containers (default: a free port)",
    )
    parser.add_argument(
        "--ingest-workers",
        type=int,
        default=4,
        help="worker processes of the ingest function (its concurrent executions; 4)",
    )


# ------------------------------------------------------------------------------------------------
# secrets


def dev_secret(source: ResolvedSource, *, random: bool) -> tuple[str, str]:
    """The development secret of a source: ``(signing secret, stored Secrets Manager value)``.

    The provider's documented development value (the one the committed ``events/`` are signed
    with) unless ``random``; a random one keeps the provider's format (``whsec_`` + base64 for
    Standard Webhooks...). For asymmetric providers (SendGrid, Discord, v1a) the signing secret
    is the private key the simulator signs with and the stored value its public key; a
    handshake's verify token is random too with ``random``.
    """
    provider = source.provider
    stored = provider.dev_secret_value()
    if not random:
        return provider.dev_secret, stored
    signing = provider.random_secret(random_secrets.token_bytes(32))
    verification = provider.verification_secret(signing)
    if parse_secret(stored).verify_token is None:
        return signing, verification
    token = random_secrets.token_hex(12)
    return signing, json.dumps({"current": verification, "verify_token": token})


def seed_secrets(
    secretsmanager: SecretsManagerClient, prefix: str, sources_file: Path | None, *, random: bool
) -> dict[str, Any]:
    """Create one secret per example source under ``prefix``; return the ``secrets.json``
    document. Every provider of the registry is covered (the catalogue sources)."""
    from webhook_pipeline_ops.simulator.deliveries import example_sources

    doc: dict[str, Any] = {"secrets_prefix": prefix, "sources": {}}
    for name, source in example_sources(sources_file).items():
        signing, stored = dev_secret(source, random=random)
        secret_id = f"{prefix}{source.secret}"
        secretsmanager.create_secret(Name=secret_id, SecretString=stored)
        token = parse_secret(stored).verify_token
        if token is not None:
            doc.setdefault("verify_tokens", {})[name] = token
        doc["sources"][name] = {
            "provider": source.provider.name,
            "secret_id": secret_id,
            "secret": signing,
        }
    return doc


def read_secrets(directory: Path | None = None) -> dict[str, str]:
    """Source name -> signing secret, from the running local stack's ``secrets.json``."""
    path = state_dir(directory) / SECRETS_FILE
    doc = json.loads(path.read_text())
    return {name: entry["secret"] for name, entry in doc["sources"].items()}


# ------------------------------------------------------------------------------------------------
# readiness files


def read_ready(directory: Path | None = None) -> dict[str, Any] | None:
    """The ``ready`` document of a live local stack, or ``None`` (a stale file is removed)."""
    path = state_dir(directory) / READY_FILE
    try:
        doc: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not _alive(int(doc.get("pid", 0))):
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    return doc


def _is_stack_process(pid: int) -> bool:
    """Whether ``pid`` runs this CLI (guards against a recycled PID in a stale file)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc: trust the file
    return b"webhook_pipeline" in cmdline or b"webhook-pipeline" in cmdline


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours is not alive.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def _write_json(path: Path, doc: Mapping[str, Any], mode: int = 0o644) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    tmp.chmod(mode)
    tmp.replace(path)


# ------------------------------------------------------------------------------------------------
# the stack


class LocalStack:
    """The running local stack (use :meth:`start`, then :meth:`stop`).

    :meth:`start` runs small named steps in order: claim the state folder, bind the gateway's
    port (a port conflict fails before anything starts), start Redis, start the moto server,
    provision the template's resources, seed the secrets, start the functions' worker processes,
    start the gateway (and the Invoke endpoint with ``--for-containers``), start the pollers,
    write the readiness files. :meth:`stop` undoes them in reverse order.
    """

    def __init__(self, options: Options) -> None:
        self.options = options
        self.dir = state_dir(options.state_dir)
        self.root = project_root()
        self.template = options.template or self.root / "template.yaml"
        self.redis: RedisRuntime | None = None
        self.moto: MotoProcess | None = None
        self.gateway: Gateway | None = None
        self.invoke_gateway: Gateway | None = None
        self.pollers: list[SqsPoller] = []
        self.functions: dict[str, LocalFunction] = {}
        self.stack: Stack | None = None
        self.clients: _Clients | None = None
        self.endpoint = ""
        self.outputs: dict[str, Any] = {}
        self.requests = {"total": 0}
        self.faults = FaultSwitches(self.dir / "faults")  # a chaos run's switches (local.faults)

    # -- start -------------------------------------------------------------------------------
    def start(self) -> None:
        """Start every part; on any failure stop what was started and raise."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        self._claim_state_dir()
        self._bind_gateway()
        self._use_fake_aws_environment()
        self._start_redis()
        self._start_moto()
        self._provision()
        self._prepare_functions()
        self._seed_secrets()
        self._start_functions()
        self._start_gateway()
        self._start_pollers()
        self._write_ready()

    @property
    def _bind(self) -> str:
        """Where the emulators listen: loopback, or every interface with --for-containers."""
        return ALL_INTERFACES if self.options.for_containers else "127.0.0.1"

    def _claim_state_dir(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        running = read_ready(self.dir)
        if running and running.get("pid") != os.getpid():
            raise StackError(
                f"a local stack is already running (pid {running['pid']}, "
                f"{running.get('api_url')}); stop it with "
                f"`{command_name()} local stop`"
            )
        for name in (READY_FILE, OUTPUTS_FILE, SAM_ENV_FILE):
            with contextlib.suppress(FileNotFoundError):
                (self.dir / name).unlink()
        if not self.template.is_file():
            raise StackError(f"template not found: {self.template}")

    def _bind_gateway(self) -> None:
        """Bind the webhook port first: a port in use fails before Redis and moto start."""
        opts = self.options
        if not is_loopback(opts.host):
            log.warning(
                "SECURITY: the gateway binds %s, beyond loopback: anyone who can reach this "
                "machine can post webhooks to the local stack (dev secrets, no authentication)",
                opts.host,
            )
        try:
            self.gateway = Gateway(opts.host, opts.port, [], {}, on_request=self._count_request)
        except OSError as exc:
            raise StackError(
                f"cannot listen on {opts.host}:{opts.port}: {exc} (choose another with "
                "--port, or `make run PORT=...`)"
            ) from exc

    @property
    def gateway_url(self) -> str:
        assert self.gateway is not None
        host = self.options.host
        host = "127.0.0.1" if host in (ALL_INTERFACES, "") else host
        return f"http://{host}:{self.gateway.port}"

    def _use_fake_aws_environment(self) -> None:
        """Never reach a real AWS account: fake credentials, every client at the moto server."""
        os.environ.pop("AWS_PROFILE", None)
        os.environ.update(FAKE_CREDENTIALS)
        os.environ.update(
            AWS_REGION=self.options.region,
            AWS_DEFAULT_REGION=self.options.region,
            POWERTOOLS_TRACE_DISABLED="true",
        )

    def _start_redis(self) -> None:
        opts = self.options
        self.redis = start_redis(opts.redis_url, opts.redis_mode, bind=self._bind)  # type: ignore[arg-type]
        log.info("redis: %s (%s)", self.redis.url, self.redis.kind)
        if opts.for_containers and self.redis.kind == "external":
            log.warning(
                "--for-containers: REDIS_URL %s is used as is (not rebound); Lambda containers "
                "reach it only if it listens beyond 127.0.0.1 (sam-env.json names a loopback "
                "host as host.docker.internal)",
                self.redis.url,
            )

    def _start_moto(self) -> None:
        bind = self._bind
        self.faults.clear()  # no switch of an earlier run stays on
        self.moto = MotoProcess(
            ip_address=bind, port=self.options.moto_port, faults_dir=self.faults.directory
        )
        try:
            self.moto.start()
        except OSError as exc:
            self.moto = None
            raise StackError(
                f"moto server cannot listen on {bind}:{self.options.moto_port}: {exc}"
            ) from exc
        host, port = self.moto.get_host_and_port()
        if host == ALL_INTERFACES:
            host = "127.0.0.1"  # this process talks to it over loopback; containers get the rewrite
        self.endpoint = f"http://{host}:{port}"
        os.environ["AWS_ENDPOINT_URL"] = self.endpoint
        self.clients = _Clients(self.endpoint, self.options.region)
        log.info("moto server: %s (pid %s)", self.endpoint, self.moto.pid)

    def _provision(self) -> None:
        assert self.clients is not None
        opts = self.options
        parameters = dict(opts.parameters)
        # URL-signing providers (Twilio, Square, HubSpot) sign the URL they call: locally that
        # is this gateway's own http:// URL unless told otherwise.
        parameters.setdefault("PublicBaseUrl", self.gateway_url)
        self.stack = stack = provision(
            self.template,
            clients=self.clients,
            region=opts.region,
            stack_name=opts.stack_name,
            parameter_overrides=parameters,
            visibility_timeout=opts.visibility_timeout,
        )
        for logical_id, reason in sorted(stack.skipped.items()):
            log.debug("not emulated: %s (%s)", logical_id, reason)

    def _prepare_functions(self) -> None:
        """Each function's environment: the template's, then local stand-ins for what cannot
        resolve."""
        assert self.stack is not None and self.redis is not None
        opts = self.options
        default_sources = self.root / "layers" / "common" / "sources.toml"
        base_env = {
            **FAKE_CREDENTIALS,
            "AWS_REGION": opts.region,
            "AWS_DEFAULT_REGION": opts.region,
            "AWS_ENDPOINT_URL": self.endpoint,
            "POWERTOOLS_TRACE_DISABLED": "true",
            FAULTS_DIR_VARIABLE: str(self.faults.directory),
        }
        for logical_id, spec in self.stack.functions.items():
            env = spec.environment
            if "REDIS_URL" in env or "REDIS_URL" in spec.unresolved_environment:
                env["REDIS_URL"] = self.redis.url
                # The local Redis is a single non-cluster server, unlike ElastiCache Serverless.
                env["REDIS_CLUSTER_MODE"] = "false"
            if spec.sqs_events and (hooks := os.environ.get(LOCAL_HOOKS_VARIABLE)):
                env["HOOKS_MODULE"] = hooks  # the processor's; e.g. webhook_pipeline_ops.ledger
            if "SOURCES_CATALOGUE" in env:
                # Serve every provider locally (the simulator, events/ and the dev secrets
                # cover them all); a deployed stack serves only sources.toml.
                env["SOURCES_CATALOGUE"] = "true"
            if opts.for_containers:
                container_environment(env)
            sources_file = env.get("SOURCES_FILE")
            if (
                sources_file is not None and not Path(sources_file).is_file()
            ) or "SOURCES_FILE" in spec.unresolved_environment:
                env["SOURCES_FILE"] = str(default_sources)
            env.setdefault("POWERTOOLS_SERVICE_NAME", f"{opts.stack_name}-{spec.name}")
            still = [k for k in spec.unresolved_environment if k not in env]
            if still:
                log.warning(
                    "%s: environment variables not resolvable locally: %s",
                    logical_id,
                    ", ".join(still),
                )
            self.functions[logical_id] = LocalFunction(
                spec, base_env, opts.region, concurrency=self._concurrency(spec)
            )
        if opts.for_containers:
            _write_json(self.dir / SAM_ENV_FILE, sam_env_vars(self.functions.values()))

    def _concurrency(self, spec: Any) -> int:
        """Worker processes of a function: ``--ingest-workers`` behind the HTTP routes, one per
        SQS event source (as many as its pollers invoke at once), one otherwise."""
        if spec.http_routes:
            return self.options.ingest_workers
        return max(1, len([s for s in spec.sqs_events if s.enabled]))

    def _seed_secrets(self) -> None:
        assert self.stack is not None and self.clients is not None
        default_sources = self.root / "layers" / "common" / "sources.toml"
        functions = self.stack.functions.values()
        prefix = next(
            (
                f.environment["SECRETS_PREFIX"]
                for f in functions
                if "SECRETS_PREFIX" in f.environment
            ),
            f"{self.options.stack_name}/",
        )
        seeded_sources = next(
            (
                Path(f.environment["SOURCES_FILE"])
                for f in functions
                if "SOURCES_FILE" in f.environment
            ),
            default_sources,
        )
        secrets_doc = seed_secrets(
            self.clients.secretsmanager, prefix, seeded_sources, random=self.options.random_secrets
        )
        _write_json(self.dir / SECRETS_FILE, secrets_doc, mode=0o600)

    def _start_functions(self) -> None:
        """Cold starts now, in parallel: a bad configuration fails loudly before serving."""
        errors: dict[str, BaseException] = {}

        def load(fn: LocalFunction) -> None:
            try:
                fn.load()
            except Exception as exc:
                errors[fn.spec.logical_id] = exc

        threads = [threading.Thread(target=load, args=(fn,)) for fn in self.functions.values()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for logical_id, exc in sorted(errors.items()):
            kind = getattr(exc, "error_type", type(exc).__name__)
            message = getattr(exc, "message", str(exc))
            raise StackError(f"{logical_id} failed its init: {kind}: {message}") from exc

    def _start_gateway(self) -> None:
        assert self.gateway is not None
        routes = [Route(r, fn) for fn in self.functions.values() for r in fn.spec.http_routes]
        if not routes:
            ingest = self.functions.get("IngestFunction")
            if ingest is None:
                raise StackError("no function with an HttpApi event in the template")
            routes = [Route(DEFAULT_ROUTE, ingest)]
        self.gateway.routes = routes
        self.gateway.start()
        if not self.options.for_containers:
            return
        # The Lambda Invoke API, for `sam`/boto3 clients with AWS_ENDPOINT_URL_LAMBDA: only with
        # --for-containers and only on its own loopback port (never on the webhook port).
        by_name = {**{fn.spec.name: fn for fn in self.functions.values()}, **self.functions}
        try:
            self.invoke_gateway = Gateway(
                "127.0.0.1",
                self.options.invoke_port,
                [],
                by_name,
                on_request=self._count_request,
                serve_invoke=True,
            )
        except OSError as exc:
            raise StackError(
                f"cannot listen on 127.0.0.1:{self.options.invoke_port} (--invoke-port): {exc}"
            ) from exc
        self.invoke_gateway.start()

    def _start_pollers(self) -> None:
        assert self.stack is not None and self.clients is not None
        for fn in self.functions.values():
            for source in fn.spec.sqs_events:
                if not source.enabled:
                    continue
                queue = self.stack.queue_by_arn(source.queue_arn)
                poller = SqsPoller(self.clients.sqs, queue, source, fn, self.options.region)
                poller.start()
                self.pollers.append(poller)

    def _write_ready(self) -> None:
        assert self.gateway is not None and self.redis is not None
        opts = self.options
        self.outputs = self._outputs(self.endpoint)
        _write_json(self.dir / OUTPUTS_FILE, self.outputs)
        _write_json(
            self.dir / READY_FILE,
            {
                "pid": os.getpid(),
                "api_url": self.outputs["ApiUrl"],
                "endpoint_url": self.endpoint,
                "health_url": f"{self.gateway_url}/health",
                "redis_url": self.redis.url,
                "redis_kind": self.redis.kind,
                "redis_pid": self.redis.pid,
                "moto_pid": self.moto.pid if self.moto else None,
                "faults_dir": str(self.faults.directory),
                "worker_pids": {k: fn.pids for k, fn in self.functions.items()},
                "visibility_timeout": self._main_queue().visibility_timeout,
                "max_receive_count": self._main_queue().max_receive_count,
                "started_at": time.time(),
                "for_containers": opts.for_containers,
                **({"sam_env_file": str(self.dir / SAM_ENV_FILE)} if opts.for_containers else {}),
                **(
                    {"lambda_endpoint_url": self._invoke_url()}
                    if self.invoke_gateway is not None
                    else {}
                ),
            },
        )

    def _invoke_url(self) -> str:
        assert self.invoke_gateway is not None
        return f"http://127.0.0.1:{self.invoke_gateway.port}"

    def _count_request(self, method: str, path: str, status: int, ms: float) -> None:
        self.requests["total"] += 1
        log.info("%s %s -> %d (%.1f ms)", method, path, status, ms)

    def _main_queue(self) -> Any:
        assert self.stack is not None
        for fn in self.functions.values():
            for source in fn.spec.sqs_events:
                return self.stack.queue_by_arn(source.queue_arn)
        return self.stack.queues.get("MainQueue")

    def _outputs(self, endpoint: str) -> dict[str, Any]:
        assert self.stack is not None and self.gateway is not None and self.redis is not None
        stack = self.stack
        gateway_url = self.gateway_url
        main = self._main_queue()
        dlq = stack.queues.get("DeadLetterQueue")
        if dlq is None and main is not None and main.attributes.get("RedrivePolicy"):
            arn = json.loads(main.attributes["RedrivePolicy"])["deadLetterTargetArn"]
            dlq = stack.queue_by_arn(arn)
        outputs: dict[str, Any] = {
            k: v for k, v in stack.outputs.items() if isinstance(v, str | int | float)
        }
        replay = self.functions.get("ReplayFunction")
        outputs.update(
            {
                "EndpointUrl": endpoint,
                "Region": stack.region,
                "StackName": stack.stack_name,
                "ApiUrl": gateway_url,
                "WebhookUrlTemplate": f"{gateway_url}/webhooks/{{source}}",
                "LambdaEndpointUrl": self._invoke_url() if self.invoke_gateway else None,
                "MainQueueUrl": main.url if main else None,
                "DeadLetterQueueUrl": dlq.url if dlq else None,
                "DeliveriesTableName": stack.tables.get("DeliveriesTable")
                or next(iter(stack.tables.values()), None),
                "PayloadBucketName": stack.buckets.get("PayloadBucket")
                or next(iter(stack.buckets.values()), None),
                "RedisUrl": self.redis.url,
                "ReplayFunctionName": replay.spec.name if replay else None,
            }
        )
        return {k: v for k, v in outputs.items() if v is not None}

    # -- stop --------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop everything this stack started, in reverse order; idempotent."""
        with contextlib.suppress(FileNotFoundError, ValueError):
            ready = self.dir / READY_FILE
            if ready.is_file() and json.loads(ready.read_text()).get("pid") == os.getpid():
                ready.unlink()
        # Within seconds whatever is queued: a batch or request still in a worker when the
        # functions stop ends as on a crashed Lambda (the batch stays on the queue, the request
        # gets 503), never waits for the function's timeout.
        for poller in self.pollers:
            poller.request_stop()
        for step in (
            self._stop_gateway,
            self._stop_functions,
            self._stop_pollers,
            self._stop_moto,
            self._stop_redis,
        ):
            started = time.monotonic()
            step()
            log.debug("stop: %s took %.2f s", step.__name__, time.monotonic() - started)

    def _stop_pollers(self) -> None:
        for poller in self.pollers:
            poller.stop(timeout=POLLER_STOP_SECONDS)
        self.pollers = []

    def _stop_gateway(self) -> None:
        for gateway in (self.invoke_gateway, self.gateway):
            if gateway is not None:
                gateway.stop()
        self.gateway = self.invoke_gateway = None

    def _stop_functions(self) -> None:
        """Stop every function at once: their workers' grace periods run side by side."""
        threads = [threading.Thread(target=fn.stop) for fn in self.functions.values()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _stop_moto(self) -> None:
        if self.moto is not None:
            self.moto.stop()
            self.moto = None

    def _stop_redis(self) -> None:
        if self.redis is not None:
            self.redis.stop()
            self.redis = None

    # -- banner ------------------------------------------------------------------------------
    def banner(self) -> str:
        assert self.stack is not None and self.redis is not None
        o = self.outputs
        main = self._main_queue()
        workers = ", ".join(
            f"{fn.spec.logical_id} x{fn.concurrency}" for fn in self.functions.values()
        )
        lines = [
            "",
            "webhook pipeline: local stack is up",
            f"  webhooks   POST {o['ApiUrl']}/webhooks/{{source}}   "
            f"(sources: {', '.join(self._sources())})",
            f"  health     GET  {o['ApiUrl']}/health",
            f"  moto       {o['EndpointUrl']}  (SQS, DynamoDB, S3, Secrets Manager, CloudWatch)",
            f"  redis      {self.redis.url}  ({self.redis.kind}"
            + (f", pid {self.redis.pid}" if self.redis.pid else "")
            + ")",
            f"  queues     {o.get('MainQueueUrl')}  (visibility {main.visibility_timeout} s, "
            f"maxReceiveCount {main.max_receive_count})",
            f"             {o.get('DeadLetterQueueUrl')}",
            f"  table      {o.get('DeliveriesTableName')}    bucket {o.get('PayloadBucketName')}",
            f"  alarms     {len(self.stack.alarms)} created",
            f"  functions  {workers}  (worker processes, one interpreter each)",
        ]
        for poller in self.pollers:
            lines.append(
                f"  poller     {poller.queue.name} -> {poller.function.spec.logical_id} "
                f"(batch {poller.source.batch_size}, window "
                f"{poller.source.maximum_batching_window_seconds} s)"
            )
        files = "outputs.json, secrets.json, ready"
        if self.options.for_containers:
            files += f", {SAM_ENV_FILE}"
        if self.invoke_gateway is not None:
            lines.append(f"  invoke     {self._invoke_url()}  (Lambda Invoke API, loopback only)")
        cli = command_name()
        lines += [
            f"  files      {self.dir}/ ({files})",
            "",
            f"  try:   {cli} send --source stripe --count 5 --duplicates 0.2",
            f"         {cli} deliveries get --local SOURCE DELIVERY_ID   (any operator "
            "command with --local)",
            f"  console:  {cli} console --local   (another terminal; "
            f"http://127.0.0.1:{CONSOLE_PORT}/, or `make console`)",
        ]
        if self.options.for_containers:
            lines += self._sam_banner()
        lines += [f"  stop:  Ctrl-C (or `{cli} local stop`)", ""]
        return "\n".join(lines)

    def _sam_banner(self) -> list[str]:
        """How to run ``sam local invoke`` against this stack (``--for-containers``)."""
        env_file = self.dir / SAM_ENV_FILE
        with contextlib.suppress(ValueError):
            env_file = env_file.resolve().relative_to(Path.cwd())
        region = self.options.region
        return [
            "",
            "  containers: moto and Redis listen on 0.0.0.0 (reachable as "
            f"{CONTAINER_HOST}; local development only)",
            "  sam:   .venv/bin/sam build --config-env local",
            "         .venv/bin/webhook-pipeline events --now --out /tmp/events",
            "         AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing "
            f"AWS_DEFAULT_REGION={region} \\",
            "           .venv/bin/sam local invoke --config-env local IngestFunction "
            f"-e /tmp/events/ingest-github.json --env-vars {env_file}",
            "",
        ]

    def _sources(self) -> list[str]:
        try:
            return sorted(json.loads((self.dir / SECRETS_FILE).read_text())["sources"])
        except (OSError, ValueError, KeyError):
            return []


# ------------------------------------------------------------------------------------------------
# sam local invoke (--for-containers)


def container_value(value: str) -> str:
    """``value`` as a Lambda container must see it: loopback hosts of URLs -> host.docker.internal.

    ``http://127.0.0.1:5055/123456789012/q`` -> ``http://host.docker.internal:5055/123456789012/q``;
    ``localhost``, ``0.0.0.0`` and ``[::1]`` too, user info kept. Other values are unchanged.
    """
    return _LOOPBACK_URL.sub(lambda m: m["prefix"] + CONTAINER_HOST, value)


def sam_env_vars(functions: Any) -> dict[str, dict[str, str]]:
    """The ``sam local invoke --env-vars`` document of the running stack.

    For each function (by logical id): the environment the local stack resolved for it
    (``AWS_ENDPOINT_URL``, queue URLs, ``REDIS_URL`` with ``REDIS_CLUSTER_MODE=false``...),
    rewritten with :func:`container_value`, restricted to the variables the template declares
    for it (sam ignores the others) and without host paths (:data:`HOST_ONLY_VARIABLES`).
    """
    doc: dict[str, dict[str, str]] = {}
    for fn in functions:
        declared = fn.spec.declared_environment
        if "AWS_ENDPOINT_URL" not in declared:
            log.warning(
                "%s: the template declares no AWS_ENDPOINT_URL, so sam local invoke cannot point "
                "it at the local moto server (its AWS calls would go to AWS)",
                fn.spec.logical_id,
            )
        doc[fn.spec.logical_id] = {
            name: container_value(str(fn.environment[name]))
            for name in declared
            if name in fn.environment and name not in HOST_ONLY_VARIABLES
        }
    return doc


class _Clients:
    """boto3 clients at the moto server, created on first use."""

    def __init__(self, endpoint: str, region: str) -> None:
        import boto3

        self._session = boto3.session.Session(
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # noqa: S106
            region_name=region,
        )
        self._endpoint = endpoint
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __getattr__(self, service: str) -> Any:
        if service.startswith("_"):
            raise AttributeError(service)
        with self._lock:
            if service not in self._clients:
                from botocore.config import Config

                # A client per attribute name: the name is only known at run time.
                self._clients[service] = self._session.client(  # type: ignore[call-overload]
                    service,
                    endpoint_url=self._endpoint,
                    config=Config(
                        retries={"mode": "standard", "max_attempts": 3},
                        read_timeout=30,
                        connect_timeout=5,
                    ),
                )
            return self._clients[service]


# ------------------------------------------------------------------------------------------------
# commands


def run(options: Options) -> int:
    """Run the stack in the foreground until SIGINT/SIGTERM. Returns the exit code."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    stack = LocalStack(options)
    try:
        try:
            stack.start()
        except StackError as exc:
            print(f"webhook-pipeline local run: {exc}", file=sys.stderr)
            return 1
        (stack.dir / PID_FILE).write_text(f"{os.getpid()}\n")
        print(stack.banner(), flush=True)
        stop.wait()
        print("\nstopping the local stack...", flush=True)
    finally:
        stack.stop()
        with contextlib.suppress(FileNotFoundError):
            pid_file = stack.dir / PID_FILE
            if pid_file.read_text().strip() == str(os.getpid()):
                pid_file.unlink()
        for s, handler in previous.items():
            signal.signal(s, handler)
    print("local stack stopped.", flush=True)
    return 0


def start_background(
    argv: list[str], directory: Path | None = None, timeout: float = 90.0
) -> dict[str, Any]:
    """Start ``local run ARGV`` as a detached process; wait until it is ready.

    Returns
    -------
    dict
        The ``ready`` document (``pid``, ``api_url``, ``endpoint_url``...).

    Raises
    ------
    StackError
        The process exited or was not ready within ``timeout`` seconds (its log is named).
    """
    folder = state_dir(directory)
    folder.mkdir(parents=True, exist_ok=True)
    running = read_ready(folder)
    if running:
        return running
    log_path = folder / LOG_FILE
    env = dict(os.environ)
    if directory is not None:
        env["WEBHOOK_PIPELINE_LOCAL_DIR"] = str(directory)
    with log_path.open("ab") as log_file:
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "webhook_pipeline_ops.cli", "local", "run", *argv],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    (folder / PID_FILE).write_text(f"{process.pid}\n")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = read_ready(folder)
        if ready and ready.get("pid") == process.pid:
            return ready
        if process.poll() is not None:
            raise StackError(f"the local stack exited with {process.returncode}; see {log_path}")
        time.sleep(0.1)
    process.terminate()
    raise StackError(f"the local stack was not ready within {timeout:.0f} s; see {log_path}")


def stop_running(directory: Path | None = None, timeout: float = 30.0) -> bool:
    """Stop the local stack recorded in the state folder (SIGTERM to its PID). True if one ran."""
    folder = state_dir(directory)
    pid = 0
    ready = read_ready(folder)
    if ready:
        pid = int(ready["pid"])
    else:
        with contextlib.suppress(OSError, ValueError):
            pid = int((folder / PID_FILE).read_text().strip())
    if not pid or not _alive(pid) or not _is_stack_process(pid):
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
    return True
