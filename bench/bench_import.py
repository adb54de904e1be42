"""Import and first-invocation cost of each function (not a test), against its bare dependencies.

For each of ingest, processor and replay, in fresh interpreters (this one's executable, with
``.pyc`` files as ``sam build`` now ships them), timed inside the interpreter so start-up is
excluded:

- ``deps``: importing exactly the third-party modules ``import app`` loads (found once with the
  function's own import, recorded in load order), then the same init work on them that ``app``
  does (:data:`BARE_INIT`: the boto3 clients it builds during the init and, for ingest, a Redis
  connection and one ``PING``): the floor any handler on these libraries pays, so the ratio still
  isolates our own modules now that the clients are built during the init;
- ``app``: ``import app`` (our modules, settings, sources, Logger/Metrics/Tracer);
- ``first_use``: what the first invocation adds, reported apart: ingest ``app.service()`` (the
  wired use case and its SQS/Secrets Manager clients), processor ``app.service()``, replay
  ``app.sqs_client()``.

Tracing is off (``POWERTOOLS_TRACE_DISABLED=true``, in a Lambda-like environment); ``--traced``
measures with it on, as deployed with ``Tracing: Active``. With ``--before REV`` the ingest
``import app; app.service()`` of that revision (checked out in a temporary worktree) is
measured side by side with this tree's: the lazy S3 client and tracing provider before/after.
Samples are interleaved; medians and ratios are reported (target: app / deps <= 1.10).

Run: ``.venv/bin/python bench/bench_import.py [--quick] [--traced] [--before REV]``; figures go
to ``bench/results/import.json`` (``--quick``: ``import.quick.json``, git-ignored).

``--instructions`` counts instead of timing: each import runs once under
``valgrind --tool=callgrind``, which counts the instructions the interpreter executes, the same
count for the same code and inputs whatever else the machine is doing. The ratio is
``(app - empty) / (deps - empty)``, where ``empty`` is ``python -c pass`` (the interpreter's own
start-up, in both). Written to ``bench/results/import_instructions.json`` (with ``--traced``:
``import_instructions_traced.json``); needs valgrind.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
FIRST_USE = {"ingest": "app.service()", "processor": "app.service()", "replay": "app.sqs_client()"}
OURS = ("app", "webhook_pipeline")
#: What ``import app`` builds during the init, done the bare way on the ``deps`` side.
BARE_INIT = {
    "ingest": (
        "import os, boto3, redis\n"
        "boto3.client('sqs'); boto3.client('secretsmanager')\n"
        "try:\n"
        "    redis.Redis.from_url(os.environ['REDIS_URL'], socket_connect_timeout=0.2).ping()\n"
        "except redis.RedisError:\n"
        "    pass\n"
    ),
    "processor": "import boto3\nboto3.client('dynamodb')\n",
    "replay": "import boto3\nboto3.client('sqs')\n",
}

TIMED = """
import sys, time, json
t0 = time.perf_counter()
{imports}
t1 = time.perf_counter()
{first_use}
t2 = time.perf_counter()
print(json.dumps([t1 - t0, t2 - t1]))
"""

DISCOVER = """
import sys, json
before = set(sys.modules)
import app
print(json.dumps([m for m in sys.modules if m not in before]))
"""


def env_for(function: str, root: Path, traced: bool) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        # PYTHONDONTWRITEBYTECODE would leave a module edited since its .pyc was written to be
        # compiled again in every measured import (compile_tree writes them first as well)
        if not k.startswith(("POWERTOOLS_", "AWS_LAMBDA_", "LAMBDA_", "PYTHONDONTWRITEBYTECODE"))
    }
    env.update(
        {
            "PYTHONPATH": str(root / "layers" / "common"),
            "LAMBDA_TASK_ROOT": str(root / "functions" / function),
            "AWS_LAMBDA_FUNCTION_NAME": f"{function.capitalize()}Function",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "POWERTOOLS_SERVICE_NAME": function,
            "POWERTOOLS_METRICS_NAMESPACE": "WebhookPipeline",
            "POWERTOOLS_TRACE_DISABLED": "false" if traced else "true",
            "QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/main",
            "DLQ_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/dlq",
            "PAYLOAD_BUCKET": "payloads",
            "TABLE_NAME": "deliveries",
            "SECRETS_PREFIX": "webhook-pipeline/bench/",
            "REDIS_URL": "redis://127.0.0.1:6379/0",
        }
    )
    return env


def compile_tree(root: Path) -> None:
    """Write the ``.pyc`` file of every module of the layer and the functions under ``root``,
    as ``sam build`` ships them, so no measured import compiles a source file (a stale or
    missing ``.pyc`` costs the compile on every import when bytecode is not written)."""
    for folder in (root / "layers" / "common", root / "functions"):
        if not compileall.compile_dir(folder, quiet=1):
            raise SystemExit(f"compileall failed under {folder}")


def run(code: str, function: str, root: Path, traced: bool) -> Any:
    out = subprocess.run(
        [PY, "-c", code],
        cwd=root / "functions" / function,
        env=env_for(function, root, traced),
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def third_party(function: str, traced: bool) -> list[str]:
    loaded: list[str] = run(DISCOVER, function, ROOT, traced)
    stdlib = sys.stdlib_module_names
    return [
        m
        for m in loaded
        if m.split(".")[0] not in OURS and m.split(".")[0] not in stdlib and not m.startswith("_")
    ]


def bare(function: str, traced: bool) -> str:
    """The ``deps`` side's code: the third-party imports of ``import app``, then
    :data:`BARE_INIT`."""
    return (
        "\n".join(f"import {m}" for m in third_party(function, traced)) + "\n" + BARE_INIT[function]
    )


def count_instructions(code: str, function: str, traced: bool) -> int:
    """Instructions ``python -c code`` executes in ``function``'s folder (callgrind's total)."""
    with tempfile.TemporaryDirectory() as folder:
        result = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={folder}/callgrind.out",
                PY,
                "-c",
                code,
            ],
            cwd=ROOT / "functions" / function,
            env=env_for(function, ROOT, traced),
            capture_output=True,
            text=True,
            check=True,
        )
    found = re.search(r"Collected : (\d+)", result.stderr)
    if found is None:
        raise RuntimeError(f"callgrind reported no total: {result.stderr[-400:]}")
    return int(found.group(1))


def instructions(traced: bool) -> dict[str, Any]:
    """Import cost in instructions, per function: deps, app and the ratio."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    report: dict[str, Any] = {}
    for function in FIRST_USE:
        empty = count_instructions("pass", function, traced)
        deps = count_instructions(bare(function, traced), function, traced)
        app = count_instructions("import app", function, traced)
        ratio = (app - empty) / (deps - empty)
        report[function] = {
            "empty_interpreter": empty,
            "deps_import": deps - empty,
            "app_import": app - empty,
            "app_import_over_deps": round(ratio, 3),
            "target_met": ratio <= 1.10,
        }
        print(f"{function}: {report[function]}", file=sys.stderr, flush=True)
    return report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--traced", action="store_true")
    parser.add_argument("--before", default=None)
    parser.add_argument("--runs", type=int, default=None)
    args = parser.parse_args()
    compile_tree(ROOT)
    if args.instructions:
        write_results(
            "import_instructions_traced.json" if args.traced else "import_instructions.json",
            {"counted": "instructions (valgrind callgrind)", "results": instructions(args.traced)},
        )
        return
    runs = args.runs or (5 if args.quick else 21)
    variants: dict[str, tuple[str, str, Path]] = {}
    for function in FIRST_USE:
        variants[f"{function}:deps"] = (
            TIMED.format(imports=bare(function, args.traced), first_use=""),
            function,
            ROOT,
        )
        variants[f"{function}:app"] = (
            TIMED.format(imports="import app", first_use=FIRST_USE[function]),
            function,
            ROOT,
        )
    before_dir = None
    if args.before:
        before_dir = Path(tempfile.mkdtemp(prefix="bench-before-")) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(before_dir), args.before],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        compile_tree(before_dir)
        variants["ingest:app@before"] = (
            TIMED.format(imports="import app", first_use=FIRST_USE["ingest"]),
            "ingest",
            before_dir,
        )
    try:
        for code, function, root in variants.values():  # warm page cache, write .pyc files
            run(code, function, root, args.traced)
        samples: dict[str, list[list[float]]] = {k: [] for k in variants}
        for _ in range(runs):
            for name, (code, function, root) in variants.items():
                samples[name].append(run(code, function, root, args.traced))
    finally:
        if before_dir is not None:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(before_dir)], cwd=ROOT, check=False
            )
    med = {
        k: {
            "import_s": round(statistics.median(s[0] for s in v), 4),
            "first_use_s": round(statistics.median(s[1] for s in v), 4),
            "total_s": round(statistics.median(s[0] + s[1] for s in v), 4),
        }
        for k, v in samples.items()
    }
    report: dict[str, Any] = {}
    for function in FIRST_USE:
        deps, app = med[f"{function}:deps"], med[f"{function}:app"]
        report[function] = {
            "deps_import_s": deps["import_s"],
            "app_import_s": app["import_s"],
            "app_import_over_deps": round(app["import_s"] / deps["import_s"], 3),
            "first_use_s": app["first_use_s"],
            "target_met": app["import_s"] / deps["import_s"] <= 1.10,
        }
    if "ingest:app@before" in med:
        before, after = med["ingest:app@before"], med["ingest:app"]
        report["ingest_before_after"] = {
            "before_revision": args.before,
            "before": before,
            "after": after,
            "after_over_before_total": round(after["total_s"] / before["total_s"], 3),
            "saved_total_s": round(before["total_s"] - after["total_s"], 4),
        }
    name = (
        "import.quick.json"
        if args.quick
        else ("import_traced.json" if args.traced else "import.json")
    )
    write_results(
        name,
        {
            "runs_each": runs,
            "tracing": "on (as deployed)" if args.traced else "off",
            "results": report,
        },
    )


def write_results(name: str, body: dict[str, Any]) -> None:
    """``bench/results/<name>``: the command, the machine, the time, then ``body``."""
    results = {
        "command": " ".join(
            [".venv/bin/python", str(Path(sys.argv[0]).resolve().relative_to(ROOT)), *sys.argv[1:]]
        ),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **body,
    }
    out = ROOT / "bench" / "results" / name
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
