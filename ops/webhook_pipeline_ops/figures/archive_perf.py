"""docs/performance.md's archive tables: the acknowledgement against the code before the archive
(``archive_ack.json``), the local search over 100,000 archived deliveries
(``archive_search.json``) and the replay's rate (``replay_rate.json``)."""

from __future__ import annotations

from webhook_pipeline_ops.figures.render import Results, table


def ack_table(results: Results) -> str:
    """Per delivery kind: instructions per request before and after, their ratio, and the timed
    p50s' ratios beside them."""
    data = results("archive_ack.json")
    counted, timed = data["instructions_per_request"], data["timed_ratio_after_over_before"]
    target = data["target"]["new_ratio_at_most"]
    rows = []
    for kind in ("new", "duplicate"):
        ratio = data["instructions_ratio_after_over_before"][kind]["instructions"]
        rows.append(
            [
                kind,
                f"{counted['before'][kind]:,}",
                f"{counted['after'][kind]:,}",
                f"{ratio:.3f}",
                "yes" if ratio <= target else "**no**",
                f"{timed[kind]['wall_p50']:.2f} / {timed[kind]['cpu_p50']:.2f}",
            ]
        )
    header = [
        "delivery",
        f"before ({data['setup']['baseline']}), instructions",
        "after, instructions",
        "after / before",
        f"target <= {target}",
        "timed after / before (wall p50 / CPU p50)",
    ]
    return table(header, "lrrrll", rows)


def search_table(results: Results) -> str:
    """One row per timed search case: which bodies, the filter, the matches, the median."""
    data = results("archive_search.json")
    rows = [
        [
            r.get("bodies", "random letters"),
            r["case"],
            f"`{' '.join(r['argv_filter'])}`",
            r["first_line"].split(" (")[0],
            f"{r['median_s']:.2f}",
            "yes" if r["median_s"] < data["target_s"] else "**no**",
        ]
        for r in data["results"]
    ]
    header = ["bodies", "case", "filter", "matches", "median (s)", f"under {data['target_s']:g} s"]
    return table(header, "llllrl", rows)


def search_setup(results: Results) -> str:
    """The search bench's fixture in words (each archive's gzip size)."""
    data = results("archive_search.json")
    archives = data.get("archives") or [
        {"bodies": "random letters", "compressed_bytes": data["compressed_bytes"]}
    ]
    sizes = ", ".join(
        f"{a['compressed_bytes'] / 1e6:,.0f} MB of gzip with {a['bodies']} bodies" for a in archives
    )
    return (
        f"{data['deliveries']:,} deliveries of {data['body_bytes']:,}-byte bodies, "
        f"{data['sources']} sources over {data['hours']} hours, in {data['objects']:,} objects "
        f"({sizes}) on a {data['s3']}, {data['cpus']} cores"
    )


def replay_rate_table(results: Results) -> str:
    """Requested against achieved rate, per case."""
    data = results("replay_rate.json")
    rows = [
        [
            f"{c['requested_per_second']:g}",
            f"{c['sent']:,}",
            f"{c['achieved_per_second']:.2f}",
            f"{c['deviation'] * 100:+.2f} %",
            "yes" if c["within_5_percent"] else "**no**",
        ]
        for c in data["cases"]
    ]
    header = ["requested (/s)", "sent", "achieved (/s)", "deviation", "within 5 %"]
    return table(header, "rrrrl", rows)


def figures(results: Results) -> dict[str, str]:
    """Every archive block of docs/performance.md by name."""
    return {
        "perf-archive-ack": ack_table(results),
        "perf-archive-search": search_table(results),
        "perf-archive-search-setup": search_setup(results),
        "perf-replay-rate": replay_rate_table(results),
    }
