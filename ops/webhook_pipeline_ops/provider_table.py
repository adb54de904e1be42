"""The provider table of the README and docs/providers.md, generated from the registry.

Both files hold it between ``<!-- providers:start -->`` and ``<!-- providers:end -->``;
``webhook-pipeline providers --markdown`` prints it and a test compares, so it cannot drift.
"""

from __future__ import annotations

from pathlib import Path

from webhook_pipeline.providers import Provider, all_providers

START, END = "<!-- providers:start -->", "<!-- providers:end -->"
_ROOT = Path(__file__).resolve().parents[2]
#: The documents that hold the table.
DOCUMENTS = (_ROOT / "README.md", _ROOT / "docs" / "providers.md")


def _duration(seconds: int) -> str:
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def _body(p: Provider) -> str:
    """``yes``, the signed fields when only some are, or **no**; plus what else admits it."""
    signs = p.signs
    if signs.body:
        text = "yes"
    elif signs.body_fields:
        text = f"**{len(signs.body_fields)} fields of each event only**"
    else:
        text = "**no**"
    if p.signs_url:
        text += ", with the URL called"
    if p.credential_parameter:
        text += f" (a URL token `{p.credential_parameter}` admits it)"
    return text


def _row(cls: type[Provider]) -> list[str]:
    p = cls(dict(cls.example_options))
    signs = cls.signs
    handshakes = ", ".join(f"{h.name} ({h.method})" for h in cls.handshakes) or "-"
    ack = p.acknowledgement(202, {"status": "accepted"})
    acknowledgement = "JSON" if ack.content_type == "application/json" else f"`{ack.text()}`"
    tolerance = f"{p.tolerance_seconds} s" if p.tolerance_seconds else "-"
    return [
        f"`{cls.name}`",
        cls.title,
        signs.id or "**not signed**",
        f"{signs.timestamp} ({tolerance})" if signs.timestamp else "**none**",
        _body(p),
        "per event" if cls.batch_path is not None else "-",
        handshakes,
        _duration(cls.retry_horizon_seconds),
        acknowledgement,
        ", ".join(str(s) for s in sorted(cls.stop_statuses)) or "-",
    ]


def provider_table() -> str:
    """The Markdown table of every provider in the registry."""
    header = [
        "provider",
        "sender",
        "delivery id signed",
        "timestamp signed (tolerance)",
        "body signed",
        "batch",
        "handshakes",
        "retry horizon = TTL default",
        "acknowledgement",
        "never answered",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for cls in all_providers().values():
        lines.append("| " + " | ".join(_row(cls)) + " |")
    return "\n".join(lines)


def with_table(text: str) -> str:
    """``text`` with the part between the markers replaced by the current table."""
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    return f"{head}{START}\n{provider_table()}\n{END}{tail}"
