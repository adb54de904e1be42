"""The ``--where`` language: what parses into what, where a bad text fails, what matches, and
SQL that a quote cannot break (the same meaning in Athena: tests/integration/
test_archive_search_crosscheck.py)."""

from __future__ import annotations

from typing import Any

import pytest
from webhook_pipeline.archive.predicate import PredicateError, parse_predicate, sql_string
from webhook_pipeline.archive.record import OUTCOME_RANK
from webhook_pipeline_ops.archive.sql import like_pattern, outcome_rank_sql

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "path", "op", "value"),
    [
        ("data.object.amount>=1000", ("data", "object", "amount"), ">=", 1000.0),
        ("a = 1.5e2", ("a",), "=", 150.0),
        ("a!=-3", ("a",), "!=", -3.0),
        ('a="1000"', ("a",), "=", "1000"),
        ("type=customer.created", ("type",), "=", "customer.created"),
        ("a<= x y ", ("a",), "<=", "x y"),
        ("items[0].id=ch_1", ("items", 0, "id"), "=", "ch_1"),
        ("[2]=x", (2,), "=", "x"),
        ('"a.b"."c-d"[10]~z', ("a.b", "c-d", 10), "~", "z"),
        ("live=false", ("live",), "=", False),
        ("x!=null", ("x",), "!=", None),
        ("n=01", ("n",), "=", "01"),
    ],
)
def test_a_predicate_parses_into_path_operator_and_typed_value(
    text: str, path: tuple[Any, ...], op: str, value: Any
) -> None:
    predicate = parse_predicate(text)
    assert (predicate.path, predicate.op, predicate.value) == (path, op, value)
    assert type(predicate.value) is type(value)


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("", 0),
        (".a=1", 0),
        ("a..b=1", 2),
        ("a=", 2),
        ("a", 1),
        ("a.b 1", 4),
        ("a>>1", 2),
        ('a="open', 2),
        ("a>true", 1),
        ("a~5", 1),
        ("a[x]=1", 1),
    ],
)
def test_a_text_that_does_not_parse_names_itself_and_the_position(text: str, position: int) -> None:
    with pytest.raises(PredicateError) as caught:
        parse_predicate(text)
    assert caught.value.position == position
    assert f"cannot parse predicate {text!r} at position {position}" in str(caught.value)


BODY = {"a": {"n": 5, "s": "5", "t": True, "z": None, "l": [1, {"k": "v"}]}, "b-c": "x"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a.n>4", True),
        ("a.n>=5", True),
        ("a.n<5", False),
        ("a.s>4", False),  # a numeric string is no number
        ("a.s=5", False),  # nor is a number literal a string
        ('a.s="5"', True),
        ('a.n="5"', False),
        ("a.missing!=1", False),  # a missing path never matches
        ("a.missing!=x", False),
        ("a.t=true", True),
        ("a.t!=false", True),
        ("a.t=1", False),
        ("a.z=null", True),
        ("a.z!=null", False),
        ("a.n!=null", False),  # a number is no null: != compares values of one type
        ("a.l[1].k=v", True),
        ("a.l[2]=1", False),
        ("a.l=1", False),  # a list is no scalar
        ("a=1", False),
        ('"b-c"~x', True),
        ("b-c~y", False),
        ("a.l.0=1", False),  # a key is no index
    ],
)
def test_matching(text: str, expected: bool) -> None:
    assert parse_predicate(text).matches(BODY) is expected


def test_a_body_that_is_a_list_or_a_scalar_matches_by_index_or_not_at_all() -> None:
    assert parse_predicate("[1].x=2").matches([{}, {"x": 2}])
    assert not parse_predicate("x=2").matches(2)


def test_every_literal_of_the_sql_is_quoted_so_a_quote_cannot_end_it() -> None:
    sql = parse_predicate("note=x' OR '1'='1").to_sql()
    assert "'x'' OR ''1''=''1'" in sql
    assert sql.count("'") % 2 == 0
    assert sql_string("it's") == "'it''s'"
    key = parse_predicate('"we\'ird"=1').to_sql()
    assert "'$[\"we''ird\"]'" in key


def test_json_paths_use_brackets_for_keys_athena_cannot_take_after_a_dot() -> None:
    assert parse_predicate('a."b.c"[3]."d-e".f_1=1').json_path() == '$.a["b.c"][3]["d-e"].f_1'


def test_globs_become_like_patterns_with_percent_and_underscore_escaped() -> None:
    assert like_pattern("invoice_*%?\\") == "invoice\\_%\\%_\\\\"
    with pytest.raises(ValueError, match="character classes"):
        like_pattern("a[bc]")


def test_the_sql_outcome_rank_is_the_dedupe_rank() -> None:
    sql = outcome_rank_sql()
    for outcome, rank in OUTCOME_RANK.items():
        assert f"WHEN '{outcome}' THEN {rank}" in sql
    assert sql.endswith(f"ELSE {len(OUTCOME_RANK)} END")
