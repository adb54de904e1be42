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


def figures(results: Results) -> dict[str, str]:
    """Every block of docs/performance.md by name."""
    return {
        "perf-verify": verify_table(results),
        "perf-import-instructions": instructions_table(results),
        "perf-hot-resource": hot_resource_table(results),
    }
