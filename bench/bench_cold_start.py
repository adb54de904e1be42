"""Cold start benchmark (not a test): what shipping .pyc files saves at each cold start.

``sam build`` used to ship the layer and the functions as unpacked wheels and sources without
bytecode (``BuildMethod: python3.13``), and Lambda's code filesystem is read-only, so every cold
start compiled every imported module again. ``packaging/lambda.mk`` now compiles them
(unchecked-hash .pyc for CPython 3.13). This bench measures both, side by side in one run:

- ``compiled``: the artifact of ``sam build --config-env local`` (x86_64, this machine's
  architecture) as built;
- ``source_only``: the same artifact with every ``__pycache__`` removed, which is what the
  python3.13 builder produced (same files otherwise: checked when the build method changed).

Each sample is a fresh interpreter in a fresh container of the Lambda image
(``local/lambda-python:3.13`` from ``../shared/tools/lambda-image.sh``: Debian's CPython 3.13 and
the Lambda runtime interface client) with the function at /var/task and the layer at /opt,
mounted read-only as in Lambda, with the function's environment from env/local-invoke.json and
tracing enabled as deployed. Timed inside the interpreter, so container start-up is excluded:

- ingest: ``import app; app.service()`` (settings, sources, the wired use case and its clients);
- processor: ``import app; app.dynamodb_client()``; replay: ``import app; app.sqs_client()``.

Without Docker (or with ``--local``) the same is run with this interpreter (3.13; ``-I -S``: only
the artifact on sys.path; ``-B`` keeps the source-only copy uncompiled). Samples are
interleaved; medians and their ratio are reported.

    .venv/bin/python bench/bench_cold_start.py [--quick] [--runs N] [--build-dir DIR] [--local]

Figures go to bench/results/cold_start.json (``--quick``: cold_start.quick.json, git-ignored) and
are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "cold_start.json"
IMAGE = "local/lambda-python:3.13"
FIRST_USE = {
    "IngestFunction": "app.service()",
    "ProcessorFunction": "app.dynamodb_client()",
    "ReplayFunction": "app.sqs_client()",
}
PROBE = """
import json, sys, time
started = time.perf_counter()
sys.path[:0] = [{task!r}, {opt!r}]
import app
imported = time.perf_counter()
{first_use}
done = time.perf_counter()
import os
on_disk = sum(1 for m in list(sys.modules.values())
              if isinstance(getattr(m, "__cached__", None), str) and os.path.exists(m.__cached__))
print(json.dumps({{"import_s": imported - started, "cold_s": done - started,
                  "modules": len(sys.modules), "modules_with_pyc_on_disk": on_disk}}))
"""


def sam_build(build_dir: Path) -> Path:
    """``sam build --config-env local`` into ``build_dir``; the build directory."""
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0", "AWS_DEFAULT_REGION": "us-east-1"}
    sam = Path(sys.executable).parent / "sam"
    subprocess.run(
        [
            str(sam) if sam.exists() else "sam", "build", "--config-env", "local",
            "--build-dir", str(build_dir / "build"), "--cache-dir", str(build_dir / "cache"),
        ],
        cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return build_dir / "build"


def strip_bytecode(build: Path, into: Path) -> Path:
    """A copy of ``build`` without any ``__pycache__`` (what the python3.13 builder shipped)."""
    shutil.copytree(build, into, ignore=shutil.ignore_patterns("__pycache__"))
    return into


def function_env(function: str) -> dict[str, str]:
    """The function's environment as in Lambda (env/local-invoke.json, tracing on)."""
    doc = json.loads((ROOT / "env" / "local-invoke.json").read_text())
    return {
        **doc[function],
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_LAMBDA_FUNCTION_NAME": function,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512",
        "LAMBDA_TASK_ROOT": "/var/task",
        "POWERTOOLS_METRICS_NAMESPACE": "WebhookPipeline",
        "POWERTOOLS_LOG_LEVEL": "INFO",
        "AWS_XRAY_DAEMON_ADDRESS": "127.0.0.1:2000",
    }


def docker_usable() -> bool:
    if shutil.which("docker") is None:
        return False
    info = subprocess.run(["docker", "info"], capture_output=True, check=False, timeout=30)
    image = subprocess.run(
        ["docker", "image", "inspect", IMAGE], capture_output=True, check=False, timeout=30
    )
    return info.returncode == 0 and image.returncode == 0


def sample_docker(build: Path, function: str) -> dict[str, Any]:
    code = PROBE.format(task="/var/task", opt="/opt/python", first_use=FIRST_USE[function])
    env_args = [a for k, v in function_env(function).items() for a in ("-e", f"{k}={v}")]
    out = subprocess.run(
        [
            "docker", "run", "--rm", "--network", "none", *env_args,
            "-v", f"{build / function}:/var/task:ro", "-v", f"{build / 'CommonLayer'}:/opt:ro",
            "--entrypoint", "/usr/bin/python3", IMAGE, "-c", code,
        ],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def sample_local(build: Path, function: str) -> dict[str, Any]:
    task = build / function
    code = PROBE.format(
        task=str(task), opt=str(build / "CommonLayer" / "python"), first_use=FIRST_USE[function]
    )
    env = {
        "PATH": os.environ.get("PATH", ""),
        **function_env(function),
        "LAMBDA_TASK_ROOT": str(task),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    # -S: no site-packages, only the artifact on sys.path; -B: -I ignores PYTHONDONTWRITEBYTECODE
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-B", "-c", code],
        cwd=task, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def measure(
    builds: dict[str, Path], runs: int, sampler: Any, functions: list[str]
) -> dict[str, Any]:
    samples: dict[str, dict[str, list[dict[str, Any]]]] = {
        f: {v: [] for v in builds} for f in functions
    }
    for function in functions:  # warm the page cache once per variant (not counted)
        for build in builds.values():
            sampler(build, function)
    for _ in range(runs):
        for function in functions:
            for variant, build in builds.items():
                samples[function][variant].append(sampler(build, function))
    report: dict[str, Any] = {}
    for function, by_variant in samples.items():
        medians = {
            variant: {
                "cold_s_median": round(statistics.median(s["cold_s"] for s in runs_), 4),
                "import_s_median": round(statistics.median(s["import_s"] for s in runs_), 4),
                "cold_s_min": round(min(s["cold_s"] for s in runs_), 4),
                "cold_s_max": round(max(s["cold_s"] for s in runs_), 4),
                "modules_loaded": runs_[0]["modules"],
                "modules_with_pyc_on_disk": runs_[0]["modules_with_pyc_on_disk"],
            }
            for variant, runs_ in by_variant.items()
        }
        before = medians["source_only"]["cold_s_median"]
        after = medians["compiled"]["cold_s_median"]
        report[function] = {
            **medians,
            "source_only_over_compiled": round(before / after, 3),
            "saved_s": round(before - after, 4),
        }
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 runs per variant (default 15)")
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--build-dir", type=Path, help="reuse this sam build output directory")
    parser.add_argument("--local", action="store_true", help="also measure with local python3.13")
    raw_args = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(raw_args)
    runs = args.runs or (5 if args.quick else 15)
    with tempfile.TemporaryDirectory(prefix="bench-cold-start-") as scratch:
        work = Path(scratch)
        build = args.build_dir or sam_build(work)
        builds = {"source_only": strip_bytecode(build, work / "source-only"), "compiled": build}
        functions = list(FIRST_USE)
        where: dict[str, Any] = {}
        docker = docker_usable()
        if docker:
            where["lambda_container"] = measure(builds, runs, sample_docker, functions)
        if args.local or not docker:
            where["local_python"] = measure(builds, runs, sample_local, functions)
    results = {
        "command": " ".join(["python", "bench/bench_cold_start.py", *raw_args]),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "runs_each": runs,
        "image": IMAGE if docker else None,
        "measured": "cold 'import app' + first use (ingest: app.service()), seconds, in-process",
        "results": where,
    }
    out = RESULTS.with_suffix(".quick.json") if args.quick else RESULTS  # keep the full figures
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    print(f"written to {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
