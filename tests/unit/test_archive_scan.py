"""The search's pre-filter (``webhook_pipeline.archive.scan``): lines of deliveries the filter
cannot select are skipped before validation, every other line is validated and reported as
``decode_object`` reports it; gzip by ISA-L reports corrupt objects as gzip does."""

from __future__ import annotations

import gzip
import json
from typing import Any

from webhook_pipeline.archive.predicate import parse_predicate
from webhook_pipeline.archive.query import ArchiveFilter, decode_selected
from webhook_pipeline.archive.record import LineProblem, decode_object, encode_object

from tests.unit.test_archive_record import record

KEY = "archive/source=stripe-live/hour=2026-12-02-07/k.jsonl.gz"
BIG = b'{"data": {"amount": 9500}}'
SMALL = b'{"data": {"amount": 10}}'


def line(name: str, /, **changes: Any) -> str:
    """The line of a record with delivery id ``name`` and ``changes`` (``...``: left out)."""
    doc = json.loads(record(name, body=BIG).to_line())
    doc.update(changes)
    return json.dumps({k: v for k, v in doc.items() if v is not ...})


def gz(*lines: str) -> bytes:
    return gzip.compress("".join(f"{x}\n" for x in lines).encode())


SELECT = ArchiveFilter(
    sources=("stripe-live",),
    delivery_id_prefix="ev-",
    where=(parse_predicate("data.amount>=9000"),),
)


def test_every_line_of_a_delivery_the_filter_may_select_is_validated_and_reported() -> None:
    data = gz(
        line("ev-1"),  # selected, valid
        line("ev-2", body_sha256="not hex"),  # selected, corrupt in a field the filter ignores
        "{not json",  # unreadable: validated in full
        line("ev-3", source=5),  # the source has the wrong type
        line("ev-4", delivery_id=...),  # no delivery id
        line("ev-5", body=7),  # a body that is no string
        "[1, 2]",  # JSON, not an object
        line("ev-6", outcome=...),  # selected, no outcome
    )
    records, problems = decode_selected(KEY, data, SELECT)
    assert [r.delivery_id for r in records] == ["ev-1"]
    _, everything = decode_object(KEY, data)
    assert problems == everything  # each reported exactly as without the pre-filter
    assert [p.line for p in problems] == [2, 3, 4, 5, 6, 7, 8]
    assert problems[0] == LineProblem(KEY, 2, "not a record: body_sha256")
    assert problems[1].reason == "not a record: line"  # not JSON


def test_lines_the_filter_excludes_are_skipped_without_validation() -> None:
    data = gz(
        line("ev-1"),
        line("ev-2", body=SMALL.decode(), body_sha256="bad"),  # predicate fails
        line("zz-3", body_sha256="bad"),  # prefix fails
        line("ev-4", source="github", body_sha256="bad"),  # source fails
        line("ev-5", body=..., body_base64="eyJ9", body_sha256="bad"),  # no text body
    )
    records, problems = decode_selected(KEY, data, SELECT)
    assert [r.delivery_id for r in records] == ["ev-1"]
    assert problems == []  # lines of deliveries the search cannot return (documented)
    # without conditions on shared fields, every line is validated
    records, problems = decode_selected(KEY, data, ArchiveFilter())
    assert [p.line for p in problems] == [2, 3, 4, 5]
    assert [r.delivery_id for r in records] == ["ev-1"]


def test_the_pre_filter_keeps_what_the_filter_selects() -> None:
    kept = [
        record("ev-1", body=BIG),
        record("ev-2", body=b'{"data": {"amount": 9000}}'),
    ]
    dropped = [
        record("ev-3", body=SMALL),
        record("xv-4", body=BIG),
        record("ev-5", source="github", body=BIG),
        record("ev-6", body=b"\xff\xfe not utf-8"),
        record("ev-7", body=b"not json"),
    ]
    records, problems = decode_selected(KEY, encode_object([*dropped, *kept]), SELECT)
    assert records == kept and problems == []


def test_a_corrupt_object_is_reported_as_gzip_reports_it() -> None:
    good = encode_object([record("ev-1")])
    for data in (good + b"xyz", good[:-5], b"\x1f\x8b truncated", b"plain"):
        try:
            gzip.decompress(data)
            raise AssertionError("not corrupt")
        except (OSError, EOFError) as exc:
            expected = f"not a gzip JSON Lines object: {type(exc).__name__}"
        assert decode_object(KEY, data) == ([], [LineProblem(KEY, 0, expected)])
        assert decode_selected(KEY, data, SELECT) == ([], [LineProblem(KEY, 0, expected)])
    assert decode_object(KEY, good + b"\0\0")[0] == [record("ev-1")]
