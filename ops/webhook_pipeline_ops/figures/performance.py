"""docs/performance.md's tables that are a committed result file as it is: the verification
cost per provider (``verify.json``), the import counted in instructions
(``import_instructions.json``) and the hot resource (``hot_resource.json``). The narrative of
earlier runs ("measured at commit X", run-against-run tables) is history and stays as written."""

from __future__ import annotations

from webhook_pipeline_ops.figures.render import Results, table


def verify_table(results: Results) -> str:
    """One row per provider, slowest median first (ties by name)."""
    providers = results("verify.json")["providers"]
    rows = [
        [name, f"{p['body_bytes']:,}", f"{p['median_us']:.1f}", f"{p['min_us']:.1f}"]
        for name, p in sorted(providers.items(), key=lambda kv: (-kv[1]["median_us"], kv[0]))
    ]
    header = ["provider", "body bytes", "verify median (us)", "fastest run (us)"]
    return table(header, "lrrr", rows)


def instructions_table(results: Results) -> str:
    """Each function's import in instructions, over its dependencies', against the target."""
    data = results("import_instructions.json")["results"]
    rows = [
        [
            name,
            f"{r['deps_import']:,}",
            f"{r['app_import']:,}",
            f"{r['app_import_over_deps']:.3f}",
            "yes" if r["target_met"] else "**no**",
        ]
        for name, r in data.items()
    ]
    header = [
        "function",
        "deps import (instructions)",
        "`import app` (instructions)",
        "app / deps",
        "target <= 1.10",
    ]
    return table(header, "lrrrl", rows)


def hot_resource_table(results: Results) -> str:
    """One row per case of the hot-resource run."""
    rows = []
    for r in results("hot_resource.json")["results"]:
        outcomes = r["outcomes"]
        rows.append(
            [
                r["case"],
                str(r["events"]),
                f"{r['settle_s']:.2f}",
                str(r["invocations"]),
                str(r["transactions"]),
                str(r["transaction_conflicts"]),
                f"{r['group_writes']} / {r['group_writes_not_committed']}",
                str(r["redeliveries"]),
                " / ".join(str(outcomes.get(k, 0)) for k in ("applied", "stale", "duplicate")),
                "yes" if r["final_watermarks_correct"] else "**no**",
            ]
        )
    header = [
        "case",
        "events",
        "settle (s)",
        "invocations",
        "transactions",
        "TransactionConflict",
        "group writes sent / not committed",
        "redeliveries",
        "applied / stale / duplicate",
        "final watermarks correct",
    ]
    return table(header, "lrrrrrrrrl", rows)


#: The handlers of the ingest-overhead bench, in the table's order.
HANDLERS = (
    "ours",
    "bare",
    "bare_observed",
    "powertools_redis",
    "powertools_redis_observed",
    "powertools_dynamodb",
)
#: What a function's first invocation builds (the timed import table's last column).
FIRST_USE = {
    "ingest": "`app.service()`: SQS and Secrets Manager clients, Redis client factory",
    "processor": "`app.service()`: DynamoDB client, thread pool",
    "replay": "`app.sqs_client()`",
}


def overhead_table(results: Results) -> str:
    """The committed ingest-overhead run: each handler's percentiles (ms), round trips and ours
    over it."""
    data = results("ingest_overhead.json")
    rows = []
    for handler in HANDLERS:
        for delivery in ("new", "duplicate"):
            ms, calls = data["ms"][handler][delivery], data["per_request"][handler][delivery]
            over = data["ours_over"][delivery].get(handler)
            rows.append(
                [
                    f"`{handler}`",
                    delivery,
                    f"{ms['wall_p50']:.3f}",
                    f"{ms['wall_p99']:.2f}",
                    f"{ms['cpu_p50']:.3f}",
                    f"{ms['cpu_p99']:.3f}",
                    f"{calls['redis_round_trips']:.0f} ({calls['redis_server_commands']:.0f})",
                    f"{calls['aws_calls']:.0f}",
                    f"{over['wall_p50']:.2f} / {over['cpu_p50']:.2f}" if over else "-",
                ]
            )
    header = ["handler", "delivery", "wall p50", "wall p99", "CPU p50", "CPU p99"]
    header += ["Redis round trips (server commands)", "AWS calls"]
    header += ["ours / this (wall p50 / CPU p50)"]
    return table(header, "llrrrrrrr", rows)


def import_table(results: Results) -> str:
    """The timed import (s) of each function against its dependencies', and its first use."""
    data = results("import.json")["results"]
    rows = [
        [
            name,
            f"{data[name]['deps_import_s']:.4g}",
            f"{data[name]['app_import_s']:.4g}",
            f"{data[name]['app_import_over_deps']:.3f}",
            "yes" if data[name]["target_met"] else "**no**",
            f"{data[name]['first_use_s']:.4g} ({use})",
        ]
        for name, use in FIRST_USE.items()
    ]
    header = ["function", "deps import (s)", "`import app` (s)", "app / deps"]
    header += ["target <= 1.10", "first invocation (s)"]
    return table(header, "lrrrlr", rows)


def before_after_table(results: Results) -> str:
    """Ingest's import and first invocation before (the given revision) and after."""
    data = results("import.json")["results"]["ingest_before_after"]
    before, after = data["before"], data["after"]
    keys = ("import_s", "first_use_s", "total_s")
    rows = [
        [
            f"before ({data['before_revision']}: every settings class built at import, the "
            "negated SQS pattern)",
            *(f"{before[k]:.4f}" for k in keys),
        ],
        ["after (this tree)", *(f"{after[k]:.4f}" for k in keys)],
        ["after / before", *(f"{after[k] / before[k]:.3f}" for k in keys)],
    ]
    return table(["", "import (s)", "first invocation (s)", "total (s)"], "lrrr", rows)


def import_ratios(results: Results, name: str, target: float) -> str:
    """``ingest 1.093 (target 1.15: met), processor 1.048, replay 1.041`` from ``name``."""
    data = results(name)["results"]
    ratios = {f: r["app_import_over_deps"] for f, r in data.items() if f in FIRST_USE}
    met = "met" if ratios["ingest"] <= target else "**not met**"
    return f"ingest {ratios['ingest']:.3f} (target {target:.2f}: {met}), " + ", ".join(
        f"{f} {v:.3f}" for f, v in ratios.items() if f != "ingest"
    )


def overhead_duplicates(results: Results) -> str:
    """The committed run's duplicate wall p50 (ms) of ours and the three closest handlers."""
    ms = results("ingest_overhead.json")["ms"]
    names = {
        "bare": "bare",
        "bare_observed": "`bare_observed`",
        "powertools_redis": "Powertools Redis",
    }
    others = ", ".join(f"{t} {ms[h]['duplicate']['wall_p50']:.3f}" for h, t in names.items())
    return f"ours duplicate {ms['ours']['duplicate']['wall_p50']:.3f} ({others})"


def own_import(results: Results) -> str:
    """Ingest's own import in instructions, over its dependencies'."""
    ingest = results("import_instructions.json")["results"]["ingest"]
    own = (ingest["app_import"] - ingest["deps_import"]) / 1e6
    return f"about {own:,.0f} million instructions over its dependencies' " + (
        f"{ingest['deps_import'] / 1e6:,.0f} million"
    )


def hot_resource(results: Results) -> dict[str, str]:
    """The hot-resource prose: the retries left to SQS, tried again in place and coalesced."""
    rows = results("hot_resource.json")["results"]
    hot = [r for r in rows if r["case"].startswith("one resource")]
    once, in_place = hot[0], next(r for r in hot[1:] if "coalesced" not in r["case"])
    grouped = next(r for r in hot if "coalesced" in r["case"])
    spread = {r["transactions"] for r in rows if r not in hot}
    return {
        "perf-hot-retries": f"{once['transaction_conflicts']:,} `TransactionConflict` "
        f"cancellations for {once['events']:,} events",
        "perf-hot-in-place": f"redeliveries fell from {once['redeliveries']:,} to "
        f"{in_place['redeliveries']:,}",
        "perf-hot-coalesced": f"transactions fell from {in_place['transactions']:,} to "
        f"{grouped['transactions']:,} ({in_place['transactions'] / grouped['transactions']:.1f}x "
        f"fewer), conflicts from {in_place['transaction_conflicts']:,} to "
        f"{grouped['transaction_conflicts']:,}, redeliveries from {in_place['redeliveries']:,} to "
        f"{grouped['redeliveries']:,} and the settle time from {in_place['settle_s']:.2f} s to "
        f"{grouped['settle_s']:.2f} s ({grouped['settle_s'] / in_place['settle_s']:.2f}x)",
        "perf-hot-not-committed": f"{grouped['group_writes_not_committed']} of "
        f"{grouped['group_writes']}",
        "perf-hot-spread": f"the same {' or '.join(f'{t:,}' for t in sorted(spread))} "
        "transactions either way",
    }


def figures(results: Results) -> dict[str, str]:
    """Every block of docs/performance.md by name."""
    return {
        "perf-overhead": overhead_table(results),
        "perf-overhead-duplicates": overhead_duplicates(results),
        "perf-import": import_table(results),
        "perf-import-before-after": before_after_table(results),
        "perf-import-traced-instructions": import_ratios(
            results, "import_instructions_traced.json", 1.15
        ),
        "perf-import-traced": import_ratios(results, "import_traced.json", 1.15),
        "perf-own-import": own_import(results),
        "perf-verify": verify_table(results),
        "perf-import-instructions": instructions_table(results),
        "perf-hot-resource": hot_resource_table(results),
        **hot_resource(results),
    }
