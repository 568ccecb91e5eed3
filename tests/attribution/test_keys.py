"""The attribution names a billing line and a run by a 64-bit key of its text (macros.sql
`key_hash`: the text's hash with its reversed text's). DuckDB's hash of a text alone maps ids
that differ in a few digits to one number — `sweep-10/trial-30` and `sweep-17/trial-40`, and
two GCP line ids of an hour and a VM apart — and ingest refused such a month ("share a 64-bit
hash … cannot be attributed"): 8,720 pairs among 100,000 run ids of that shape."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from cost_pipeline.ingest import billing
from cost_pipeline.ingest.runs import _check_run_ids
from cost_pipeline.warehouse import ensure_schema, upgrade
from tests.attribution.test_attribution_runs import EXPECTED, ROWS, _runs, _sums
from tests.attribution.test_oracle import M, line, run
from tests.support import sql_backend
from tests.support.warehouse_rows import BILLING_DEFAULTS, insert_lines

RUNS = ("sweep-10/trial-30", "sweep-17/trial-40")
LINES = tuple("gcp_billing_export://compute.googleapis.com/projects/p/zones/z/instances/"
              f"vm-{vm}:2026-09-15T{hour}:00:00Z:A2-RAM" for vm, hour in (("2101", 16),
                                                                         ("2297", 19)))


@pytest.mark.parametrize("ids", [RUNS, LINES])
def test_the_ids_share_duckdbs_hash_of_the_text_but_not_the_key(ids):
    # the premise: were DuckDB's hash to change, the tests below would prove nothing
    with duckdb.connect() as con:
        ensure_schema(con)
        same, keys = con.execute("SELECT hash(?) = hash(?), key_hash(?) <> key_hash(?)",
                                 [*ids, *ids]).fetchone()
    assert same and keys


def test_runs_and_lines_whose_texts_hash_alike_keep_their_own_rows():
    lines = [line(rid="i-1", cost=8.0, x_SourceLine=LINES[0]),
             line(rid="i-2", cost=4.0, x_SourceLine=LINES[1])]
    runs = [run(RUNS[0], res=("i-1",)), run(RUNS[1], res=("i-2",))]
    rows = sql_backend.attribute(lines, runs, [], {}, M)
    assert sorted((r["x_SourceLine"], r["run_id"], r["cost"]) for r in rows) == [
        (LINES[0], RUNS[0], 8.0), (LINES[1], RUNS[1], 4.0)]


def test_ingest_takes_a_month_of_such_ids():
    # the checks that refused them: the runs' and the bill's
    runs = pa.table({"run_id": list(RUNS), "source": ["runs_file"] * 2})
    assert _check_run_ids(runs)
    with duckdb.connect() as con:
        insert_lines(con, M, [{**BILLING_DEFAULTS, **line(rid=f"i-{i}", x_SourceLine=text)}
                              for i, text in enumerate(LINES)])
        con.execute(f"CREATE TEMP VIEW {billing.STAGE} AS SELECT * FROM billing_facts")
        summary = billing.BillingSummary()
        billing._check_staged(con, M, summary, {})
        assert summary.currency == "USD" and summary.duplicates_dropped == 0


def test_a_warehouse_keyed_by_the_texts_hash_is_keyed_again(tmp_path):
    # rows a version before `key_hash` wrote: line_key = hash(x_SourceLine) and run_hash =
    # hash(run_id). Its readers join them by key_hash now: they are keyed again once, by a
    # writer's open or before a read-only reader's (`upgrade`)
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    ensure_schema(con)
    con.execute("COMMENT ON COLUMN attribution_rows.line_key IS NULL")
    _runs(con)
    con.executemany(
        "INSERT INTO attribution_rows (month, line_key, run_hash, purpose_class, component, "
        "cost, hours, accelerator_hours, share, rule, kind) VALUES (?, hash(?), "
        "CASE WHEN ?::VARCHAR IS NOT NULL THEN hash(?::VARCHAR) END, ?, ?, ?, ?, ?, 1.0, "
        "'compute', ?)", [(m, ln, r, r, *rest) for m, ln, r, *rest in ROWS])
    con.executemany(
        "INSERT INTO billing_facts (month, x_SourceLine, EffectiveCost) VALUES (?, ?, 1.0)",
        sorted({(m, ln) for m, ln, *_ in ROWS}))
    con.executemany(  # its per-run sums, which name runs by run_id
        "INSERT INTO attribution_runs (month, run_id, purpose_class, component, rule, cost, "
        "hours, accelerator_hours, rows, cost_exact) VALUES (?, ?, ?, ?, 'compute', ?, ?, ?, "
        "?, ?)", [(*row, row[4]) for row in EXPECTED])
    con.close()
    upgrade(path)
    with duckdb.connect(str(path), read_only=True) as con:
        assert set(con.execute(
            "SELECT month, x_SourceLine, run_id, purpose_class, component, cost, hours, "
            "accelerator_hours, kind FROM attribution").fetchall()) == set(ROWS)
        assert _sums(con) == EXPECTED
        assert con.execute("SELECT comment FROM duckdb_columns() WHERE table_name = "
                           "'attribution_rows' AND column_name = 'line_key'").fetchone() == (
            "key_hash",)
    before = path.read_bytes()
    upgrade(path)  # a current warehouse: nothing to do
    assert path.read_bytes() == before
