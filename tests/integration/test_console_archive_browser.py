"""The console's Archive page in a real headless Chromium (Selenium): the console's own uvicorn
server on a thread over an archive bucket on in-process moto
(:mod:`tests.integration.archive_console_data`), as ``tests/integration/test_console.py`` serves
it; the browser set up as ``tests/e2e/test_console_browser.py`` does (screenshots to the same
folder).

A browser fills the filter form, submits it, sees the count and the matches, opens one
delivery's page with its body and headers, and a body holding a script shows it as text.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from webhook_pipeline_ops.aws import Aws
from webhook_pipeline_ops.cli import build_parser
from webhook_pipeline_ops.console.app import create_app
from webhook_pipeline_ops.console.backend import Backend, Target
from webhook_pipeline_ops.console.server import ConsoleServer, bind

from tests.e2e.test_console_browser import (
    CHROMEDRIVER,
    CHROMIUM,
    HAVE_CHROMIUM,
    headless_chromium,
    page_errors,
    shot,
    until,
)
from tests.helpers import create_deliveries_table
from tests.integration.archive_console_data import BUCKET, SCRIPT, fill_archive

pytestmark = [
    pytest.mark.integration,
    pytest.mark.browser,
    pytest.mark.skipif(
        not HAVE_CHROMIUM,
        reason=f"chromium and chromium-driver are not installed ({CHROMIUM}, {CHROMEDRIVER}): "
        "apt-get install chromium chromium-driver (.ci/run does)",
    ),
]


@pytest.fixture
def console(aws: None) -> Iterator[str]:
    """The console's URL, serving the archive of :func:`fill_archive`."""
    fill_archive(boto3.client("s3"))
    create_deliveries_table(boto3.client("dynamodb"), "stk-deliveries")
    argv = ["console", "--queue-url", "q", "--dlq-url", "d", "--table", "stk-deliveries"]
    backend = Backend(
        Aws(build_parser().parse_args([*argv, "--archive-bucket", BUCKET])),
        Target(local=False, label="stack stk", stack="stk", region="us-east-1"),
    )
    sock = bind("127.0.0.1", 0)
    host = f"127.0.0.1:{sock.getsockname()[1]}"
    server = ConsoleServer(
        create_app(backend, allowed_hosts=[host], token="t0ken-0123456789"), sock
    )
    server.start()
    try:
        yield f"http://{host}"
    finally:
        server.stop()


@pytest.fixture
def browser() -> Iterator[Any]:
    with headless_chromium() as driver:
        yield driver


def fill(driver: Any, **fields: str) -> None:
    """Type into the form's fields; a ``source``/``outcome`` is chosen in its select. A
    date-time input's value is set by script (typing into it depends on the browser's locale)."""
    from selenium.webdriver.support.ui import Select

    for name, value in fields.items():
        element = driver.find_element("css selector", f'#archive-form [name="{name}"]')
        if element.tag_name == "select":
            Select(element).select_by_value(value)
        elif element.get_attribute("type") == "datetime-local":
            driver.execute_script("arguments[0].value = arguments[1]", element, value)
        else:
            element.clear()
            element.send_keys(value)


def test_search_then_open_a_delivery_with_its_body_and_headers(console: str, browser: Any) -> None:
    # Given the Archive page, reached from the nav
    browser.get(f"{console}/deliveries")
    browser.find_element("link text", "Archive").click()
    until(browser, lambda d: d.find_elements("id", "archive-form"))
    assert "active" in browser.find_element("link text", "Archive").get_attribute("class")
    # When the form is filled and submitted
    fill(
        browser,
        source="stripe",
        event_type="invoice.*",
        delivery_id="evt_00",
        where="amount != 4",
        outcome="applied",
    )
    fill(browser, **{"from": "2026-03-01T12:00:00", "to": "2026-03-01T13:00:00"})
    browser.find_element("id", "archive-search").click()
    # Then the count and the matches: even evt_00N, but 4, applied (evt_000 is stale)
    count = until(browser, lambda d: d.find_elements("id", "match-count"))[0]
    assert count.text == "3"
    listed = [
        row.get_attribute("data-delivery-id")
        for row in browser.find_elements("css selector", "#archive-matches tbody tr")
    ]
    assert listed == ["evt_002", "evt_006", "evt_008"]
    # the form keeps what was asked
    assert browser.find_element("name", "where").get_attribute("value") == "amount != 4"
    shot(browser, "20-archive-search")
    # When one delivery is opened
    browser.find_element("link text", "evt_006").click()
    until(browser, lambda d: d.find_elements("id", "archive-body-json"))
    # Then its signed metadata, headers and body
    assert browser.find_element("id", "delivery-id").text == "evt_006"
    field = {
        e.get_attribute("data-field"): e.text
        for e in browser.find_elements("css selector", "#record dd")
    }
    assert field["source"] == "stripe" and field["verified_with"] == "current"
    assert field["sequence"] == "6" and field["outcome"] == "applied"
    signed = browser.find_element("id", "signed-headers").text
    assert "stripe-signature" in signed and "[redacted]" in signed
    assert "content-type application/json" in browser.find_element("id", "headers").text
    body = browser.find_element("id", "archive-body-json").get_attribute("textContent")
    assert '"amount": 6' in body and '"id": "evt_006"' in body
    shot(browser, "21-archive-delivery")
    assert page_errors(browser) == []


def test_a_script_in_an_archived_body_is_text(console: str, browser: Any) -> None:
    browser.get(f"{console}/archive?source=stripe&delivery_id=evt_script")
    browser.find_element("link text", "evt_script").click()
    view = until(browser, lambda d: d.find_elements("css selector", ".body-view"))[0]
    raw = view.find_element("id", "archive-body-raw").get_attribute("textContent")
    assert SCRIPT in raw
    assert browser.execute_script("return window.__pwned === undefined")
    assert view.find_elements("css selector", "script, img") == []
    headers = browser.find_element("id", "headers").text
    assert "<b>bold</b>" in headers  # text, not markup
    assert html.escape("<b>") not in headers
    shot(browser, "22-archive-script-body")
    assert page_errors(browser) == []
