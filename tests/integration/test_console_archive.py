"""The console's Archive page and archived delivery page (Starlette's TestClient) over an archive
bucket on in-process moto (:mod:`tests.integration.archive_console_data`): counts against the
filters, the cap on the list, deduplication, two sources with one delivery id, escaping, bytes
that are not UTF-8, corrupt objects reported, bad input refused before anything is read."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import boto3
import pytest
from starlette.testclient import TestClient
from webhook_pipeline_ops.aws import Aws
from webhook_pipeline_ops.cli import build_parser
from webhook_pipeline_ops.console.app import create_app
from webhook_pipeline_ops.console.backend import Backend, Target
from webhook_pipeline_ops.console.routes.archive import MAX_SHOWN

from tests.integration.archive_console_data import (
    BAD_LINE_KEY,
    BUCKET,
    GARBAGE_KEY,
    SCRIPT,
    SCRIPT_BODY,
    STRIPE_COUNT,
    fill_archive,
)

pytestmark = pytest.mark.integration

WINDOW = {"from": "2026-03-01T12:00", "to": "2026-03-01T13:00"}
#: stripe deliveries of hour 12 (the evt_NNN ones, evt_script, evt_good_1, evt_good_2).
STRIPE_IN_WINDOW = STRIPE_COUNT + 3


def client_for(archive_bucket: str | None) -> TestClient:
    argv = ["console", "--queue-url", "q", "--dlq-url", "d", "--table", "t"]
    if archive_bucket:
        argv += ["--archive-bucket", archive_bucket]
    backend = Backend(
        Aws(build_parser().parse_args(argv)),
        Target(local=False, label="stack stk", stack="stk", region="us-east-1"),
    )
    app = create_app(backend, allowed_hosts=["testserver"], token="t0ken-0123456789")
    return TestClient(app)


@pytest.fixture
def console(aws: None) -> Iterator[TestClient]:
    fill_archive(boto3.client("s3"))
    yield client_for(BUCKET)


def search(console: TestClient, **filters: str) -> Any:
    return console.get("/archive?" + urlencode(filters))


def count(page: str) -> int:
    found = re.search(r'<span id="match-count">(\d+)</span>', page)
    assert found, page[:2000]
    return int(found.group(1))


def rows(page: str) -> list[tuple[str, str]]:
    """(source, delivery id) of the listed matches, in page order."""
    return re.findall(r'<tr data-delivery-id="([^"]*)" data-source="([^"]*)">', page)


def detail_links(page: str) -> list[str]:
    return [
        link.replace("&amp;", "&")
        for link in re.findall(r'href="(/archive/delivery\?[^"]+)"', page)
    ]


def test_the_count_is_of_every_match_and_the_list_stops_at_the_cap(console: TestClient) -> None:
    page = search(console, source="stripe", **WINDOW)
    assert page.status_code == 200
    assert count(page.text) == STRIPE_IN_WINDOW  # each evt_NNN archived twice, counted once
    listed = rows(page.text)
    assert len(listed) == MAX_SHOWN < STRIPE_IN_WINDOW
    # in order of receipt: the first MAX_SHOWN evt_NNN
    assert [i for i, _ in listed] == [f"evt_{n:03d}" for n in range(MAX_SHOWN)]
    assert f"at most {MAX_SHOWN} are shown" in page.text
    assert "late_1" not in page.text  # received at 13:30, after the window


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"event_type": "invoice.*"}, STRIPE_COUNT // 2 + 2),  # even evt_NNN, evt_good_1 and 2
        ({"event_type": "charge.succeeded"}, STRIPE_COUNT // 2),
        ({"outcome": "stale"}, STRIPE_COUNT // 10),
        ({"resource_key": "cus_3"}, len([n for n in range(STRIPE_COUNT) if n % 7 == 3])),
        ({"delivery_id": "evt_01"}, 10),
        ({"where": "amount = 7"}, 1),
        ({"where": 'currency = "eur"\namount != 7'}, STRIPE_COUNT - 1),
        ({"from": "2026-03-01T12:20", "to": "2026-03-01T12:30"}, 60),
    ],
)
def test_each_filter_selects_what_it_names(
    console: TestClient, filters: dict[str, str], expected: int
) -> None:
    page = search(console, source="stripe", **{**WINDOW, **filters})
    assert page.status_code == 200, page.text
    assert count(page.text) == expected


def test_a_final_attempt_wins_over_its_retry(console: TestClient) -> None:
    page = search(console, source="stripe", delivery_id="evt_00", **WINDOW)
    assert count(page.text) == 10
    assert "outcome-retry" not in page.text
    assert page.text.count("outcome-stale") == 1  # evt_000
    assert page.text.count("outcome-applied") == 9


def test_one_delivery_id_in_two_sources_is_two_deliveries_each_with_its_body(
    console: TestClient,
) -> None:
    page = search(console, delivery_id="evt_007", **WINDOW)
    assert count(page.text) == 2
    assert sorted(rows(page.text)) == [("evt_007", "github"), ("evt_007", "stripe")]
    bodies = {}
    for link in detail_links(page.text):
        detail = console.get(link)
        assert detail.status_code == 200
        source = re.search(r'data-field="source">([^<]*)<', detail.text)
        assert source
        bodies[source.group(1)] = html.unescape(detail.text)
    assert "github-body" in bodies["github"] and "github-body" not in bodies["stripe"]
    assert '"amount": 7' in bodies["stripe"] and '"amount": 7' not in bodies["github"]


def test_the_detail_shows_the_signed_metadata_headers_and_pretty_json(
    console: TestClient,
) -> None:
    page = search(console, source="stripe", delivery_id="evt_script", **WINDOW)
    (link,) = detail_links(page.text)
    detail = console.get(link)
    assert detail.status_code == 200
    page_html = detail.text
    for name, value in {
        "provider": "stripe",
        "verified_with": "current",
        "gate": "bypassed",
        "replay_count": "2",
        "body_size": str(len(SCRIPT_BODY)),
    }.items():
        assert f'data-field="{name}">{value}<' in page_html, name
    assert "2026-03-01T12:55:00.000000Z" in page_html  # received_at as archived
    assert "2026-03-01T12:55:01.000000Z" in page_html  # archived_at
    assert re.search(r'data-field="body_sha256">[0-9a-f]{64}<', page_html)
    assert 'id="signed-headers"' in page_html and 'id="headers"' in page_html
    # pretty-printed: one key a line, indented
    assert '\n  "amount": 1\n' in html.unescape(page_html)


def test_markup_in_a_body_and_a_header_is_text(console: TestClient) -> None:
    page = search(console, source="stripe", delivery_id="evt_script", **WINDOW)
    (link,) = detail_links(page.text)
    shown = console.get(link).text
    assert "<script>window" not in shown and "<img src=x" not in shown
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;&lt;img src=x onerror" in shown
    assert html.escape(SCRIPT) in shown  # in the raw text and the pretty-printed JSON
    assert "<b>bold</b>" not in shown
    assert "&lt;b&gt;bold&lt;/b&gt;" in shown


def test_bytes_that_are_not_utf8_are_a_hex_dump_with_a_note(console: TestClient) -> None:
    page = search(console, source="github", delivery_id="gh_bin", **WINDOW)
    (link,) = detail_links(page.text)
    shown = console.get(link).text
    assert "not UTF-8" in shown
    assert "00000000  ff fe 00 3c 73 63 72 69 70 74 3e 80 62 69 6e 61" in shown
    assert "|...&lt;script&gt;.bina|" in shown
    assert "<script>" not in shown.split('id="archive-body-bytes"')[1]
    assert "//4APHNjcmlwdD6AYmluYXJ5" in shown  # base64 of the bytes
    assert 'data-field="verified_with">previous<' in shown


def test_corrupt_objects_are_reported_by_key_and_line_and_the_rest_is_read(
    console: TestClient,
) -> None:
    page = search(console, source="stripe", delivery_id="evt_good", **WINDOW)
    assert page.status_code == 200
    assert count(page.text) == 2  # lines 1 and 3 of the object whose line 2 is bad
    problems = re.findall(r'<tr class="problem"><td>([^<]*)</td><td>([^<]*)</td>', page.text)
    assert sorted(problems) == sorted([(GARBAGE_KEY, "whole object"), (BAD_LINE_KEY, "2")])


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"from": "2026-03-01T13:00", "to": "2026-03-01T12:00"}, "from must be earlier than to"),
        ({"from": "yesterday"}, "from: an ISO 8601 time"),
        (
            {"where": "amount >> 7"},
            "where: cannot parse predicate &#39;amount &gt;&gt; 7&#39; at position 8",
        ),
        ({"where": 'amount = "7'}, "at position 9: not a JSON string"),
        ({"outcome": "exploded"}, "outcome: one of applied, stale"),
    ],
)
def test_bad_input_is_a_400_on_the_page_and_nothing_is_read(
    console: TestClient,
    aws_calls: list[tuple[str, str]],
    filters: dict[str, str],
    message: str,
) -> None:
    page = search(console, source="stripe", **filters)
    assert page.status_code == 400
    assert message in page.text
    assert 'id="archive-form"' in page.text  # the form, to correct it
    assert 'id="match-count"' not in page.text
    assert [c for c in aws_calls if c[0] == "s3"] == []


def test_an_unknown_source_is_a_400_and_no_object_is_read(
    console: TestClient, aws_calls: list[tuple[str, str]]
) -> None:
    page = search(console, source="nosuch", **WINDOW)
    assert page.status_code == 400
    assert "source &#39;nosuch&#39; is unknown (sources: " in page.text
    assert ("s3", "GetObject") not in aws_calls


def test_the_form_alone_reads_no_object(
    console: TestClient, aws_calls: list[tuple[str, str]]
) -> None:
    page = console.get("/archive")
    assert page.status_code == 200
    assert 'id="archive-form"' in page.text and 'id="match-count"' not in page.text
    assert '<option value="github"' in page.text and '<option value="stripe"' in page.text
    assert ("s3", "GetObject") not in aws_calls


def test_an_unknown_archived_delivery_is_a_404(console: TestClient) -> None:
    query = {
        "source": "stripe",
        "id": "evt_001",
        "sha256": "0" * 64,
        "received_at": "2026-03-01T12:00:10.000000Z",
    }
    page = console.get("/archive/delivery?" + urlencode(query))
    assert page.status_code == 404
    assert "no archived delivery of source" in page.text
    bad = console.get("/archive/delivery?" + urlencode({**query, "received_at": "noon"}))
    assert bad.status_code == 400


def test_without_an_archive_bucket_the_page_says_so(aws: None) -> None:
    console = client_for(None)
    page = console.get("/archive?" + urlencode({"source": "stripe"}))
    assert page.status_code == 200
    assert "No archive bucket is known" in page.text
    assert "ArchiveBucketName" in page.text
    detail = console.get(
        "/archive/delivery?"
        + urlencode(
            {
                "source": "s",
                "id": "i",
                "sha256": "0" * 64,
                "received_at": "2026-03-01T12:00:00.000000Z",
            }
        )
    )
    assert detail.status_code == 404
    assert "No archive bucket is known" in detail.text
