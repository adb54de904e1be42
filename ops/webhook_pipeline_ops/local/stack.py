"""``webhook-pipeline local run``: start the whole pipeline on this machine.

Start order (:meth:`LocalStack.start`, one small step each): the gateway's port is bound first
(a port in use fails before anything starts), Redis (:mod:`.redis_runtime`), a moto server in
its own process on 127.0.0.1 (:mod:`.moto_server`, with :mod:`.moto_patches`), the resources of
``template.yaml`` (:mod:`.provision`), the development secrets of the example sources
(:mod:`.dev_secrets`), the functions' worker processes (:mod:`.functions`, :mod:`.runtime`: one
interpreter per execution environment, cold start with the template environment), the HTTP
gateway and the SQS pollers. Then ``.local-stack/outputs.json``, ``secrets.json`` and ``ready``
are written (:mod:`.outputs`, :mod:`.state_files`). SIGINT/SIGTERM stop everything in the
reverse order (threads joined, the workers, the moto server and the redis-server this stack
started terminated by their PIDs) and remove ``ready``.

With ``--for-containers`` the moto server and the Redis the stack starts listen on 0.0.0.0, and
``sam-env.json`` is written: a ``sam local invoke --env-vars`` file with each function's resolved
environment as a Lambda container must see it (:mod:`.containers`). The options are in
:mod:`.options`, the foreground run in :mod:`.foreground`, the background start and stop in
:mod:`.background`, the banner in :mod:`.banner`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from typing import Any

from webhook_pipeline_ops.local import (
    OUTPUTS_FILE,
    READY_FILE,
    SAM_ENV_FILE,
    SECRETS_FILE,
    project_root,
    state_dir,
)
from webhook_pipeline_ops.local.banner import render as render_banner
from webhook_pipeline_ops.local.containers import (
    ALL_INTERFACES,
    sam_env_vars,
)
from webhook_pipeline_ops.local.dev_secrets import secrets_location, seed_secrets
from webhook_pipeline_ops.local.faults import FAULTS_DIR_VARIABLE, FaultSwitches
from webhook_pipeline_ops.local.functions import (
    cold_start,
    concurrency,
    local_environment,
    stop_all,
)
from webhook_pipeline_ops.local.http_gateway import Gateway, Route, is_loopback
from webhook_pipeline_ops.local.moto_clients import FAKE_CREDENTIALS, MotoClients
from webhook_pipeline_ops.local.moto_server import MotoProcess
from webhook_pipeline_ops.local.options import Options, StackError, local_parameters
from webhook_pipeline_ops.local.outputs import outputs_document, ready_document
from webhook_pipeline_ops.local.poller import SqsPoller
from webhook_pipeline_ops.local.provision import provision
from webhook_pipeline_ops.local.redis_runtime import RedisRuntime, start_redis
from webhook_pipeline_ops.local.resources import HttpRoute, Stack
from webhook_pipeline_ops.local.runtime import LocalFunction
from webhook_pipeline_ops.local.state_files import read_ready, write_json
from webhook_pipeline_ops.output import command_name

log = logging.getLogger("webhook_pipeline_ops.local")

DEFAULT_ROUTE = HttpRoute(method="POST", path="/webhooks/{source}")

#: Seconds a poller may take to return once its function is stopped (a ReceiveMessage long
#: poll is 1 s; a slow moto answer is left behind: the threads are daemons).
POLLER_STOP_SECONDS = 5.0


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
        self.clients: MotoClients | None = None
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
        self.clients = MotoClients(self.endpoint, self.options.region)
        log.info("moto server: %s (pid %s)", self.endpoint, self.moto.pid)

    def _provision(self) -> None:
        assert self.clients is not None
        opts = self.options
        parameters = local_parameters(opts.parameters, self.gateway_url)
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
        resolve (:func:`.functions.local_environment`)."""
        assert self.stack is not None and self.redis is not None
        opts = self.options
        base_env = {
            **FAKE_CREDENTIALS,
            "AWS_REGION": opts.region,
            "AWS_DEFAULT_REGION": opts.region,
            "AWS_ENDPOINT_URL": self.endpoint,
            "POWERTOOLS_TRACE_DISABLED": "true",
            FAULTS_DIR_VARIABLE: str(self.faults.directory),
        }
        for logical_id, spec in self.stack.functions.items():
            local_environment(
                spec,
                redis_url=self.redis.url,
                default_sources=self.root / "layers" / "common" / "sources.toml",
                stack_name=opts.stack_name,
                for_containers=opts.for_containers,
            )
            self.functions[logical_id] = LocalFunction(
                spec, base_env, opts.region, concurrency=concurrency(spec, opts.ingest_workers)
            )
        if opts.for_containers:
            write_json(self.dir / SAM_ENV_FILE, sam_env_vars(self.functions.values()))

    def _seed_secrets(self) -> None:
        assert self.stack is not None and self.clients is not None
        prefix, sources = secrets_location(
            [f.environment for f in self.stack.functions.values()],
            default_prefix=f"{self.options.stack_name}/",
            default_sources=self.root / "layers" / "common" / "sources.toml",
        )
        secrets_doc = seed_secrets(
            self.clients.secretsmanager, prefix, sources, random=self.options.random_secrets
        )
        write_json(self.dir / SECRETS_FILE, secrets_doc, mode=0o600)

    def _start_functions(self) -> None:
        """Cold starts now, in parallel: a bad configuration fails loudly before serving."""
        failed = cold_start(list(self.functions.values()))
        if failed is not None:
            logical_id, exc = failed
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
        self.outputs = outputs_document(self)
        write_json(self.dir / OUTPUTS_FILE, self.outputs)
        write_json(self.dir / READY_FILE, ready_document(self))

    def invoke_url(self) -> str:
        assert self.invoke_gateway is not None
        return f"http://127.0.0.1:{self.invoke_gateway.port}"

    def _count_request(self, method: str, path: str, status: int, ms: float) -> None:
        self.requests["total"] += 1
        log.info("%s %s -> %d (%.1f ms)", method, path, status, ms)

    def main_queue(self) -> Any:
        assert self.stack is not None
        for fn in self.functions.values():
            for source in fn.spec.sqs_events:
                return self.stack.queue_by_arn(source.queue_arn)
        return self.stack.queues.get("MainQueue")

    def banner(self) -> str:
        """What ``local run`` prints once the stack is up (:mod:`.banner`)."""
        return render_banner(self)

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
        stop_all(list(self.functions.values()))

    def _stop_moto(self) -> None:
        if self.moto is not None:
            self.moto.stop()
            self.moto = None

    def _stop_redis(self) -> None:
        if self.redis is not None:
            self.redis.stop()
            self.redis = None
