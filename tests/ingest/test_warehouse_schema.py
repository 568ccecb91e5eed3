"""`ensure_schema` on a connection that already has the tables and macros checks that nothing
undid them (~3 ms) instead of creating them again; whatever undid them — a dropped or altered
table, another connection's change, a rolled-back transaction, another zone — makes it run
again."""

from datetime import date

import duckdb

from cost_pipeline.warehouse import ensure_schema
from tests.support.recording import Recording

JULY = date(2026, 7, 1)


def _creates(con: duckdb.DuckDBPyConnection) -> list[str]:
    recording = Recording(con)
    ensure_schema(recording)
    return [s for s in recording.statements if "CREATE" in s.upper()]


def _macro_works(con) -> bool:
    return con.execute(
        "SELECT run_hash_of('r1') = hash('r1', reverse('r1'))").fetchall() == [(True,)]


def test_a_second_call_creates_nothing():
    con = duckdb.connect()
    assert _creates(con)  # the tables and macros
    assert _creates(con) == []
    con.execute("INSERT INTO input_tokens VALUES (?, 'tracker', 't')", [JULY])  # rows: no change
    assert _creates(con) == []
    assert _macro_works(con)


def test_a_table_dropped_or_altered_since_is_made_again(tmp_path):
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    ensure_schema(con)
    con.execute("DROP TABLE billing_months")
    assert _creates(con)
    assert "billing_months" in {t for (t,) in con.execute("SHOW TABLES").fetchall()}
    # an older version's attribution_runs (no cost_exact): the sums are made again
    con.execute("ALTER TABLE attribution_runs DROP COLUMN cost_exact")
    ensure_schema(con)
    ((found,),) = con.execute(
        "SELECT count(*) FROM information_schema.columns "
        "WHERE table_name = 'attribution_runs' AND column_name = 'cost_exact'").fetchall()
    assert found == 1


def test_another_connections_change_is_seen(tmp_path):
    db = duckdb.connect(str(tmp_path / "w.duckdb"))
    one, other = db.cursor(), db.cursor()
    ensure_schema(one)
    ensure_schema(other)
    other.execute("DROP TABLE input_tokens")
    assert _creates(one)
    assert one.execute("SELECT count(*) FROM input_tokens").fetchall() == [(0,)]


def test_a_rolled_back_first_call_is_done_again(tmp_path):
    path = str(tmp_path / "w.duckdb")
    with duckdb.connect(path) as writer:
        ensure_schema(writer)  # the tables, committed
    con = duckdb.connect(path)
    con.execute("BEGIN TRANSACTION")
    ensure_schema(con)  # the tables as they were; this connection's macros
    con.execute("ROLLBACK")  # the macros are gone, the tables are not
    assert _creates(con)
    assert _macro_works(con)


def test_a_rolled_back_later_call_keeps_what_was_committed():
    con = duckdb.connect()
    ensure_schema(con)
    con.execute("BEGIN TRANSACTION")
    con.execute("DROP TABLE billing_months")
    ensure_schema(con)  # makes it again, in the transaction
    con.execute("ROLLBACK")  # the table as committed, with the macros and mark
    assert _creates(con) == []
    assert _macro_works(con)


def test_another_zone_is_set_back_to_utc():
    con = duckdb.connect()
    ensure_schema(con)
    con.execute("SET TimeZone = 'Asia/Tokyo'")
    ensure_schema(con)
    assert con.execute("SELECT current_setting('TimeZone')").fetchall() == [("UTC",)]


def test_a_registered_view_is_let_go_inside_an_aborted_transaction():
    # a failed statement leaves the open transaction aborted, where DuckDB refuses even an
    # unregister: called in a `finally`, it replaced the failure being raised by
    # "Current transaction is aborted"
    import pyarrow as pa
    import pytest

    from cost_pipeline.warehouse import unregister

    with duckdb.connect() as con:
        con.register("rows_in", pa.table({"x": [1]}))
        con.execute("BEGIN TRANSACTION")
        with pytest.raises(duckdb.Error):
            con.execute("SELECT CAST('x' AS INTEGER) FROM rows_in")
        with pytest.raises(duckdb.TransactionException):
            con.unregister("rows_in")  # what the readers' `finally` blocks did
        unregister(con, "rows_in")
        con.execute("ROLLBACK")
        unregister(con, "rows_in")
        with pytest.raises(duckdb.CatalogException):
            con.execute("SELECT * FROM rows_in")


def test_an_error_raised_while_an_interrupted_query_was_handled_is_the_interrupt():
    # a signal while a query ran aborts the transaction: a cleanup's query then fails with
    # "Current transaction is aborted", raised in the interruption's place. It is read as
    # the interruption (the command exits 130, the run's step stops as interrupted), not as
    # an error of its own (exit 1)
    import threading

    import pytest

    from cost_pipeline.warehouse import query_interrupted

    with duckdb.connect() as con:
        con.execute("BEGIN TRANSACTION")
        threading.Timer(0.3, con.interrupt).start()
        with pytest.raises(duckdb.TransactionException) as caught:
            try:
                con.execute("SELECT count(*) FROM range(100000000000) t(i) "
                            "WHERE i % 7 = 3").fetchall()
            finally:
                con.execute("SELECT 1").fetchall()
        assert query_interrupted(caught.value)
        con.execute("ROLLBACK")
        with pytest.raises(duckdb.CatalogException) as other:
            try:
                con.execute("SELECT * FROM no_such_table")
            finally:
                con.execute("SELECT 1").fetchall()
        assert not query_interrupted(other.value)
