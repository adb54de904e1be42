"""Pure parts of the console and the CLI's help: body display (escaping, caps, JSON tree), the
request checks of the guard, reST markup removal, the vendored chart library's checksums, and the
routes reading their application's own state."""

from __future__ import annotations

import asyncio
import hashlib
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from webhook_pipeline_ops.console import bodies
from webhook_pipeline_ops.console.app import create_app
from webhook_pipeline_ops.console.backend import Target
from webhook_pipeline_ops.console.security import ConsoleGuard, host_port
from webhook_pipeline_ops.output import plain_text

pytestmark = pytest.mark.unit

VENDOR = Path(bodies.__file__).parent / "static" / "vendor"


def test_body_view_caps_and_replaces_invalid_utf8() -> None:
    raw = b"\xff" + b"a" * (bodies.MAX_SHOWN_BYTES + 10)
    view = bodies.body_view(raw, "envelope")
    assert view.truncated
    assert view.size == len(raw)
    assert view.text.startswith("\ufffd")
    assert len(view.text.encode("utf-8")) <= bodies.MAX_SHOWN_BYTES + 3
    assert view.tree is None  # a truncated body is not parsed


def test_json_tree_escapes_keys_and_strings() -> None:
    doc = {"<k>": "</details><script>x()</script>", "n": [1, 2.5, True, None], "e": {}}
    tree = str(bodies.json_tree(doc))
    assert "<script>" not in tree
    assert "&lt;script&gt;x()&lt;/script&gt;" in tree
    assert "&#34;&lt;k&gt;&#34;" in tree
    assert tree.count("<details") == tree.count("</details>")
    for literal in ('class="j-num">1<', 'class="j-num">2.5<', "true", "null"):
        assert literal in tree


def test_json_tree_stops_at_its_depth_and_node_budget() -> None:
    deep: object = "leaf"
    for _ in range(bodies.MAX_TREE_DEPTH + 5):
        deep = [deep]
    assert "deeper levels in the text view" in str(bodies.json_tree(deep))
    wide = list(range(bodies.MAX_TREE_NODES * 2))
    tree = str(bodies.json_tree(wide))
    assert tree.count('class="j-num"') < bodies.MAX_TREE_NODES
    assert "…" in tree


def test_claim_check_prefix_is_the_ingest_layout() -> None:
    digest = hashlib.sha256(b"evt_1").hexdigest()[:32]
    assert bodies.claim_check_prefix("stripe", "evt_1") == f"bodies/stripe/{digest}/"


@pytest.mark.parametrize(
    ("method", "headers", "refused"),
    [
        ("GET", {"host": "127.0.0.1:8380"}, None),
        ("GET", {"host": "LOCALHOST:8380"}, 400),
        ("GET", {"host": "127.0.0.1:8380", "sec-fetch-site": "cross-site"}, 403),
        (
            "GET",
            {
                "host": "127.0.0.1:8380",
                "sec-fetch-site": "cross-site",
                "sec-fetch-mode": "navigate",
            },
            None,
        ),
        ("GET", {"host": "127.0.0.1:8380", "sec-fetch-site": "same-site"}, None),
        ("DELETE", {"host": "127.0.0.1:8380", "origin": "http://127.0.0.1:8380"}, 405),
        (
            "POST",
            {"host": "127.0.0.1:8380", "origin": "http://127.0.0.1:8380", "x-console-token": "t"},
            None,
        ),
        (
            "POST",
            {"host": "127.0.0.1:8380", "sec-fetch-site": "same-origin", "x-console-token": "t"},
            None,
        ),
        (
            "POST",
            {"host": "127.0.0.1:8380", "origin": "http://127.0.0.1:8381", "x-console-token": "t"},
            403,
        ),
        ("POST", {"host": "127.0.0.1:8380", "origin": "http://127.0.0.1:8380"}, 403),
    ],
)
def test_guard_decisions(method: str, headers: dict[str, str], refused: int | None) -> None:
    guard = ConsoleGuard(app=None, allowed_hosts=["127.0.0.1:8380"], token="t")
    decision = guard.refusal(method, headers)
    assert (decision[0] if decision else None) == refused


@pytest.mark.parametrize(
    "origin",
    [
        "http://127.0.0.1:8380.evil.example",
        "http://127.0.0.1:83801",
        "http://127.0.0.1:8380@evil.example",
        "http://127.0.0.1:8380/",
        "https://127.0.0.1:8380",
        "http://127.0.0.1",
    ],
)
def test_a_state_change_from_an_origin_that_only_starts_like_ours_is_refused(origin: str) -> None:
    """The Origin must be the console's own, whole: another site whose origin begins with it
    (a name under ``127.0.0.1:8380.``, a longer port) is refused even with the token and without
    ``Sec-Fetch-Site`` (a browser that sends none)."""
    guard = ConsoleGuard(app=None, allowed_hosts=["127.0.0.1:8380"], token="t")
    own = {"host": "127.0.0.1:8380", "origin": "http://127.0.0.1:8380", "x-console-token": "t"}
    assert guard.refusal("POST", own) is None
    assert guard.refusal("POST", own | {"origin": origin}) == (403, "cross-origin request refused")


def test_host_port_brackets_ipv6() -> None:
    assert host_port("::1", 8380) == "[::1]:8380"
    assert host_port("127.0.0.1", 0) == "127.0.0.1:0"


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        (":func:`~webhook_pipeline.replay.run.replay`", "replay"),
        (":data:`REGISTRARS`", "REGISTRARS"),
        (":class:`the report <ReplayReport>`", "the report"),
        (":meth:`Aws.client`", "Aws.client"),
        ("``webhook-pipeline send`` and ``--dry-run``", "`webhook-pipeline send` and `--dry-run`"),
        ("plain text, `single` stays", "plain text, `single` stays"),
    ],
)
def test_plain_text_strips_rest_markup(text: str, plain: str) -> None:
    assert plain_text(text) == plain


def test_vendored_chart_library_matches_its_recorded_checksums() -> None:
    readme = (VENDOR / "README.md").read_text()
    recorded = dict(
        (name, digest) for digest, name in re.findall(r"^([0-9a-f]{64})  (\S+)$", readme, re.M)
    )
    assert set(recorded) == {"uplot/uPlot.iife.min.js", "uplot/uPlot.min.css"}
    for name, digest in recorded.items():
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == digest
    assert "MIT" in (VENDOR / "uplot" / "LICENSE").read_text()


def test_pages_load_nothing_from_another_origin() -> None:
    folder = Path(bodies.__file__).parent
    for path in [*folder.glob("templates/*.html"), *folder.glob("static/*.js")]:
        text = path.read_text()
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", text), path
        assert not re.search(r"<[^>]*\son[a-z]+=", text), path  # CSP: no inline handlers
        assert "<script>" not in text, path  # scripts only from files


def test_two_apps_each_serve_their_own_backend_and_token() -> None:
    # Given two consoles in one process (module-level routes), each with its backend and token
    def console(label: str, token: str) -> Any:
        backend = SimpleNamespace(
            target=Target(local=False, label=label, stack=label, region="us-east-1"),
            health=lambda: {"stack": label},
        )
        return create_app(backend, allowed_hosts=["testserver"], token=token)  # type: ignore[arg-type]

    async def ask(app: Any, path: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            return await client.get(path)

    first, second = console("stack-one", "token-one"), console("stack-two", "token-two")
    # When both are asked, the one created last first
    pages = {
        name: asyncio.run(ask(app, "/health")).text for name, app in (("2", second), ("1", first))
    }
    data = {
        name: asyncio.run(ask(app, "/api/health")).json()
        for name, app in (("2", second), ("1", first))
    }
    # Then each page and each JSON answer comes from its own application's state
    assert 'content="token-one"' in pages["1"] and "stack-one" in pages["1"]
    assert 'content="token-two"' in pages["2"] and "stack-two" in pages["2"]
    assert "token-two" not in pages["1"] and "stack-two" not in pages["1"]
    assert data == {"1": {"stack": "stack-one"}, "2": {"stack": "stack-two"}}
