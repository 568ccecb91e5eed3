"""Every decision table and the reconciliation keep their month's rows when nothing they are
computed from changed (assets/queries/decision_inputs.sql), and only then: after each change
below, a re-run's tables are what `--force` computes from every input again."""

from __future__ import annotations

import csv
import re
from datetime import UTC, date, datetime
from pathlib import Path

import duckdb
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from cost_pipeline.cli.materialize import materialize_month
from cost_pipeline.config import load_config
from cost_pipeline.defs.assets.decisions import DERIVED, KEPT_WHEN_SAME
from cost_pipeline.estimate import estimate_search, record_approval
from cost_pipeline.ingest.billing import bill_token
from cost_pipeline.warehouse import content_token, ensure_schema, note_input, sql_text
from tests.cli.test_cli import copy_demo
from tests.cli.test_incremental import KEEPING, _materialized

JULY = date(2026, 7, 1)
READING_COSTS = sorted({*DERIVED, "reconciliation"} - set(KEPT_WHEN_SAME))


@pytest.fixture
def demo(demo_quarter, tmp_path, dagster_home) -> Path:
    """A copy of the demo quarter with July materialized once."""
    config = copy_demo(demo_quarter, tmp_path)
    assert materialize_month(str(config), JULY, progress=False).success
    return config


def tables(config: Path) -> dict[str, list[str]]:
    """July's rows of each table that may keep them, as exact reprs, sorted."""
    with duckdb.connect(load_config(config).warehouse_path, read_only=True) as con:
        return {t: sorted(repr(r) for r in con.execute(
                    f"SELECT * FROM {t} WHERE month = ?", [JULY]).fetchall())
                for t in sorted(KEEPING)}


def rerun_then_force(config: Path) -> tuple[dict, dict[str, dict]]:
    """(each asset's materialization metadata of a re-run, its tables equal to a forced run's)"""
    again = materialize_month(str(config), JULY, progress=False)
    assert again.success and again.run_id, again.error
    after = tables(config)
    forced = materialize_month(str(config), JULY, progress=False, force=True)
    assert forced.success, forced.error
    whole = tables(config)
    for table in KEEPING:
        assert after[table] == whole[table], f"{table}: the re-run's rows are stale"
    return _materialized(again.run_id), after


def edit_runs(config: Path, change) -> None:
    path = config.parent / "runs.csv"
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    change(rows)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_the_same_runs_again_keep_every_table(demo):
    before = tables(demo)
    edit_runs(demo, lambda rows: None)  # the same runs, written again
    meta, after = rerun_then_force(demo)
    assert meta["attribution"]["mode"] == "kept"
    assert {a: meta[a]["kept"] for a in KEEPING} == {a: True for a in KEEPING}
    assert after == before


def test_a_changed_metric_writes_the_tables_that_read_runs_again(demo):
    def better(rows):  # a July search trial's metric: the attribution does not read it
        trial = next(r for r in rows if r["search_id"] and r["metric_value"]
                     and r["start_time"].startswith("2026-07"))
        trial["metric_value"] = str(float(trial["metric_value"]) + 0.25)

    before = tables(demo)
    edit_runs(demo, better)
    meta, after = rerun_then_force(demo)
    assert meta["attribution"]["mode"] == "kept"
    assert not any(meta[a]["kept"] for a in READING_COSTS)
    assert after["search_costs"] != before["search_costs"]  # the change is seen


def test_a_run_end_moved_past_the_months_end_writes_the_checkpoint_tables_again(demo):
    # s2607-c09-s0, a FINISHED search trial of 7 July, dead at July's end with its 12
    # checkpoints (step-001000 … step-012000, hourly, each a 1.5 GiB model and a 3 GiB
    # optimizer), delivered again as ending on 2 August: it was RUNNING at July's end, so it
    # keeps its newest 3 and its 9 older checkpoints (18 objects) are beyond keep-last
    def later(rows):
        trial = next(r for r in rows if r["run_id"] == "s2607-c09-s0")
        assert trial["end_time"] == "2026-07-07T12:00:00Z"
        trial["end_time"] = "2026-08-02T00:00:00Z"

    edit_runs(demo, later)
    meta, after = rerun_then_force(demo)
    assert not meta["retention_violations"]["kept"]
    assert not meta["storage_by_run_status"]["kept"]
    with duckdb.connect(load_config(demo).warehouse_path, read_only=True) as con:
        judged = con.execute(
            "SELECT run_status, reason, list(DISTINCT checkpoint ORDER BY checkpoint), "
            "count(*) FROM retention_violations WHERE month = ? AND run_id = 's2607-c09-s0' "
            "GROUP BY ALL", [JULY]).fetchall()
        live = con.execute("SELECT objects, bytes FROM storage_by_run_status "
                           "WHERE month = ? AND run_status = 'live'", [JULY]).fetchall()
    assert judged == [("RUNNING", "beyond_keep_last",
                       [f"step-{i:03d}000" for i in range(1, 10)], 18)]
    # every object of the live run, kept or not: 12 × (1,610,612,736 + 3,221,225,472) bytes
    assert live == [(24, 57_982_058_496)]


# two run ids whose texts DuckDB's hash() maps to one number (tests/attribution/test_keys.py)
SAME_HASH = ("sweep-10/trial-30", "sweep-17/trial-40")


@pytest.mark.parametrize("field", ["run_id", "search_id"])
def test_a_text_changed_to_one_of_the_same_hash_writes_them_again(demo, field):
    # a row's hash was DuckDB's hash() of its texts, and a run renamed between two such ids
    # gave the runs the same token: the month kept every table, naming the old run
    def rename(text):
        def change(rows):
            trial = next(r for r in rows if r["search_id"] and r["start_time"] >= "2026-07-02")
            trial[field] = text
        return change

    def named(text: str) -> list:
        with duckdb.connect(load_config(demo).warehouse_path, read_only=True) as con:
            return con.execute(f"SELECT run_id FROM tracker_runs WHERE month = ? AND "
                               f"{field} = ?", [JULY, text]).fetchall()

    edit_runs(demo, rename(SAME_HASH[0]))
    assert materialize_month(str(demo), JULY, progress=False).success
    assert len(named(SAME_HASH[0])) == 1
    edit_runs(demo, lambda rows: next(r for r in rows if r[field] == SAME_HASH[0]).update(
        {field: SAME_HASH[1]}))
    meta, _ = rerun_then_force(demo)  # (and every table equal to a forced run's)
    assert not meta["tracker_runs"]["kept"] and not meta["search_costs"]["kept"]
    assert len(named(SAME_HASH[1])) == 1 and not named(SAME_HASH[0])


def test_a_bill_delivered_again_writes_them_again(demo):
    # one line's region changed: not an attributed column, so the attribution keeps its rows
    data = demo.parent / "exports/cur/ml-cur/data/BILLING_PERIOD=2026-07"
    path = sorted(data.glob("*.parquet"))[0]
    table = pq.read_table(path)
    column = table.schema.get_field_index("product_region_code")
    regions = table.column(column).to_pylist()
    regions[0] = "eu-north-1" if regions[0] != "eu-north-1" else "eu-west-3"
    table = table.set_column(column, table.field(column),
                             pc.cast(regions, table.field(column).type))
    pq.write_table(table, path)
    meta, _ = rerun_then_force(demo)
    assert meta["attribution"]["mode"] == "kept"
    assert not any(meta[a]["kept"] for a in READING_COSTS)


def test_an_approval_writes_them_again(demo):
    cfg = load_config(demo)
    with duckdb.connect(cfg.warehouse_path, read_only=True) as con:
        ((search, model),) = con.execute(
            "SELECT search_id, model FROM tracker_runs WHERE month = ? AND search_id IS NOT "
            "NULL AND model IS NOT NULL ORDER BY search_id LIMIT 1", [JULY]).fetchall()
    est = estimate_search(cfg, model, 2, 1, gpus=1, hours=1, price=1.0)
    # later than the demo's own approvals: the latest recording counts
    row = record_approval(cfg, est, search, recorded_at=datetime(2026, 7, 30, tzinfo=UTC))
    meta, _ = rerun_then_force(demo)
    assert not meta["search_costs"]["kept"]
    with duckdb.connect(cfg.warehouse_path, read_only=True) as con:
        assert con.execute("SELECT estimated_cost FROM search_costs WHERE month = ? AND "
                           "search_id = ?", [JULY, search]).fetchall() == [
                               (row["estimated_cost"],)]


def test_the_tokens(tmp_path):
    with duckdb.connect(str(tmp_path / "w.duckdb")) as con:
        con.execute(sql_text("schema"))
        con.execute("CREATE TABLE t (month DATE, a INTEGER, b VARCHAR)")
        con.execute("INSERT INTO t VALUES (?, 1, 'x'), (?, 2, NULL)", [JULY, JULY])
        same = content_token(con, "t", JULY)
        con.execute("DELETE FROM t")
        con.execute("INSERT INTO t VALUES (?, 2, NULL), (?, 1, 'x')", [JULY, JULY])
        assert content_token(con, "t", JULY) == same  # the same rows, in another order
        con.execute("UPDATE t SET b = 'y' WHERE a = 1")
        assert content_token(con, "t", JULY) != same  # any column of any row
        for token in ("2:7", "2:9"):  # a month's input noted again replaces its token
            note_input(con, JULY, "billing", token)
        assert con.execute("SELECT input, token FROM input_tokens").fetchall() == [
            ("billing", "2:9")]


# two lines of July's bill, as billing.py writes them (the columns the readers need)
BILL_LINES = [
    {"x_SourceLine": "cur:l1", "ResourceId": "i-a", "EffectiveCost": 3.5, "BilledCost": 3.5,
     "ListCost": 4.0, "BillingCurrency": "USD", "x_PricingCategory": "on_demand",
     "Tags": {"user_run_id": "sweep-10/trial-30", "user_team": "vision"},
     "x_File": "a.parquet", "x_Row": 1},
    {"x_SourceLine": "cur:l2", "ResourceId": "i-b", "EffectiveCost": 1.25, "BilledCost": 1.25,
     "ListCost": None, "BillingCurrency": "USD", "x_PricingCategory": "spot",
     "Tags": None, "x_File": "a.parquet", "x_Row": 2},
]


def bill_of(con, lines: list[dict]) -> str:
    """July's bill written anew with `lines`: its token."""
    con.execute("DELETE FROM billing_facts")
    for line in lines:
        con.execute(f"INSERT INTO billing_facts (month, {', '.join(line)}) "
                    f"VALUES (?{', ?' * len(line)})", [JULY, *line.values()])
    return bill_token(con, JULY, "run_id")


@pytest.mark.parametrize("restated", [
    {"EffectiveCost": 3.75}, {"BillingCurrency": "EUR"}, {"ListCost": None},
    {"ListCost": 4.5}, {"x_PricingCategory": "spot"}, {"ResourceId": "i-c"},
    # a run renamed as DuckDB's hash of the text alone cannot tell (warehouse.py `row_hash`)
    {"Tags": {"user_run_id": "sweep-17/trial-40", "user_team": "vision"}},
    {"Tags": {"user_run_id": "sweep-10/trial-30", "user_team": "speech"}},
])
def test_the_bills_token_moves_with_a_line_restated_alone(tmp_path, restated):
    """The bill's token (input_tokens) is what its lines hold, not how often they were
    written: the same lines written again — in another order, from other files — give the
    same token, so the later months keep their rows; any figure of one line restated moves
    it."""
    with duckdb.connect(str(tmp_path / "w.duckdb")) as con:
        ensure_schema(con)
        same = bill_of(con, BILL_LINES)
        assert same.startswith("2:")
        moved = [dict(line, x_File="b.parquet", x_Row=3 - line["x_Row"])
                 for line in reversed(BILL_LINES)]
        assert bill_of(con, moved) == same
        assert bill_of(con, [dict(BILL_LINES[0], **restated), BILL_LINES[1]]) != same
        assert bill_of(con, BILL_LINES[:1]).startswith("1:")  # a line gone


BASE_TABLES = {"billing_facts", "tracker_runs", "checkpoint_inventory", "attribution_rows",
               "attribution_runs", "attribution_basis", "search_approvals", "billing_months",
               "billing_deliveries", "materializations", "decision_basis", "input_tokens"}
# what decision_inputs.sql covers: the tokens' tables, the approvals, and the decision tables
# the table depends on (their decision_basis rows); `billing_months` is a month's row of
# `billing_facts`, written with its lines in their transaction (billing.py), so the lines'
# token covers it
COVERED = {"billing_facts", "tracker_runs", "attribution_rows", "attribution_runs",
           "search_approvals", "billing_months"}


def _reads(text: str, macros: dict[str, str], seen: frozenset = frozenset()) -> set[str]:
    """The warehouse tables a SQL text reads, through the macros it calls."""
    words = set(re.findall(r"\b[a-z_]+\b", re.sub(r"--[^\n]*", "", text)))
    found = words & (BASE_TABLES | set(DERIVED))
    for name in sorted(words & macros.keys() - seen):
        found |= _reads(macros[name], macros, seen | {name})
    return found


def test_the_basis_covers_every_table_they_read():
    parts = re.split(r"CREATE OR REPLACE TEMP MACRO (\w+)", sql_text("macros"))
    macros = dict(zip(parts[1::2], parts[2::2], strict=True))  # name → its text
    assert {"month_runs", "search_identity", "checkpoint_objects"} <= macros.keys()
    for table in READING_COSTS:
        deps = DERIVED[table][0] if table in DERIVED else ["attribution", "untracked_usage"]
        reads = _reads(sql_text(table), macros) - {table}
        assert reads <= COVERED | set(deps), (table, reads - COVERED - set(deps))
