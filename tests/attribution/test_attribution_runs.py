"""`attribution_runs`: the month's attribution summed per run and group, which the decisions
read; a warehouse written before it existed gets it for every month it holds."""

from datetime import date

import duckdb
import pytest

from cost_pipeline.warehouse import ensure_schema, summarize_month, upgrade

JULY, AUGUST = date(2026, 7, 1), date(2026, 8, 1)
ROWS = [  # month, line, run, purpose class, component, cost, hours, accelerator-hours, kind
    (JULY, "l1", "r1", "search", "gpu", 10.25, 1.0, 4.0, None),
    (JULY, "l2", "r1", "search", "gpu", 0.75, 0.5, 2.0, None),
    (JULY, "l3", "r1", "search", "storage", 0.5, None, None, None),
    (JULY, "l1", None, "untracked", "gpu", 3.0, 0.25, 1.0, "no_run"),
    (AUGUST, "l9", "r2", "production", "cpu", 7.0, 2.0, 0.0, None),
]


def _runs(con) -> None:
    """The tracker runs the rows name (attribution_rows names a run by key_hash(run_id))."""
    con.executemany(
        "INSERT INTO tracker_runs (month, run_id, status, start_time, keep, deleted) "
        "VALUES (?, ?, 'FINISHED', ?, false, false)",
        [(JULY, "r1", "2026-07-02"), (AUGUST, "r2", "2026-08-02")])


def _warehouse(path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(str(path))
    ensure_schema(con)
    _runs(con)
    con.executemany(
        "INSERT INTO attribution_rows (month, line_key, run_hash, purpose_class, component, "
        "cost, hours, accelerator_hours, share, rule, kind) "
        "VALUES (?, key_hash(?), run_hash_of(?), ?, ?, ?, ?, ?, 1.0, 'compute', ?)", ROWS)
    return con


def _sums(con):
    return con.execute(
        "SELECT month, run_id, purpose_class, component, cost, hours, accelerator_hours, rows "
        "FROM attribution_runs ORDER BY month, run_id NULLS LAST, component").fetchall()


EXPECTED = [
    (JULY, "r1", "search", "gpu", 11.0, 1.5, 6.0, 2),
    (JULY, "r1", "search", "storage", 0.5, None, None, 1),
    (JULY, None, "untracked", "gpu", 3.0, 0.25, 1.0, 1),
    (AUGUST, "r2", "production", "cpu", 7.0, 2.0, 0.0, 1),
]


def test_summarize_month_replaces_only_its_month(tmp_path):
    con = _warehouse(tmp_path / "w.duckdb")
    summarize_month(con, JULY)
    summarize_month(con, AUGUST)
    summarize_month(con, JULY)  # again: replaced, not added
    assert _sums(con) == EXPECTED


def test_an_older_warehouse_gets_the_sums_of_every_month(tmp_path):
    path = tmp_path / "old.duckdb"
    con = _warehouse(path)
    con.execute("DROP TABLE attribution_runs")  # as written before the table existed
    con.close()
    con = duckdb.connect(str(path))
    ensure_schema(con)
    assert _sums(con) == EXPECTED
    ensure_schema(con)  # once only
    assert _sums(con) == EXPECTED


def test_the_reports_bill_from_the_sums_equals_the_rows(tmp_path):
    from cost_pipeline.report.data import bill_matrix

    con = _warehouse(tmp_path / "w.duckdb")
    summarize_month(con, JULY)
    rows = dict(((component, purpose), cost) for component, purpose, cost in con.execute(
        "SELECT component, purpose_class, sum(cost) FROM attribution_rows WHERE month = ? "
        "GROUP BY ALL", [JULY]).fetchall())
    assert bill_matrix(con, JULY)["cost"] == rows
    assert bill_matrix(con, JULY)["total"] == 14.5  # July's four rows


def _older_warehouse(path) -> None:
    """A warehouse as written before attribution_rows: `attribution` a table carrying
    x_SourceLine on every row, no per-run sums."""
    con = duckdb.connect(str(path))
    ensure_schema(con)
    con.execute("DROP VIEW attribution")
    con.execute("DROP TABLE attribution_rows")
    con.execute("DROP TABLE attribution_runs")
    con.execute(
        "CREATE TABLE attribution (month DATE NOT NULL, x_SourceLine VARCHAR NOT NULL, "
        "run_id VARCHAR, purpose_class VARCHAR NOT NULL, component VARCHAR NOT NULL, "
        "cost DOUBLE NOT NULL, hours DOUBLE, accelerator_hours DOUBLE, share DOUBLE NOT NULL, "
        "claimed_share DOUBLE, rule VARCHAR NOT NULL, kind VARCHAR)")
    con.executemany(
        "INSERT INTO attribution VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1.0, NULL, 'compute', ?)", ROWS)
    con.executemany(
        "INSERT INTO billing_facts (month, x_SourceLine, EffectiveCost) VALUES (?, ?, 1.0)",
        sorted({(m, line) for m, line, *_ in ROWS}))
    _runs(con)
    con.close()


def _warehouse_naming_runs_by_id(path) -> None:
    """A warehouse as written before `run_hash`: attribution_rows carrying each row's run_id
    (and VARCHAR vocabularies, as before the ENUMs)."""
    con = duckdb.connect(str(path))
    ensure_schema(con)
    con.execute("DROP TABLE attribution_rows")
    con.execute(
        "CREATE TABLE attribution_rows (month DATE NOT NULL, line_key UBIGINT NOT NULL, "
        "run_id VARCHAR, purpose_class VARCHAR NOT NULL, component VARCHAR NOT NULL, "
        "cost DOUBLE NOT NULL, hours DOUBLE, accelerator_hours DOUBLE, share DOUBLE NOT NULL, "
        "claimed_share DOUBLE, rule VARCHAR NOT NULL, kind VARCHAR)")
    con.executemany(
        "INSERT INTO attribution_rows VALUES (?, hash(?), ?, ?, ?, ?, ?, ?, 1.0, NULL, "
        "'compute', ?)", ROWS)
    con.executemany(
        "INSERT INTO billing_facts (month, x_SourceLine, EffectiveCost) VALUES (?, ?, 1.0)",
        sorted({(m, line) for m, line, *_ in ROWS}))
    _runs(con)
    con.executemany(  # its per-run sums, as that version wrote them
        "INSERT INTO attribution_runs (month, run_id, purpose_class, component, rule, cost, "
        "hours, accelerator_hours, rows) VALUES (?, ?, ?, ?, 'compute', ?, ?, ?, ?)",
        EXPECTED)
    con.close()


def test_an_attribution_table_of_an_older_warehouse_becomes_rows_and_the_view(tmp_path):
    path = tmp_path / "old.duckdb"
    _older_warehouse(path)
    con = duckdb.connect(str(path))
    ensure_schema(con)
    assert con.execute("SELECT table_type FROM information_schema.tables "
                       "WHERE table_name = 'attribution'").fetchall() == [("VIEW",)]
    assert set(con.execute(
        "SELECT month, x_SourceLine, run_id, purpose_class, component, cost, hours, "
        "accelerator_hours, kind FROM attribution").fetchall()) == set(ROWS)
    assert _sums(con) == EXPECTED


def test_read_only_readers_upgrade_an_older_warehouse_first(tmp_path):
    path = tmp_path / "old.duckdb"
    _older_warehouse(path)
    upgrade(path)
    with duckdb.connect(str(path), read_only=True) as con:
        assert _sums(con) == EXPECTED
        assert con.execute("SELECT count(*) FROM attribution WHERE x_SourceLine IS NOT NULL"
                           ).fetchone() == (len(ROWS),)
    upgrade(path)  # a current warehouse: nothing to do


def test_rows_naming_runs_by_id_are_rewritten_with_run_hashes(tmp_path):
    path = tmp_path / "old.duckdb"
    _warehouse_naming_runs_by_id(path)
    upgrade(path)  # what a read-only reader does first
    with duckdb.connect(str(path), read_only=True) as con:
        columns = [c for (c,) in con.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_name = 'attribution_rows' ORDER BY ordinal_position").fetchall()]
        assert "run_id" not in columns and "run_hash" in columns
        # NULL for the untracked row: no run, not hash(NULL)
        assert con.execute("SELECT count(*) FROM attribution_rows WHERE run_hash IS NULL"
                           ).fetchone() == (1,)
        assert set(con.execute(
            "SELECT month, x_SourceLine, run_id, purpose_class, component, cost, hours, "
            "accelerator_hours, kind FROM attribution").fetchall()) == set(ROWS)
        assert _sums(con) == EXPECTED
    upgrade(path)  # a current warehouse: nothing to do
    con = duckdb.connect(str(path))
    ensure_schema(con)  # and a writer's open finds it current too
    assert _sums(con) == EXPECTED


def test_the_small_vocabularies_are_enums_that_read_as_strings(tmp_path):
    con = _warehouse(tmp_path / "w.duckdb")
    for enum in ("attribution_purpose_class", "attribution_component", "attribution_rule"):
        (values,) = con.execute(f"SELECT enum_range(NULL::{enum})").fetchone()
        # alphabetical: ORDER BY, min and max order them as they order the strings
        assert values == sorted(values), enum
    (purposes,) = con.execute("SELECT enum_range(NULL::attribution_purpose_class)").fetchone()
    assert purposes == ["other", "preprocessing", "production", "search", "unallocated",
                        "untracked"]
    # the view keeps SPEC §7's VARCHAR columns
    types = dict(con.execute("SELECT column_name, data_type FROM information_schema.columns "
                             "WHERE table_name = 'attribution'").fetchall())
    assert {types[c] for c in ("purpose_class", "component", "rule")} == {"VARCHAR"}
    assert con.execute("SELECT purpose_class FROM attribution_rows WHERE month = ? "
                       "ORDER BY purpose_class", [JULY]).fetchall() == [
        ("search",), ("search",), ("search",), ("untracked",)]
    # a value outside the vocabulary is refused, not stored
    with pytest.raises(duckdb.ConversionException):
        con.execute("INSERT INTO attribution_rows (month, line_key, purpose_class, component, "
                    "cost, share, rule) VALUES (?, 1, 'research', 'gpu', 1, 1, 'compute')",
                    [JULY])


# costs whose doubles do not add up exactly: 0.1 + 0.2 is not 0.3 as a double
# (and a million and a tenth of a billionth, thrice: its sum needs more digits than a double)
AWKWARD = [0.1, 0.2, 0.7, 1e-10, 33.333333333333336, 1234567.8901234567, 0.30000000000000004,
           1000000.0000000001, 1000000.0000000001, 1000000.0000000001]


def _awkward_warehouse(path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(str(path))
    ensure_schema(con)
    _runs(con)
    rows = [(month, f"{month:%m}-l{i}", run, purpose, component, cost)
            for month, run, purpose in ((JULY, "r1", "search"), (JULY, None, "untracked"),
                                        (AUGUST, "r2", "production"))
            for i, (component, cost) in enumerate(
                (c, v) for c in ("gpu", "storage") for v in AWKWARD)]
    con.executemany(
        "INSERT INTO attribution_rows (month, line_key, run_hash, purpose_class, component, "
        "cost, hours, accelerator_hours, share, rule) "
        "VALUES (?, key_hash(?), run_hash_of(?), ?, ?, ?, 1.0, 1.0, 1.0, 'compute')", rows)
    summarize_month(con, JULY)
    summarize_month(con, AUGUST)
    return con


ROW_SUMS = """
    SELECT month, purpose_class::VARCHAR, component::VARCHAR,
           sum(CAST(cost AS DECIMAL(38, 10))) AS cost
    FROM attribution_rows GROUP BY ALL ORDER BY ALL"""


def test_the_months_exact_costs_from_the_sums_equal_every_row_summed_as_decimal(tmp_path):
    from cost_pipeline.report.strip import read_rows

    con = _awkward_warehouse(tmp_path / "w.duckdb")
    cells = read_rows(con, "period_purpose_component", JULY, AUGUST)
    assert [(c["month"], c["purpose_class"], c["component"], c["cost"]) for c in cells] \
        == con.execute(ROW_SUMS).fetchall()
    # and not merely close: the per-run sums as doubles miss it in the last digit
    doubles = con.execute("SELECT sum(CAST(cost AS DECIMAL(38, 10))) FROM attribution_runs "
                          "WHERE month = ? AND component = 'gpu' AND run_id = 'r1'",
                          [JULY]).fetchone()[0]
    exact = con.execute("SELECT sum(cost_exact) FROM attribution_runs WHERE month = ? "
                        "AND component = 'gpu' AND run_id = 'r1'", [JULY]).fetchone()[0]
    rows = con.execute("SELECT sum(CAST(cost AS DECIMAL(38, 10))) FROM attribution "
                       "WHERE month = ? AND component = 'gpu' AND run_id = 'r1'",
                       [JULY]).fetchone()[0]
    assert exact == rows != doubles


def test_sums_written_before_their_exact_cost_are_summed_again_on_upgrade(tmp_path):
    path = tmp_path / "w.duckdb"
    con = _awkward_warehouse(path)
    con.execute("ALTER TABLE attribution_runs DROP COLUMN cost_exact")  # as written before
    con.close()
    upgrade(path)  # what a read-only reader (the report) does first
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM attribution_runs WHERE cost_exact IS NULL"
                           ).fetchone() == (0,)
        assert con.execute(
            "SELECT month, purpose_class, component, sum(cost_exact) FROM attribution_runs "
            "GROUP BY ALL ORDER BY ALL").fetchall() == con.execute(ROW_SUMS).fetchall()


def test_runs_stopped_without_an_end_are_named(tmp_path, caplog):
    """SPEC §6: such a run claims nothing "and is reported": the reconciliation counted
    them, naming none. Attributing the month names those started in it, in start order."""
    import logging
    from pathlib import Path

    from cost_pipeline.attribution import build_attribution
    from cost_pipeline.config import parse_config
    from cost_pipeline.warehouse import month_params

    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    ensure_schema(con)
    con.executemany(
        "INSERT INTO tracker_runs (month, run_id, status, start_time, keep, deleted) "
        "VALUES (?, ?, ?, ?, false, false)",
        [(JULY, f"f{n}", "FAILED", f"2026-07-{10 - n:02d}") for n in range(7)]
        + [(JULY, "old", "KILLED", "2026-06-30"), (JULY, "live", "RUNNING", "2026-07-02")])
    log = logging.getLogger("test")
    with caplog.at_level(logging.WARNING, logger="test"):
        build_attribution(con, JULY, month_params(parse_config({}, Path(".")), JULY), log=log)
    assert ("attribution: 7 run(s) started in 2026-07 stopped without an end, so they claim "
            "nothing (their lines go untracked): f6, f5, f4, f3, f2 and 2 more") in caplog.text
    con.close()
