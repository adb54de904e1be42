"""Archive search benchmark (not a test): ``webhook-pipeline archive search`` over 100,000
archived deliveries in the local stack's S3.

The archive is written as the archiver writes it: gzip JSON Lines objects of 1,000 records, one
per (source, hour), 4 sources over 25 hours, 2 KB JSON bodies, plus a second attempt archived for
2 % of the deliveries (what a retried batch leaves; deduplicated on read). S3 is a moto server in
its own process, over HTTP, as ``webhook-pipeline local run`` serves it: the search pays the
requests, the transfer and the decompression a local search pays (in-process moto would share the
search's interpreter and skip the HTTP path).

Timed: the CLI as a user runs it (a new process: interpreter start, imports, listing, reading,
deduplicating, filtering, printing ``--limit 5``), for a 6-hour window of every source with a
predicate, and for the whole archive with a predicate (every object read). Median of
``--repeat`` runs (3). Target: under 5 s for the whole archive (issue 23, item 6).

Run: ``.venv/bin/python bench/bench_archive_search.py [--quick]`` (``--quick``: 10,000
deliveries); figures go to ``bench/results/archive_search.json`` (``archive_search.quick.json``,
git-ignored).
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


def objects(total: int, rng: random.Random) -> list[tuple[str, bytes]]:
    from webhook_pipeline.archive.record import (
        ArchiveRecord,
        encode_object,
        format_time,
        hour_of,
        object_key,
    )
    from webhook_pipeline.envelope import sha256_hex

    cells = [(s, h) for h in range(HOURS) for s in SOURCES]
    per_cell = total // len(cells)
    out = []
    number = 0
    for source, hour in cells:
        records = []
        for i in range(per_cell):
            number += 1
            data = body(rng, number)
            received = START + timedelta(hours=hour, seconds=i * 3600 / per_cell)
            fields: dict[str, Any] = dict(
                source=source,
                delivery_id=f"evt_{number:08d}",
                event_type="charge.succeeded",
                resource_key=f"cus_{number % 500}",
                received_at=format_time(received),
                body_sha256=sha256_hex(data),
                body_size=len(data),
                headers={"content-type": "application/json", "user-agent": "bench"},
                archived_at=format_time(received + timedelta(seconds=2)),
                **ArchiveRecord.body_fields(data),
            )
            records.append(ArchiveRecord(outcome="applied", **fields))
            if rng.random() < 0.02:
                records.append(ArchiveRecord(outcome="retry", **fields))
        key = object_key(source, hour_of(START + timedelta(hours=hour)), START, f"{len(out):032x}")
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    total = 10_000 if args.quick else 100_000
    sys.path.insert(0, str(ROOT / "layers" / "common"))
    import boto3

    port = free_port()
    server = start_moto(port)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
        s3.create_bucket(Bucket=BUCKET)
        built = time.perf_counter()
        written = objects(total, random.Random(23))
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda kv: s3.put_object(Bucket=BUCKET, Key=kv[0], Body=kv[1]), written))
        write_seconds = time.perf_counter() - built
        where = ["--where", "data.object.amount>=9000"]
        window = ["--from", (START + timedelta(hours=6)).isoformat(),
                  "--to", (START + timedelta(hours=12)).isoformat()]  # fmt: skip
        cases = {"6-hour window, every source, predicate": window + where,
                 "whole archive, predicate": where}  # fmt: skip
        results = []
        for name, extra in cases.items():
            runs = [cli(endpoint, extra) for _ in range(args.repeat)]
            seconds = [r[0] for r in runs]
            results.append({"case": name, "argv_filter": extra, "first_line": runs[0][1],
                            "median_s": round(statistics.median(seconds), 3),
                            "runs_s": [round(s, 3) for s in seconds]})  # fmt: skip
            print(f"{name}: {results[-1]['median_s']} s ({runs[0][1]})", flush=True)
    finally:
        server.terminate()
        server.wait(10)
    out = {
        "deliveries": total,
        "objects": len(written),
        "compressed_bytes": sum(len(d) for _, d in written),
        "body_bytes": 2048,
        "sources": len(SOURCES),
        "hours": HOURS,
        "s3": "moto server, own process, HTTP",
        "cpus": os.cpu_count(),
        "write_s": round(write_seconds, 1),
        "target_s": 5.0,
        "results": results,
    }
    name = "archive_search.quick.json" if args.quick else "archive_search.json"
    path = ROOT / "bench" / "results" / name
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
