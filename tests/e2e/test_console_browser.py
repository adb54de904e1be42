"""The web console in a real headless Chromium (Selenium) against the local stack, with traffic
from the simulator (``webhook-pipeline send``).

Given the local stack (``local_stack``) and ``webhook-pipeline console --local`` as subprocesses,
a browser sees the sent delivery ids appear in the deliveries list (live, without a reload), a
resource's deliveries in sequence order with the stale ones marked, a poison message in the DLQ
that a dry run lists and a confirmed replay moves back (its delivery page then says applied), a
cross-origin POST to the replay refused, and a ``<script>`` in a body shown as text.
Screenshots of every page go to ``tests/e2e/screenshots/`` (not committed; ``CONSOLE_SCREENSHOTS``
overrides the folder).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import requests

from tests.conftest import ROOT, free_port
from tests.e2e.conftest import LocalStack, wait_for

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
HAVE_CHROMIUM = Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()
SCREENSHOTS = Path(os.environ.get("CONSOLE_SCREENSHOTS") or ROOT / "tests" / "e2e" / "screenshots")
BROWSER_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1400,1100",
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.browser,
    pytest.mark.skipif(
        not HAVE_CHROMIUM,
        reason=f"chromium and chromium-driver are not installed ({CHROMIUM}, {CHROMEDRIVER}): "
        "apt-get install chromium chromium-driver (.ci/run does)",
    ),
]


@dataclass
class Console:
    """``webhook-pipeline console --local`` running as a subprocess."""

    process: subprocess.Popen[str]
    url: str

    def page(self, path: str, **params: str) -> str:
        return f"{self.url}{path}" + (f"?{urlencode(params)}" if params else "")


@pytest.fixture(scope="module")
def console(local_stack: LocalStack) -> Iterator[Console]:
    port = free_port()
    script = Path(sys.executable).parent / "webhook-pipeline"
    env = {**os.environ, "WEBHOOK_PIPELINE_LOCAL_DIR": str(local_stack.state_dir)}
    process = subprocess.Popen(  # stopped by its PID below
        [str(script), "console", "--local", "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if process.poll() is not None:
            pytest.fail(f"the console exited: {process.stdout.read() if process.stdout else ''}")
        with contextlib.suppress(requests.RequestException):
            return requests.get(url + "/deliveries", timeout=2).status_code == 200
        return False

    try:
        wait_for(up, timeout=30, what="the console to answer")
        yield Console(process, url)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            output, _ = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
    # A clean stop on SIGTERM: exit code 0, after its own message.
    assert process.returncode == 0, output
    assert f"webhook-pipeline console: {url}/" in output
    assert "console stopped." in output


@contextlib.contextmanager
def headless_chromium() -> Iterator[Any]:
    """Debian's Chromium driven headless by Selenium, its console log kept; quit on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for flag in BROWSER_FLAGS:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with headless_chromium() as driver:
        yield driver


def shot(driver: Any, name: str) -> None:
    """Save a screenshot of the current page (every test leaves one per page it shows)."""
    assert driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))


def page_errors(driver: Any) -> list[str]:
    """The browser console's errors since the last call (CSP violations, script errors)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def until(driver: Any, condition: Any, timeout: float = 30) -> Any:
    """Poll ``condition`` until it is truthy. A live page replaces its rows while a condition
    reads them: an element gone stale in between means "not yet", and the next poll reads the
    new rows."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(
        driver, timeout, poll_frequency=0.2, ignored_exceptions=(StaleElementReferenceException,)
    ).until(condition)


def send(stack: LocalStack, *argv: str) -> list[dict[str, str]]:
    """``webhook-pipeline send --list ARGV`` against the stack; the listed deliveries."""
    script = Path(sys.executable).parent / "webhook-pipeline"
    env = {**os.environ, "WEBHOOK_PIPELINE_LOCAL_DIR": str(stack.state_dir)}
    done = subprocess.run(
        [str(script), "send", "--url", stack.api_url, "--list", *argv],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("SOURCE"))
    listed = []
    for line in lines[start + 1 :]:
        if line.startswith("sent "):
            break
        source, delivery_id, resource_key, status, *rest = line.split()
        listed.append(
            {
                "source": source,
                "delivery_id": delivery_id,
                "resource_key": resource_key,
                "status": status,
                "duplicate": "(duplicate)" in rest,
            }
        )
    return listed


def recorded(stack: LocalStack, source: str, delivery_id: str) -> dict[str, Any]:
    item: dict[str, Any] = wait_for(
        lambda: stack.delivery(source, delivery_id),
        timeout=60,
        what=f"{source}/{delivery_id} to be recorded",
    )
    return item


def row_ids(driver: Any, css: str) -> list[str]:
    from selenium.webdriver.common.by import By

    return [
        row.get_attribute("data-delivery-id") for row in driver.find_elements(By.CSS_SELECTOR, css)
    ]


# ------------------------------------------------------------------------------- deliveries


def test_the_deliveries_list_shows_the_sent_ids_as_they_arrive(
    local_stack: LocalStack, console: Console, browser: Any
) -> None:
    # Given the deliveries page open (live)
    browser.get(console.page("/deliveries"))
    until(browser, lambda d: d.find_element("id", "live").is_selected())
    page_errors(browser)
    # When the simulator sends deliveries from two providers, with duplicates
    sent = send(local_stack, "--source", "stripe,github", "--count", "3", "--duplicates", "0.34")
    unique = {(d["source"], d["delivery_id"]) for d in sent}
    assert len(unique) == 6 and any(d["duplicate"] for d in sent)
    for source, delivery_id in unique:
        recorded(local_stack, source, delivery_id)
    # Then they appear without a reload, each once, newest first
    until(
        browser,
        lambda d: {i for _, i in unique} <= set(row_ids(d, "#delivery-rows tr[data-delivery-id]")),
    )
    ids = row_ids(browser, "#delivery-rows tr[data-delivery-id]")
    assert sorted(i for i in ids if i in {d for _, d in unique}) == sorted(d for _, d in unique)
    times = [
        cell.text for cell in browser.find_elements("css selector", "#delivery-rows tr td.time")
    ]
    assert times == sorted(times, reverse=True)
    assert int(browser.find_element("id", "refreshed").get_attribute("data-refreshes")) >= 1
    shot(browser, "01-deliveries")

    # And a filter narrows the list to one source
    browser.get(console.page("/deliveries", source="github"))
    github = set(row_ids(browser, "#delivery-rows tr[data-delivery-id]"))
    assert {i for s, i in unique if s == "github"} <= github
    assert not github & {i for s, i in unique if s == "stripe"}
    shot(browser, "02-deliveries-github")
    assert page_errors(browser) == []


def test_a_resource_page_shows_applied_and_stale_in_sequence_order(
    local_stack: LocalStack, console: Console, browser: Any
) -> None:
    # Given 4 events of one Stripe customer sent in swapped pairs (the newer of each pair first)
    sent = send(
        local_stack, "--source", "stripe", "--count", "4", "--out-of-order", "--rate", "4",
        "--concurrency", "1",
    )  # fmt: skip
    [key] = {d["resource_key"] for d in sent}
    records = {d["delivery_id"]: recorded(local_stack, "stripe", d["delivery_id"]) for d in sent}
    by_sequence = sorted(records.values(), key=lambda r: r["sequence"])
    outcomes = [r["outcome"] for r in by_sequence]
    assert "stale" in outcomes and outcomes[-1] == "applied", outcomes

    # When its resource page is opened
    browser.get(console.page("/resource", source="stripe", key=key))
    # Then the deliveries are in sequence order, stale ones marked
    rows = browser.find_elements("css selector", "#history tbody tr[data-delivery-id]")
    assert [r.get_attribute("data-delivery-id") for r in rows] == [
        r["delivery_id"] for r in by_sequence
    ]
    assert [r.get_attribute("data-outcome") for r in rows] == outcomes
    assert [r.get_attribute("class") for r in rows] == outcomes  # stale rows are marked
    sequences = [int(r.find_element("css selector", "td.num").text) for r in rows]
    assert sequences == sorted(sequences)
    assert browser.find_element("id", "watermark").text == str(by_sequence[-1]["sequence"])
    stale = outcomes.index("stale")
    assert "arrived after a newer event" in rows[stale].text
    shot(browser, "03-resource")

    # And a stale delivery's own page says why it was not applied
    rows[stale].find_element("css selector", "td.id a").click()
    until(
        browser,
        lambda d: d.find_element("id", "delivery-id").text == by_sequence[stale]["delivery_id"],
    )
    assert "stale" in browser.find_element("css selector", 'dd[data-field="outcome"]').text
    shot(browser, "04-delivery-stale")
    assert page_errors(browser) == []


# ------------------------------------------------------------------------------- DLQ replay


class _EvilPage(BaseHTTPRequestHandler):
    """Another origin's page that tries to make the console replay (as a page in another tab)."""

    target = ""

    def do_GET(self) -> None:
        body = f"""<!doctype html><title>not the console</title>
<form id="f" method="POST" action="{self.target}/api/replay" enctype="text/plain">
<input type="hidden" name='{{"deliveries": [["stripe", "x"]], "dry_run": false, "a": "' value='"}}'>
</form>
<script>document.getElementById("f").submit();</script>""".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def evil_site(target: str) -> Iterator[str]:
    handler = type("Evil", (_EvilPage,), {"target": target})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def dlq_holds(stack: LocalStack, delivery_id: str) -> bool:
    code, out = stack.cli("dlq", "peek", "--local", "--json")
    assert code == 0, out
    return any(row.get("delivery_id") == delivery_id for row in json.loads(out))


def test_a_dlq_replay_dry_run_then_replay_moves_a_poison_message_back(
    local_stack: LocalStack, console: Console, browser: Any
) -> None:
    from webhook_pipeline_ops.local.demo import poison_envelope
    from webhook_pipeline_ops.simulator.deliveries import payload

    # Given a poison message (a claim-check envelope whose body is missing) in the DLQ
    delivery_id = f"evt_{uuid.uuid4().hex[:20]}"
    customer = f"cus_{uuid.uuid4().hex[:8]}"
    sequence = int(time.time())
    body, _ = payload(
        "stripe", delivery_id=delivery_id, resource=customer, sequence=sequence,
        event_type="customer.deleted",
    )  # fmt: skip
    message, key = poison_envelope(
        local_stack.outputs["PayloadBucketName"], body, source="stripe", delivery_id=delivery_id,
        resource=customer, sequence=sequence, event_type="customer.deleted",
    )  # fmt: skip
    local_stack.client("sqs").send_message(
        QueueUrl=local_stack.outputs["MainQueueUrl"], MessageBody=message
    )
    wait_for(lambda: dlq_holds(local_stack, delivery_id), timeout=60, interval=0.5, what="the DLQ")

    # A page on another origin POSTs a replay to the console: refused, nothing moves
    with evil_site(console.url) as evil:
        browser.get(evil + "/")
        until(browser, lambda d: d.current_url.startswith(console.url))
        refusal = browser.find_element("tag name", "body").text
        shot(browser, "05-cross-origin-post-refused")
    assert json.loads(refusal) == {"error": "cross-origin request refused"}
    assert any("/api/replay" in e and "403" in e for e in page_errors(browser))
    assert dlq_holds(local_stack, delivery_id)

    # When the cause is fixed (body restored) and the DLQ page used: select, dry run
    local_stack.client("s3").put_object(
        Bucket=local_stack.outputs["PayloadBucketName"], Key=key, Body=body
    )
    browser.get(console.page("/dlq"))
    row = browser.find_element("css selector", f'tr[data-delivery-id="{delivery_id}"]')
    assert row.find_element("css selector", "td.reason").text.startswith("malformed: ")
    shot(browser, "06-dlq")
    replay_button = browser.find_element("id", "replay")
    assert not replay_button.is_enabled()  # a dry run of the selection comes first
    row.find_element("css selector", "input.pick").click()
    rate = browser.find_element("id", "rate")
    rate.clear()
    rate.send_keys("2")
    browser.find_element("id", "dry-run").click()
    until(
        browser, lambda d: d.find_element("id", "job").get_attribute("data-state") == "dry-run-done"
    )
    results = browser.find_elements("css selector", "#job-results tbody tr")
    mine = [r for r in results if delivery_id in r.text]
    assert [r.get_attribute("data-outcome") for r in mine] == ["would_replay"]
    assert dlq_holds(local_stack, delivery_id)  # a dry run moves nothing
    assert local_stack.delivery("stripe", delivery_id) is None
    shot(browser, "07-dlq-dry-run")

    # Then replay, after the confirmation step, with a live progress bar and a final report
    assert replay_button.is_enabled()
    replay_button.click()
    confirm = browser.find_element("id", "confirm")
    assert confirm.is_displayed()
    assert browser.find_element("id", "confirm-count").text == "1"
    assert browser.find_element("id", "confirm-rate").text == "2"
    shot(browser, "08-dlq-confirm")
    browser.find_element("id", "confirm-replay").click()
    until(
        browser, lambda d: d.find_element("id", "job").get_attribute("data-state") == "replay-done"
    )
    progress = browser.find_element("id", "progress")
    assert progress.get_attribute("value") == progress.get_attribute("max") == "1"
    report = browser.find_element("id", "report").text
    assert "replayed 1" in report and "failed 0" in report
    shot(browser, "09-dlq-replayed")

    # And the delivery page then shows it applied, replayed once
    item = recorded(local_stack, "stripe", delivery_id)
    assert item["outcome"] == "applied"
    browser.get(console.page("/delivery", source="stripe", id=delivery_id))
    assert browser.find_element("css selector", 'dd[data-field="outcome"]').text == "applied"
    assert browser.find_element("css selector", 'dd[data-field="replay_count"]').text == "1"
    shot(browser, "10-delivery-after-replay")
    wait_for(lambda: not dlq_holds(local_stack, delivery_id), timeout=30, what="the DLQ to drop it")
    assert page_errors(browser) == []


# ------------------------------------------------------------------------------- bodies


def test_a_script_in_a_body_renders_as_text(
    local_stack: LocalStack, console: Console, browser: Any
) -> None:
    from webhook_pipeline_ops.simulator import sender
    from webhook_pipeline_ops.simulator.deliveries import example_sources, payload

    # Given a signed Stripe delivery whose body holds a script, over the inline limit (so its
    # raw body is kept as a claim-check object and the console can show it)
    delivery_id = f"evt_{uuid.uuid4().hex[:20]}"
    body, headers = payload("stripe", delivery_id=delivery_id, resource="cus_script", sequence=1)
    doc = json.loads(body)
    script = "</pre><script>window.__pwned='yes'</script><img src=x onerror=window.__pwned=1>"
    doc["data"]["object"]["note"] = script
    doc["data"]["object"]["padding"] = "p" * 160_000
    raw = json.dumps(doc).encode()
    source = example_sources()["stripe"]
    planned = sender.Planned(source, delivery_id, "cus_script", 1, None, raw, headers)
    outcome = sender.deliver(
        planned, base_url=local_stack.api_url, secret=local_stack.secrets["stripe"], timeout=30,
        retries=0,
    )  # fmt: skip
    assert outcome.final.status == 202, outcome.final.body
    recorded(local_stack, "stripe", delivery_id)

    # When its delivery page is opened
    browser.get(console.page("/delivery", source="stripe", id=delivery_id))
    view = browser.find_element("css selector", ".body-view")
    # Then the script is text in the page, never run, never an element
    assert "s3://" in view.find_element("css selector", "p.meta").text
    assert "showing the first" in view.text  # size-capped
    raw_text = view.find_element("css selector", "pre.raw-body").get_attribute("textContent")
    assert script in raw_text
    assert browser.execute_script("return window.__pwned === undefined")
    assert view.find_elements("css selector", "script, img") == []
    assert len(raw_text) < len(raw)
    shot(browser, "11-delivery-script-body")
    assert page_errors(browser) == []


# ------------------------------------------------------------------------------- health


def test_the_health_page_shows_queues_charts_and_alarms(
    local_stack: LocalStack, console: Console, browser: Any
) -> None:
    browser.get(console.page("/health"))
    until(browser, lambda d: d.find_element("id", "health-updated").get_attribute("data-loaded"))
    queues = {
        r.get_attribute("data-queue"): r
        for r in browser.find_elements("css selector", "#queues tbody tr")
    }
    assert set(queues) == {"main", "dlq"}
    chart = browser.find_element("id", "chart-queues")
    until(browser, lambda d: int(chart.get_attribute("data-points") or 0) > 0)
    assert chart.find_elements("css selector", "canvas")
    alarms = browser.find_element("id", "alarms").text
    assert "DeadLetterQueueDepthAlarm" in alarms and "MainQueueDepthAlarm" in alarms
    assert "NOT EVALUATED" in alarms and "not evaluated locally" in alarms
    updated = browser.find_element("id", "health-updated").text
    assert re.fullmatch(r"updated \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC", updated), updated
    notes = browser.find_element("id", "health-notes").text
    assert "sampled by the console" in notes
    shot(browser, "12-health")
    assert page_errors(browser) == []
