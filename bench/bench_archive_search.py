"""Archive search benchmark (not a test): ``webhook-pipeline archive search`` over 100,000
archived deliveries in the local stack's S3.

The archive is written as the archiver writes it: gzip JSON Lines objects of 1,000 records, one
per (source, hour), 4 sources over 25 hours, 2 KB JSON bodies, plus a second attempt archived for
2 % of the deliveries (what a retried batch leaves; deduplicated on read). Two archives, each
searched on its own:

- ``random letters``: bodies padded with random letters, which gzip compresses worst (the
  incompressible worst case: about 1.2 KB of gzip per delivery);
- ``realistic``: the providers' sample bodies grown to 2 KB with line items whose ids are random,
  built as ``bench/bench_archive_size.py`` builds them (the bodies the archive's cost figure
  uses), with their signed headers.

S3 is a moto server in its own process, over HTTP, as ``webhook-pipeline local run`` serves it:
the search pays the requests, the transfer and the decompression a local search pays (in-process
moto would share the search's interpreter and skip the HTTP path).

Timed: the CLI as a user runs it (a new process: interpreter start, imports, listing, reading,
deduplicating, filtering, printing ``--limit 5``), for a 6-hour window of every source with a
predicate, and for the whole archive with a predicate (every object read). Median of
``--repeat`` runs (3). Target: under 5 s for the whole archive (issue 23, item 6).

Run: ``.venv/bin/python bench/bench_archive_search.py [--quick] [--bodies letters|realistic]``
(``--quick``: 10,000 deliveries); figures go to ``bench/results/archive_search.json``
(``archive_search.quick.json``, git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SOURCES = ("stripe", "github", "shopify", "slack")
HOURS = 25
PER_OBJECT = 1000
BUCKET = "archive-bench"
START = datetime(2026, 3, 1, 0, 0, tzinfo=UTC)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_moto(port: int) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise SystemExit("moto server did not start")


def body(rng: random.Random, number: int) -> bytes:
    document = {
        "id": f"evt_{number:08d}",
        "type": "charge.succeeded",
        "data": {"object": {"amount": rng.randrange(1, 10_000), "currency": "usd"}},
    }
    text = json.dumps(document)
    pad = 2048 - len(text) - len(', "metadata": ""}') + 1
    document["metadata"] = "".join(rng.choice("abcdefghijklmnop") for _ in range(pad))
    return json.dumps(document).encode()


def letters_records(source: str, number: int, received: datetime, rng: random.Random) -> Any:
    """One delivery whose body is padded with random letters."""
    from webhook_pipeline.archive.record import ArchiveRecord, format_time
    from webhook_pipeline.envelope import sha256_hex

    data = body(rng, number)
    return ArchiveRecord(
        source=source,
        delivery_id=f"evt_{number:08d}",
        event_type="charge.succeeded",
        resource_key=f"cus_{number % 500}",
        received_at=format_time(received),
        body_sha256=sha256_hex(data),
        body_size=len(data),
        headers={"content-type": "application/json", "user-agent": "bench"},
        archived_at=format_time(received + timedelta(seconds=2)),
        outcome="applied",
        **ArchiveRecord.body_fields(data),
    )


def realistic_sources() -> list[Any]:
    """The first 4 sources ``bench_archive_size`` uses (the sources file's, enabled)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_archive_size import example_sources
    from webhook_pipeline.sources import load_sources

    enabled = [s for s in example_sources().values() if s.enabled]
    return ([s for s in enabled if s.name in load_sources()] or enabled)[: len(SOURCES)]


def objects(total: int, rng: random.Random, kind: str = "letters") -> list[tuple[str, bytes]]:
    """The archive objects of ``total`` deliveries, bodies of ``kind`` (``letters`` or
    ``realistic``)."""
    from webhook_pipeline.archive.record import encode_object, hour_of, object_key

    if kind == "realistic":
        from bench_archive_size import record as realistic

        resolved = realistic_sources()
        names = [s.name for s in resolved]
    else:
        names = list(SOURCES)
    cells = [(s, h) for h in range(HOURS) for s in range(len(names))]
    per_cell = total // len(cells)
    out = []
    number = 0
    for source, hour in cells:
        records = []
        for i in range(per_cell):
            number += 1
            received = START + timedelta(hours=hour, seconds=i * 3600 / per_cell)
            if kind == "realistic":
                one = realistic(resolved[source], rng, received, number)
            else:
                one = letters_records(names[source], number, received, rng)
            records.append(one)
            if rng.random() < 0.02:
                records.append(one.model_copy(update={"outcome": "retry"}))
        hour_text = hour_of(START + timedelta(hours=hour))
        key = object_key(names[source], hour_text, START, f"{len(out):032x}")
        out.append((key, encode_object(records)))
    return out


def cli(endpoint: str, extra: list[str]) -> tuple[float, str]:
    argv = [str(BIN / "webhook-pipeline"), "archive", "search", "--endpoint-url", endpoint,
            "--region", "us-east-1", "--archive-bucket", BUCKET, "--limit", "5",
            *extra]  # fmt: skip
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    return time.perf_counter() - started, done.stdout.splitlines()[0]


WHERE = {"letters": "data.object.amount>=9000", "realistic": "line_items[0].amount>=90000"}
BODIES = {"letters": "random letters", "realistic": "realistic"}


def run_kind(kind: str, total: int, repeat: int) -> dict[str, Any]:
    """Write one archive of ``kind`` bodies to a new moto server and time the searches."""
    import boto3

    port = free_port()
    server = start_moto(port)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
        s3.create_bucket(Bucket=BUCKET)
        built = time.perf_counter()
        written = objects(total, random.Random(23), kind)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda kv: s3.put_object(Bucket=BUCKET, Key=kv[0], Body=kv[1]), written))
        write_seconds = time.perf_counter() - built
        where = ["--where", WHERE[kind]]
        window = ["--from", (START + timedelta(hours=6)).isoformat(),
                  "--to", (START + timedelta(hours=12)).isoformat()]  # fmt: skip
        cases = {"6-hour window, every source, predicate": window + where,
                 "whole archive, predicate": where}  # fmt: skip
        results = []
        for name, extra in cases.items():
            runs = [cli(endpoint, extra) for _ in range(repeat)]
            seconds = [r[0] for r in runs]
            results.append({"case": name, "bodies": BODIES[kind], "argv_filter": extra,
                            "first_line": runs[0][1],
                            "median_s": round(statistics.median(seconds), 3),
                            "runs_s": [round(s, 3) for s in seconds]})  # fmt: skip
            print(f"{kind}: {name}: {results[-1]['median_s']} s ({runs[0][1]})", flush=True)
    finally:
        server.terminate()
        server.wait(10)
    archive = {"bodies": BODIES[kind], "objects": len(written),
               "compressed_bytes": sum(len(d) for _, d in written),
               "write_s": round(write_seconds, 1)}  # fmt: skip
    return {"archive": archive, "results": results}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bodies", choices=("letters", "realistic", "both"), default="both")
    args = parser.parse_args()
    total = 10_000 if args.quick else 100_000
    sys.path.insert(0, str(ROOT / "layers" / "common"))
    sys.path.insert(0, str(ROOT / "bench"))
    kinds = ["letters", "realistic"] if args.bodies == "both" else [args.bodies]
    runs = [run_kind(kind, total, args.repeat) for kind in kinds]
    first = runs[0]["archive"]
    out = {
        "deliveries": total,
        "objects": first["objects"],
        "compressed_bytes": first["compressed_bytes"],
        "body_bytes": 2048,
        "sources": len(SOURCES),
        "hours": HOURS,
        "s3": "moto server, own process, HTTP",
        "cpus": os.cpu_count(),
        "write_s": first["write_s"],
        "target_s": 5.0,
        "archives": [r["archive"] for r in runs],
        "results": [c for r in runs for c in r["results"]],
    }
    name = "archive_search.quick.json" if args.quick else "archive_search.json"
    path = ROOT / "bench" / "results" / name
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
