"""Every hash that decides whether a month's rows are kept sees a text changed to another of
the same DuckDB `hash()`. That hash folds a text 8 bytes at a time with one multiply between,
so two edits can cancel: `sweep-10/trial-30` and `sweep-17/trial-40` share it, and a run
renamed from one to the other left the month's tables naming the old run
(tests/decisions/test_kept_decisions.py). Each token hashes a text with its reversed text
too (warehouse.py `row_hash`)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from cost_pipeline.attribution import build_attribution
from cost_pipeline.config import parse_config
from cost_pipeline.warehouse import (
    content_token,
    month_params,
    query,
    replace_month_unless_identical,
    sql_text,
)
from tests.attribution.test_oracle import M, line, run
from tests.support import sql_backend

RESOURCE = "i-0123456789abcdef0"
LINE_ID = "cur://data/BILLING_PERIOD=2024-03/part-0.parquet#row=1234567"
KEY = "checkpoints/churn-trial-000123/step-000400/model.safetensors"


def twin(text: str) -> str:
    """`text` with two characters changed (the last of its first and second 8-byte blocks)
    such that DuckDB's hash() of it is unchanged."""
    assert len(text) >= 16
    with duckdb.connect() as con:
        found = con.execute(
            "SELECT t FROM (SELECT concat($t[1:7], chr(a::INTEGER), $t[9:15], chr(b::INTEGER), "
            "$t[17:]) AS t FROM range(33, 127) x(a), range(33, 127) y(b)) "
            "WHERE t <> $t AND hash(t) = hash($t) ORDER BY t LIMIT 1", {"t": text}).fetchall()
    assert found, f"no twin of {text}"
    return found[0][0]


def test_the_twins_share_duckdbs_hash_but_not_the_texts_reversed():
    # the premise: were DuckDB's hash to change, the tests below would prove nothing
    for text in (RESOURCE, LINE_ID, KEY, "sweep-10/trial-30"):
        other = twin(text)
        with duckdb.connect() as con:
            assert con.execute("SELECT hash(?) = hash(?), hash(?, reverse(?)) <> "
                               "hash(?, reverse(?))",
                               [text, other, text, text, other, other]).fetchone() == (
                True, True)


def _month() -> tuple[duckdb.DuckDBPyConnection, dict]:
    """A month attributed once: a run on RESOURCE, its checkpoint listed under its prefix."""
    lines = [line(rid=RESOURCE, x_SourceLine=LINE_ID,
                  Tags={"run_id": "churn-trial-000123"}),
             line(rid="bucket-of-churn-checkpoints", comp="storage", cost=2.0, g=0, uh=None,
                  x_ResourceKind="bucket")]
    runs = [run("churn-trial-000123", res=(RESOURCE,), purpose="search",
                search_id="churn-search-2024-03-a", dataset="churn-events-2024-03",
                region="ap-southeast-2")]
    inventory = [{"bucket": "bucket-of-churn-checkpoints", "key": KEY, "size": 10,
                  "prefix": "checkpoints/", "run_id": "churn-trial-000123"}]
    con = sql_backend.run_month(lines, runs, inventory, {}, M)
    cfg = parse_config({"run_tag": "run_id"}, Path("."))
    return con, month_params(cfg, M)


def _kept(con, params) -> bool:
    return build_attribution(con, M, params, keep_unchanged=True).mode == "kept"


@pytest.mark.parametrize(("table", "column", "text"), [
    ("tracker_runs", "search_id", "churn-search-2024-03-a"),
    ("tracker_runs", "dataset", "churn-events-2024-03"),
    ("tracker_runs", "resource_ids", RESOURCE),
    ("billing_facts", "x_SourceLine", LINE_ID),
    ("billing_facts", "ResourceId", RESOURCE),
    ("checkpoint_inventory", "run_id", "churn-trial-000123"),
])
def test_the_attributions_basis_sees_a_twin(table, column, text):
    con, params = _month()
    assert _kept(con, params)  # (nothing changed: the rows are kept)
    other = twin(text)
    if column == "resource_ids":
        con.execute("UPDATE tracker_runs SET resource_ids = [?]", [other])
    else:
        con.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?", [other, text])
    assert not _kept(con, params)


def test_the_bills_run_tag_is_seen():
    con, params = _month()
    other = twin("churn-trial-000123")
    con.execute("UPDATE billing_facts SET Tags = MAP {'run_id': ?} WHERE Tags IS NOT NULL",
                [other])
    assert not _kept(con, params)


@pytest.mark.parametrize(("table", "column", "text"), [
    ("checkpoint_inventory", "key", KEY),
    ("checkpoint_inventory", "run_id", "churn-trial-000123"),
    ("tracker_runs", "run_id", "churn-trial-000123"),
    ("billing_facts", "ResourceId", "bucket-of-churn-checkpoints"),
])
def test_the_checkpoint_tables_basis_sees_a_twin(table, column, text):
    con, params = _month()

    def basis():
        return query(con, sql_text("checkpoint_basis"), params).fetchall()

    before = basis()
    con.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?", [twin(text), text])
    assert basis() != before


def test_the_decision_tables_basis_sees_an_approvals_twin():
    con, _ = _month()
    con.execute("INSERT INTO search_approvals (month, search_id, model, configs, seeds, reruns, "
                "runs, per_run_cost, estimated_cost, approval_budget, approved, recorded_at) "
                "VALUES (?, 'churn-search-2024-03-a', 'churn', 1, 1, 1, 1, 1.0, 1.0, 2.0, true, "
                "TIMESTAMP '2024-03-02 10:00:00')", [M])

    def basis():
        return query(con, sql_text("decision_inputs"), {"month": M, "parents": ""}).fetchall()

    before = basis()
    con.execute("UPDATE search_approvals SET search_id = ?", [twin("churn-search-2024-03-a")])
    assert basis() != before


def test_a_tables_token_and_changed_rows_see_a_twin():
    con, _ = _month()
    token = content_token(con, "tracker_runs", M)
    select = ("SELECT * REPLACE (? AS search_id) FROM tracker_runs WHERE month = $month")
    other = twin("churn-search-2024-03-a")
    # the same rows again: kept; a run's text changed to its twin: written
    assert replace_month_unless_identical(
        con, "tracker_runs", M, select.replace("?", "'churn-search-2024-03-a'"), {"month": M},
        "tracker", key="run_id")[1]
    assert not replace_month_unless_identical(
        con, "tracker_runs", M, select.replace("?", f"'{other}'"), {"month": M}, "tracker",
        key="run_id")[1]
    assert content_token(con, "tracker_runs", M) != token
    assert con.execute("SELECT search_id FROM tracker_runs").fetchall() == [(other,)]
