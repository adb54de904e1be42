"""The local gateway's log lines never carry a credential from a request's query string (Mollie's
URL token, Meta's ``hub.verify_token``), while the function still receives the query as sent."""

from __future__ import annotations

import http.client
import logging
from pathlib import Path
from typing import Any

import pytest
from webhook_pipeline_ops.local.http_gateway import Gateway, Route
from webhook_pipeline_ops.local.resources import FunctionSpec, HttpRoute

pytestmark = pytest.mark.e2e

MARKER = "MarkerCredential0123456789abcdefXYZ"


class Recording:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.spec = FunctionSpec("Fake", "fake", Path("."), "app.h", 3, 128, {}, [], [], [])

    def invoke(self, event: dict[str, Any], deadline: float | None = None) -> Any:
        self.events.append(event)
        return {"statusCode": 202, "body": "{}"}


@pytest.mark.parametrize(
    ("method", "target", "kept"),
    [
        ("POST", f"/webhooks/mollie?token={MARKER}", "/webhooks/mollie?token=[redacted]"),
        (
            "GET",
            f"/webhooks/meta?hub.mode=subscribe&hub.verify_token={MARKER}&hub.challenge=11",
            "/webhooks/meta?hub.mode=subscribe&hub.verify_token=[redacted]&hub.challenge=11",
        ),
        (
            "GET",
            f"/webhooks/meta?hub%2Everify_token={MARKER}x&hub.challenge=1",
            "/webhooks/meta?hub%2Everify_token=[redacted]&hub.challenge=1",
        ),
    ],
)
def test_query_credentials_are_redacted_in_the_gateway_log(
    caplog: pytest.LogCaptureFixture, method: str, target: str, kept: str
) -> None:
    caplog.set_level(logging.DEBUG)
    fn = Recording()
    seen: list[str] = []
    gw = Gateway(
        "127.0.0.1",
        0,
        [Route(HttpRoute("ANY", "/webhooks/{source}"), fn)],  # type: ignore[arg-type]
        {},
        on_request=lambda m, path, status, ms: seen.append(f"{m} {path} -> {status}"),
    )
    gw.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=10)
        conn.request(method, target, body=b"id=tr_1" if method == "POST" else None)
        assert conn.getresponse().status == 202
        conn.close()
    finally:
        gw.stop()
    # The function gets the query exactly as sent (the token is what it verifies)
    assert MARKER in fn.events[0]["rawQueryString"]
    # The request log line (what the stack prints per request) shows the rest of the target
    assert seen == [f"{method} {kept} -> 202"]
    lines = "\n".join(r.getMessage() for r in caplog.records)
    assert MARKER not in lines
    assert kept in lines  # the handler's own request line, redacted the same way
