"""The DuckDB warehouse: the table DDL, the `.sql` files of `assets/`, and the one way a
month is written (delete the month, insert the month, in one transaction)."""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from datetime import date
from functools import cache
from importlib import resources
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import duckdb

from cost_pipeline.config import PipelineConfig
from cost_pipeline.ingest.sources import sql_identifier
from cost_pipeline.interrupts import chain, stop_if_swallowed
from cost_pipeline.months import month_bounds

if TYPE_CHECKING:
    import pyarrow as pa

# set on a connection that holds one transaction for a whole Dagster run (defs/resources.py)
_RUN_TRANSACTION = "cost_pipeline_run_transaction"
_SCHEMA_READY = "cost_pipeline_schema_ready"  # ensure_schema ran in this run's transaction
# outside a run: a temp table, created with the macros (both vanish if their transaction rolls
# back), and a variable holding the tables' definitions (and the zone) it saw (`_SCHEMA_STATE`)
_SCHEMA_MARK = "cost_pipeline_schema"
_SCHEMA_STATE = ("SELECT hash(current_setting('TimeZone'),"
                 " string_agg(sql, ';' ORDER BY table_name)) FROM duckdb_tables()"
                 " WHERE database_name = current_database()"
                 " AND schema_name = 'main' AND NOT temporary")

_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def _sql_dir() -> Path:
    """`assets/` in a checkout; `cost_pipeline/sql/` in an installed wheel."""
    checkout = Path(__file__).resolve().parent.parent / "assets"
    if (checkout / "schema.sql").exists():
        return checkout
    return Path(str(resources.files("cost_pipeline") / "sql"))


@cache
def sql_files() -> dict[str, Path]:
    """Every `.sql` file of `assets/` by name (without `.sql`), from any of its role folders:
    `schema.sql` and `macros.sql` at the top; `ingest/`, `attribution/`, `decisions/` (one file
    per table) and `queries/` (what the CLI, the checks and the report read)."""
    files: dict[str, Path] = {}
    for path in sorted(_sql_dir().rglob("*.sql")):
        name = path.name.removesuffix(".sql")
        if name in files:
            raise RuntimeError(f"two SQL files named {name}.sql: {files[name]} and {path}")
        files[name] = path
    return files


@cache
def sql_text(name: str) -> str:
    """The text of the `assets/**/<name>.sql` file."""
    return sql_files()[name].read_text(encoding="utf-8")


def define_macro(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Create the macro `name` of assets/macros.sql on `con`, as the pipeline's connections
    have it: a reader (the report) reads through a read-only connection, which has none of
    them. The statement is macros.sql's own text (each ends with `;` at the end of a line)."""
    found = re.search(rf"^CREATE OR REPLACE TEMP MACRO {re.escape(name)}\(.*?;[ \t]*$",
                      sql_text("macros"), re.DOTALL | re.MULTILINE)
    if found is None:
        raise KeyError(f"macros.sql defines no macro {name}")
    con.execute(found.group(0))


def bind(sql: str, params: dict[str, Any]) -> dict[str, Any]:
    """The subset of `params` that `sql` names (DuckDB refuses unused named parameters)."""
    wanted = set(_PARAM.findall(_strip_comments(sql)))
    missing = wanted - params.keys()
    if missing:
        raise KeyError(f"SQL parameter(s) not supplied: {', '.join(sorted(missing))}")
    return {k: params[k] for k in wanted}


def _strip_comments(sql: str) -> str:
    return re.sub(r"--[^\n]*", "", sql)


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create the tables if needed and the connection's macros (`assets/macros.sql`);
    timestamps are UTC whatever the machine's zone. Inside a run's transaction this is done
    once: every step of the run shares the connection, and the run commits or rolls back as
    a whole. On any other connection it is done again only when something undid it
    (`_schema_unchanged`)."""
    ((ready, seen),) = con.execute(
        f"SELECT getvariable('{_RUN_TRANSACTION}') IS TRUE "
        f"AND getvariable('{_SCHEMA_READY}') IS TRUE, getvariable('{_SCHEMA_MARK}')").fetchall()
    if ready or (seen is not None and _schema_unchanged(con, seen)):
        return
    con.execute("SET TimeZone = 'UTC'")
    before = dict(con.execute(  # table or view name → its type
        "SELECT table_name, table_type FROM information_schema.tables "
        "WHERE table_schema = 'main'").fetchall())
    old_attribution = before.get("attribution") == "BASE TABLE"
    if old_attribution:
        # a warehouse from before `attribution_rows`: its table makes way for the view
        con.execute("ALTER TABLE attribution RENAME TO attribution_before_line_keys")
    old_run_ids = "attribution_rows" in before and _names_runs_by_id(con)
    # rows keyed by DuckDB's hash of the text alone (macros.sql `key_hash`): keyed again below
    old_keys = "attribution_rows" in before and not _keyed_by_key_hash(con)
    # per-run sums written before their exact DECIMAL cost: summed again below
    inexact_sums = ("attribution_runs" in before
                    and not _has_column(con, "attribution_runs", "cost_exact"))
    if old_run_ids:
        # a warehouse from before `run_hash`: its rows are written again with the new columns
        con.execute("ALTER TABLE attribution_rows RENAME TO attribution_rows_before_run_hashes")
    con.execute(sql_text("schema"))
    run_script(con, sql_text("macros"), {})
    if old_attribution:
        con.execute(
            "INSERT INTO attribution_rows BY NAME SELECT * EXCLUDE (x_SourceLine, run_id), "
            "key_hash(x_SourceLine) AS line_key, run_hash_of(run_id) AS run_hash "
            "FROM attribution_before_line_keys")
        con.execute("DROP TABLE attribution_before_line_keys")
    if old_run_ids:
        con.execute(
            "INSERT INTO attribution_rows BY NAME SELECT * EXCLUDE (run_id), "
            "run_hash_of(run_id) AS run_hash FROM attribution_rows_before_run_hashes")
        con.execute("DROP TABLE attribution_rows_before_run_hashes")
    if old_keys:
        _key_again(con, runs=not old_run_ids)
    if old_keys or "attribution_rows" not in before:  # (the rows' table is new, or keyed now)
        con.execute(f"COMMENT ON COLUMN attribution_rows.line_key IS '{KEY_COMMENT}'")
    if "attribution_runs" not in before or inexact_sums:
        # a warehouse from before the per-run sums (or their `cost_exact`): every month it
        # holds gets them now, so that the decisions reading them see earlier months
        # (search_trend, search_costs), and the reports' months their exact costs
        for (month,) in con.execute(
                "SELECT DISTINCT month FROM attribution_rows ORDER BY month").fetchall():
            summarize_month(con, month)
    if "billing_months" not in before and "billing_facts" in before:
        # a warehouse from before the months' bills: every month it holds gets its row
        query(con, f"INSERT INTO billing_months BY NAME ({sql_text('period_month_totals')})",
              {"first": date.min, "last": date.max})
    if in_run_transaction(con):
        con.execute(f"SET VARIABLE {_SCHEMA_READY} = true")
    con.execute(f"CREATE OR REPLACE TEMP TABLE {_SCHEMA_MARK} (ready BOOLEAN)")
    con.execute(f"SET VARIABLE {_SCHEMA_MARK} = ({_SCHEMA_STATE})")


def _schema_unchanged(con: duckdb.DuckDBPyConnection, seen: int) -> bool:
    """Whether nothing undid what `ensure_schema` did on this connection, when it saw the
    tables' state `seen`: its mark (a temp table, which a rolled-back transaction takes away
    with the macros created in it) is there, and the tables are defined as it left them
    (~3 ms, against ~60 ms to create them and the macros again). A table dropped, renamed or
    altered since, or the zone set otherwise, runs it again."""
    ((unchanged,),) = con.execute(
        f"SELECT ({_SCHEMA_STATE}) = ? AND EXISTS (SELECT 1 FROM duckdb_tables() "
        f"WHERE temporary AND table_name = '{_SCHEMA_MARK}')", [seen]).fetchall()
    return bool(unchanged)


# the comment on attribution_rows.line_key of a warehouse whose rows name their lines and runs
# by macros.sql `key_hash`
KEY_COMMENT = "key_hash"


def _keyed_by_key_hash(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether `attribution_rows` names its lines and runs by `key_hash`, not by DuckDB's hash
    of the text alone (a warehouse written before it: two ids differing in a few digits could
    share that one, and ingest refused their month)."""
    found = con.execute(
        "SELECT comment FROM duckdb_columns() WHERE schema_name = 'main' "
        "AND table_name = 'attribution_rows' AND column_name = 'line_key'").fetchall()
    return bool(found) and found[0][0] == KEY_COMMENT


def _key_again(con: duckdb.DuckDBPyConnection, runs: bool = True) -> None:
    """Name each stored attribution row's line (and run, with `runs`) by `key_hash` where it
    was named by hash(text): each month's old key is one line's, or one run's (ingest refused
    a month where two shared one), found among the month's billing lines and tracker runs."""
    con.execute(
        "UPDATE attribution_rows AS a SET line_key = k.new_key FROM ("
        "SELECT DISTINCT month, hash(x_SourceLine) AS old_key, key_hash(x_SourceLine) AS new_key "
        "FROM billing_facts) AS k WHERE k.month = a.month AND k.old_key = a.line_key")
    if runs:
        con.execute(
            "UPDATE attribution_rows AS a SET run_hash = k.new_key FROM ("
            "SELECT DISTINCT month, hash(run_id) AS old_key, key_hash(run_id) AS new_key "
            "FROM tracker_runs) AS k WHERE k.month = a.month AND k.old_key = a.run_hash")


def _names_runs_by_id(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether `attribution_rows` is an older version's, naming each row's run by its run_id
    rather than by `run_hash`."""
    return _has_column(con, "attribution_rows", "run_id")


def _has_column(con: duckdb.DuckDBPyConnection, table: str, column: str) -> bool:
    ((found,),) = con.execute(
        "SELECT count(*) > 0 FROM information_schema.columns WHERE table_schema = 'main' "
        "AND table_name = ? AND column_name = ?", [table, column]).fetchall()
    return found


# macros.sql's `in_summary_scope` as it is outside a partial re-run
SUM_EVERY_RUN = "CREATE OR REPLACE TEMP MACRO in_summary_scope(row_run_hash, row_rule) AS true"


def summarize_month(con: duckdb.DuckDBPyConnection, month: date,
                    groups: str | None = None) -> None:
    """Replace the month's `attribution_runs` by its attribution rows summed per run and
    group (`attribution_runs.sql`), in the caller's transaction: every run's, or only the
    sums of the (run_hash, rule) pairs in the temp table `groups` (a NULL run_hash: the rows
    of no run — untracked, unallocated — under that rule), the others' sums being those of
    their unchanged rows."""
    if groups is None:
        con.execute("DELETE FROM attribution_runs WHERE month = ?", [month])
    else:
        # hash(NULL) is not NULL: the rows of no run match their pair by macros.sql
        # `run_hash_of`
        con.execute(f"DELETE FROM attribution_runs AS s WHERE month = ? AND EXISTS ("
                    f"SELECT 1 FROM {groups} AS g WHERE g.rule = s.rule AND g.run_hash IS NOT "
                    f"DISTINCT FROM run_hash_of(s.run_id))", [month])
        # the pairs' columns named apart: a caller's bare `run_hash` must bind to its own row
        con.execute(f"CREATE OR REPLACE TEMP MACRO in_summary_scope(row_run_hash, row_rule) AS "
                    f"EXISTS (SELECT 1 FROM (SELECT run_hash AS scope_run_hash, rule AS "
                    f"scope_rule FROM {groups}) WHERE scope_rule = row_rule "
                    f"AND scope_run_hash IS NOT DISTINCT FROM row_run_hash)")
    query(con, f"INSERT INTO attribution_runs BY NAME ({sql_text('attribution_runs')})",
          {"month": month})
    if groups is not None:
        con.execute(SUM_EVERY_RUN)


def query(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any] | None = None):
    """Run `sql` with only the named parameters it uses (not after a signal: interrupts.py)."""
    stop_if_swallowed()
    return con.execute(sql, bind(sql, params or {}))


def rows_of(con: duckdb.DuckDBPyConnection, sql: str,
            params: list | dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """`sql`'s rows as dicts by column name: `?` parameters from a list, `$name` ones from a
    dict."""
    cursor = (con.execute(sql, params) if isinstance(params, list)
              else query(con, sql, params))
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def table_names(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The tables the warehouse holds (a report may read one that an old warehouse lacks)."""
    return {name for (name,) in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
    ).fetchall()}


def run_script(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any]) -> None:
    """Run the statements of a `.sql` script (each ends with `;` at the end of a line), each
    with the named parameters it uses."""
    for statement in re.split(r";[ \t]*\n", _strip_comments(sql)):
        if statement.strip():
            query(con, statement, params)


def replace_month(
    con: duckdb.DuckDBPyConnection,
    table: str,
    month: date,
    select_sql: str,
    params: dict[str, Any],
    input_name: str | None = None,
) -> int:
    """Replace `table`'s rows of `month` by the rows of `select_sql`, atomically.

    The SELECT must produce the table's columns by name (`month` included). On any error the
    transaction rolls back and the month keeps its previous rows. Returns the rows written.
    With `input_name`, the month's rows are an input of the decision tables: their hash is
    noted as its token, in the same transaction (`note_input`).
    """
    ensure_schema(con)
    with month_transaction(con):
        return write_month(con, table, month, select_sql, params, input_name)


# a re-delivery whose changed rows are more than this share of the month's is written whole:
# deleting most rows in place is no quicker than writing them again
REWRITE_CHANGED_MAX_SHARE = 0.25


def replace_month_unless_identical(
    con: duckdb.DuckDBPyConnection,
    table: str,
    month: date,
    select_sql: str,
    params: dict[str, Any],
    input_name: str,
    keep_identical: bool = True,
    key: str | None = None,
) -> tuple[int, bool]:
    """`replace_month` with `input_name`, unless the month already holds exactly the rows of
    `select_sql` (the same count and sum of row hashes, `content_token`): then the rows stay
    as they are, unwritten (not without `keep_identical`). Returns (rows, kept). For a table
    of one row per run, smaller than a row group: its rows go through the WAL at the commit,
    then into the file at the checkpoint — for 100,000 runs read again unchanged, ~0.45 s of
    deleting, inserting and committing what was there (an MLflow tracker is read on every
    run). With `key`, a column naming one row of the month (a run's id), only the rows whose
    key's row changed, came or went are deleted and written (`_rewrite_changed`)."""
    ensure_schema(con)
    with month_transaction(con):
        stored = _month_rows(con, table, month) if keep_identical else 0
        if not stored:  # (a first write, or every write without keep_identical)
            return write_month(con, table, month, select_sql, params, input_name), False
        staged = f"{table}_staged"
        # the table's own column types: the same values hash the same
        con.execute(f"CREATE OR REPLACE TEMP TABLE {staged} AS FROM {table} LIMIT 0")
        try:
            query(con, f"INSERT INTO {staged} BY NAME ({select_sql})", params)
            # each row hashed once, for the tokens and (with `key`) for the rows that changed
            _hash_rows(con, table, f"{staged}_old", key, month)
            _hash_rows(con, staged, f"{staged}_new", key, month)
            token = _hashed_token(con, f"{staged}_new")
            kept = token == _hashed_token(con, f"{staged}_old")
            if not kept and not (key and _rewrite_changed(con, table, staged, month, key,
                                                          stored)):
                con.execute(f"DELETE FROM {table} WHERE month = ?", [month])
                con.execute(f"INSERT INTO {table} BY NAME FROM {staged}")
            note_input(con, month, input_name, token)
            return _month_rows(con, table, month), kept
        finally:
            # after an error only the rollback may run, and it drops the table with the rest
            if not transaction_aborted(con):
                for temp in ("", "_old", "_new", "_changed"):
                    con.execute(f"DROP TABLE IF EXISTS {staged}{temp}")


def _rewrite_changed(con: duckdb.DuckDBPyConnection, table: str, staged: str, month: date,
                     key: str, stored: int) -> bool:
    """Replace the month's rows of `table` by `staged`'s where a `key`'s row differs (by its
    hash, as `content_token` compares them: `_hash_rows` hashed both sides, each row once, into
    `{staged}_old` and `{staged}_new`), is new or is gone; False — nothing written —
    when they are more than `REWRITE_CHANGED_MAX_SHARE` of the month's `stored` rows. The rows a
    re-delivery did not change stay where they are: at 2M lines with 1% of 100,000 runs
    changed, the run's WAL shrinks from 60.5 to 44.5 MB and its commit (before the
    checkpoint) from 0.20 to 0.14 s. Every reader orders what it reads
    (tests/cli/test_runs_order.py): where a row lies does not change what they compute."""
    changed = f"{staged}_changed"
    con.execute(f"CREATE OR REPLACE TEMP TABLE {changed} AS "
                f"SELECT coalesce(o.k, n.k) AS k FROM {staged}_old AS o "
                f"FULL JOIN {staged}_new AS n ON n.k = o.k WHERE o.h IS DISTINCT FROM n.h")
    ((rows, nameless),) = con.execute(
        f"SELECT count(*), count(*) FILTER (WHERE k IS NULL) FROM {changed}").fetchall()
    if nameless or rows > REWRITE_CHANGED_MAX_SHARE * stored:  # (a NULL key names no row)
        return False
    con.execute(f"DELETE FROM {table} WHERE month = ? AND {key} IN (SELECT k FROM {changed})",
                [month])
    con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {staged} "
                f"WHERE {key} IN (SELECT k FROM {changed})")
    return True


def _hash_rows(con: duckdb.DuckDBPyConnection, table: str, hashed: str, key: str | None,
               month: date) -> None:
    """The month's rows of `table` as (`key` k, NULL without one; `row_hash` h) in the temp
    table `hashed`."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE {hashed} AS SELECT {key or 'NULL'} AS k, "
                f"{row_hash(con, table, 't')} AS h FROM {table} AS t WHERE month = ?", [month])


def _hashed_token(con: duckdb.DuckDBPyConnection, hashed: str) -> str:
    """`content_token` of the rows `_hash_rows` hashed into `hashed`."""
    ((rows, hashes),) = con.execute(
        f"SELECT count(*), coalesce(sum(h), 0) FROM {hashed}").fetchall()
    return f"{rows}:{hashes}"


def query_interrupted(exc: BaseException) -> bool:
    """Whether `exc` is DuckDB giving up a query because a signal arrived while it ran: the
    handler's exception (KeyboardInterrupt, Dagster's interruption) is swallowed and the query
    fails with DuckDB's own error — `RuntimeError("Query interrupted")` when Python's signal
    check stopped it, `duckdb.InterruptException` when the connection was interrupted. Nothing
    else interrupts a query here. An error raised while such an error was handled (a cleanup's
    query refused in the transaction the interruption aborted) is the interruption's too."""
    return any(isinstance(e, duckdb.InterruptException) or (
        type(e) is RuntimeError and "Query interrupted" in str(e)) for e in chain(exc))


def transaction_aborted(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the connection's transaction failed (nothing but a rollback runs then)."""
    try:
        con.execute("SELECT 1").fetchall()
    except duckdb.Error:
        return True
    return False


def write_month(con: duckdb.DuckDBPyConnection, table: str, month: date, select_sql: str,
                params: dict[str, Any], input_name: str | None = None) -> int:
    """`replace_month`'s writes, in the caller's transaction (`month_transaction`): the rows
    written."""
    con.execute(f"DELETE FROM {table} WHERE month = ?", [month])
    query(con, f"INSERT INTO {table} BY NAME ({select_sql})", params)
    if input_name is not None:
        note_input(con, month, input_name, content_token(con, table, month))
    return _month_rows(con, table, month)


def _month_rows(con: duckdb.DuckDBPyConnection, table: str, month: date) -> int:
    # fetchall: no unread result may stay on a connection the next step reuses
    ((rows,),) = con.execute(f"SELECT count(*) FROM {table} WHERE month = ?",
                             [month]).fetchall()
    return int(rows)


def note_input(con: duckdb.DuckDBPyConnection, month: date, name: str, token: str) -> None:
    """Note what the month's input `name` (billing, tracker, attribution) is now, in the
    caller's transaction: the decision tables keep their rows while every month's tokens are
    as when they were written (assets/queries/decision_inputs.sql)."""
    con.execute("DELETE FROM input_tokens WHERE month = ? AND input = ?", [month, name])
    con.execute("INSERT INTO input_tokens VALUES (?, ?, ?)", [month, name, token])


def noted_input(con: duckdb.DuckDBPyConnection, month: date, name: str) -> str | None:
    """The token `note_input` noted last for the month's input `name`, or None."""
    ((token,),) = con.execute("SELECT max(token) FROM input_tokens WHERE month = ? "
                              "AND input = ?", [month, name]).fetchall()
    return token


def materialized_empty(con: duckdb.DuckDBPyConnection, month: date) -> bool:
    """Whether the month was materialized with no billing line (nothing billed yet): its bill's
    input token is noted in the transaction that wrote its (no) lines."""
    try:
        return noted_input(con, month, "billing") is not None
    except duckdb.CatalogException:   # a warehouse from before input tokens
        return False


def content_token(con: duckdb.DuckDBPyConnection, table: str, month: date) -> str:
    """The month's rows of `table` as one text: their count and the sum of their hashes
    (`row_hash`; the order they are stored in does not matter)."""
    ((rows, hashes),) = con.execute(
        f"SELECT count(*), coalesce(sum({row_hash(con, table, 't')}), 0) FROM {table} AS t "
        "WHERE month = ?", [month]).fetchall()
    return f"{rows}:{hashes}"


def row_hash(con: duckdb.DuckDBPyConnection, table: str, alias: str) -> str:
    """The SQL of a 64-bit hash of a row `alias` of `table`: DuckDB's hash of the row, combined
    with its texts reversed (a list of texts, each reversed), as macros.sql `key_hash`. DuckDB's
    hash of a text folds it 8 bytes at a time with one multiply between, so two edits whose
    changes cancel leave it equal: a run renamed from `sweep-10/trial-30` to
    `sweep-17/trial-40` (1,120 pairs of 90,000 such ids) gave the runs the same token, and the
    month kept every table naming the old run. The reversed text aligns its bytes otherwise:
    100,000 rows of `tracker_runs` hash in 29 ms, against 12 ms without."""
    parts = [alias]
    # DESCRIBE resolves `table` as the query does (a temp table before a base table)
    for name, kind, *_ in con.execute(f"DESCRIBE {table}").fetchall():
        quoted = f"{alias}.{sql_identifier(name)}"
        if kind == "VARCHAR":
            parts.append(f"reverse({quoted})")
        elif kind == "VARCHAR[]":
            parts.append(f"list_transform({quoted}, lambda item: reverse(item))")
    return f"hash({', '.join(parts)})"


def replace_month_unless_same(
    con: duckdb.DuckDBPyConnection,
    table: str,
    month: date,
    select_sql: str,
    params: dict[str, Any],
    basis_sql: str,
    force: bool = False,
    basis_params: dict[str, Any] | None = None,
) -> tuple[int, bool]:
    """`replace_month`, unless what the rows are computed from is what it was when they were
    written — `basis_sql`'s one text (run with `params` and `basis_params`), the parameters
    `select_sql` names, its text and the macros', against the month's `decision_basis` row —
    and the table still holds the rows written then. Returns (rows, kept). `force` recomputes
    them whatever the basis says."""
    ensure_schema(con)
    ((found,),) = query(con, basis_sql, {**params, **(basis_params or {})}).fetchall()
    inputs = hashlib.sha256(json.dumps(
        [found, select_sql, sql_text("macros"),
         {k: str(v) for k, v in sorted(bind(select_sql, params).items())}]
    ).encode()).hexdigest()
    with month_transaction(con):
        stored = con.execute("SELECT inputs, rows FROM decision_basis "
                             "WHERE month = ? AND table_name = ?", [month, table]).fetchall()
        rows = _month_rows(con, table, month)
        kept = not force and stored == [(inputs, rows)]
        if not kept:
            rows = write_month(con, table, month, select_sql, params)
            con.execute("DELETE FROM decision_basis WHERE month = ? AND table_name = ?",
                        [month, table])
            con.execute("INSERT INTO decision_basis VALUES (?, ?, ?, ?)",
                        [month, table, inputs, rows])
    return rows, kept


def begin_run_transaction(con: duckdb.DuckDBPyConnection) -> None:
    """Open the one transaction of a whole run on `con`; `month_transaction` then nests in it."""
    con.execute(f"SET VARIABLE {_RUN_TRANSACTION} = true")
    con.execute(f"SET VARIABLE {_SCHEMA_READY} = false")
    con.execute("BEGIN TRANSACTION")


def in_run_transaction(con: duckdb.DuckDBPyConnection) -> bool:
    ((held,),) = con.execute(f"SELECT getvariable('{_RUN_TRANSACTION}')").fetchall()
    return bool(held)


def dataset_rows(cfg: PipelineConfig) -> list[tuple[str, str, str]]:
    """The config's `datasets` as (name, bucket, region) rows."""
    return [(name, d.bucket, d.region) for name, d in cfg.datasets.items()]


def register_once(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> None:
    """Register an Arrow `table` as the view `name` for one statement to read, as a stream:
    inside a run's transaction a connection keeps what it scanned until the commit, so a
    registered table would stay in memory through the later steps (the listing of a bucket
    listed daily: 1 GiB), where a stream read to its end holds nothing. A second statement
    reading `name` would find it empty: register it again before each."""
    register_stream(con, name, table.schema, iter(table.to_batches()))


def register(con: duckdb.DuckDBPyConnection, name: str, data: Any) -> None:
    """`con.register(name, data)` once a result an earlier `execute()` left unread (a
    `fetchone()`) has run to its end: DuckDB 2.0 refuses a register beside one ("connection
    has an unfinished result"), which failed a second billing source after the first one's
    checks."""
    complete = getattr(con, "complete", None)   # DuckDB 2.0; 1.x has no unfinished results
    if complete is not None:
        complete()
    con.register(name, data)


def register_stream(con: duckdb.DuckDBPyConnection, name: str, schema: Any,
                    batches: Iterator[Any]) -> None:
    """Register Arrow record `batches` of `schema` as the view `name`, read once
    (`register_once`)."""
    import pyarrow as pa  # (not at import: the command line's quick paths do without it)

    register(con, name, pa.RecordBatchReader.from_batches(schema, batches))


def unregister(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Drop the registered view `name`, in a `finally` after a statement read it. A statement
    that failed leaves an open transaction aborted, where DuckDB refuses even this; the
    failure on its way is the one to report, and the name is replaced at its next register."""
    with suppress(duckdb.TransactionException):
        con.unregister(name)


def register_datasets(con: duckdb.DuckDBPyConnection,
                      rows: Iterable[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """(name, bucket, region) rows as the connection's temp table `config_datasets`, which the
    SQL joins (the attribution's transfer claims, egress); returns them as a list."""
    rows = list(rows)
    con.execute("CREATE OR REPLACE TEMP TABLE config_datasets "
                "(name VARCHAR, bucket VARCHAR, region VARCHAR)")
    if rows:   # DuckDB's executemany refuses an empty list
        con.executemany("INSERT INTO config_datasets VALUES (?, ?, ?)", rows)
    return rows


def month_params(cfg: PipelineConfig, month: date) -> dict[str, Any]:
    """Every named parameter the `assets/*.sql` files may use."""
    start, end = month_bounds(month)
    retention, search = cfg.policy.retention, cfg.policy.search
    return {
        "month": month,
        "month_start": start,
        "month_end": end,
        "run_tag": cfg.run_tag,
        "keep_last_live": retention.keep_last_live,
        "keep_last_production": retention.keep_last_production,
        "grace_days": retention.grace_days,
        "metric_goal": search.metric_goal,
        "max_untracked_share": cfg.policy.reconciliation.max_untracked_share,
        "min_metric_change": cfg.policy.retrain.min_metric_change,
    }


@contextmanager
def month_transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """One transaction around a month's writes: committed when the block ends, rolled back
    on any error. Inside a run's transaction (defs/warehouse.py) nothing is opened here: the
    whole month commits or rolls back with the run, so a killed or failed run leaves every
    table as it was."""
    own = not in_run_transaction(con)
    if own:
        con.execute("BEGIN TRANSACTION")
    try:
        yield
        if own:
            con.execute("COMMIT")
    except BaseException:
        if own:
            con.execute("ROLLBACK")
        raise


class WarehouseBusyError(RuntimeError):
    """Another writer holds the warehouse for longer than we wait."""


def lock_path(database: str) -> Path | None:
    """`<db>.lock`: the file every writer of the warehouse holds an exclusive flock on for
    the whole of its writes (a materialization run, `estimate --approve`)."""
    if not database or database.startswith(":memory:"):
        return None
    return Path(database + ".lock")


def acquire_writer_lock(database: str, writer: str, holder: str | None = None,
                        timeout_seconds: float = 900.0, poll_seconds: float = 0.25,
                        on_wait: Callable[[str], None] | None = None) -> IO | None:
    """Take the warehouse's writer lock (an exclusive flock on `<db>.lock`), waiting up to
    `timeout_seconds` for the writer holding it (`on_wait(its pid line)` is told once); the
    open handle holds it until `release_writer_lock`. None for an in-memory database.
    WarehouseBusyError (naming the other `writer` kind and its pid) when the wait runs out."""
    import fcntl
    import os

    path = lock_path(database)
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")  # noqa: SIM115 - held until release_writer_lock
    deadline = time.monotonic() + timeout_seconds
    told = False
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            other = lock_holder(path)
            if time.monotonic() >= deadline:
                handle.close()
                raise WarehouseBusyError(
                    f"warehouse {database} is being written by another {writer} ({other}); "
                    f"waited {timeout_seconds:.0f} s") from None
            if on_wait is not None and not told:
                on_wait(other)
                told = True
            time.sleep(poll_seconds)
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()}" + (f" ({holder})" if holder else ""))
    handle.flush()
    return handle


def release_writer_lock(handle: IO | None) -> None:
    import fcntl

    if handle is not None:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def lock_holder(path: Path) -> str:
    """The pid line the writer holding the lock wrote into it."""
    try:
        return path.read_text().strip() or "unknown process"
    except OSError:
        return "unknown process"


@contextmanager
def exclusive_writer(database: str, holder: str, timeout_seconds: float = 900.0,
                     poll_seconds: float = 0.25,
                     on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the warehouse's writer lock (the one defs/resources.py `Warehouse` takes for a
    run) around a short write from outside Dagster, so it never interleaves with a run: it
    waits for a running materialization (`on_wait(its pid line)` told once), and a
    materialization waits for it."""
    handle = acquire_writer_lock(database, "process", holder, timeout_seconds, poll_seconds,
                                 on_wait)
    try:
        yield
    finally:
        release_writer_lock(handle)


# how long a reader waits for the writer holding the warehouse, as a materialization waits for
# another (defs/resources.py `Warehouse.lock_timeout_seconds`)
WRITER_WAIT_SECONDS = 900.0
# a DuckDB file held outside the writer lock (a materialization noting what it did once its run
# ended, a notebook) is tried again for this long before it is named
OPEN_RETRY_SECONDS = 3.0
# DuckDB's words for a file another process holds, as defs/resources.py `locked_message` reads
_LOCK_CONFLICT = re.compile(r"Conflicting lock is held in (?P<program>.+?) \(PID (?P<pid>\d+)\)")
_HOLDER_LINE = re.compile(r"(?P<pid>pid \d+)(?: \((?P<what>.+)\))?")


class WarehouseUnreadableError(duckdb.IOException):
    """The warehouse cannot be opened to read: its writer kept it longer than a reader waits,
    another program holds it, or it needs an upgrade that cannot be written where it is. A
    DuckDB error, so that every reader's `cannot read <warehouse>: …` line says it; the text
    is that line's end."""


def _writer_named(holder: str) -> str:
    """The lock file's pid line as words: `pid 4483` is a materialization's (a run writes no
    more), `pid 77 (upgrade)` names its writer."""
    found = _HOLDER_LINE.fullmatch(holder)
    if found is None:
        return "another writer"
    if found["what"]:
        return f"`{found['what']}` ({found['pid']})"
    return f"a materialization ({found['pid']})"


def waiting_on_stderr(database: str | Path) -> Callable[[str], None]:
    """An `on_wait` that prints, once, which writer a reader of `database` waits for (the
    progress line a materialization prints when it waits for another)."""
    import sys

    told = []

    def say(holder: str) -> None:
        if not told:
            told.append(holder)
            print(f"waiting for {_writer_named(holder)} writing {database} to finish",
                  file=sys.stderr, flush=True)

    return say


@contextmanager
def writers_waited_for(database: str | Path, timeout_seconds: float,
                       on_wait: Callable[[str], None] | None = None,
                       poll_seconds: float = 0.25) -> Iterator[None]:
    """The block runs holding a shared flock on `<db>.lock`, taken once no writer holds the
    lock (a materialization's run, an upgrade, `estimate --approve`): meanwhile none opens the
    file to write, and readers share it. A writer is waited for up to `timeout_seconds`
    (`on_wait(its pid line)`); then WarehouseUnreadableError names it. Without a lock file (no
    writer ever took one, or it cannot be read) there is nothing to wait for. Never inside the
    writer lock of the same process: a flock does not know it is its own."""
    import fcntl

    path = lock_path(str(database))
    handle = None
    if path is not None:
        try:
            # read-only: a read-only file system, or folder, still lets the reader wait
            handle = open(path)  # noqa: SIM115 - closed below, which releases the flock
        except OSError:
            handle = None
    try:
        deadline = time.monotonic() + timeout_seconds
        while handle is not None:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = lock_holder(path)
                if time.monotonic() >= deadline:
                    raise WarehouseUnreadableError(
                        f"{_writer_named(holder)} is writing it; waited "
                        f"{timeout_seconds:.0f} s: try again when it ends") from None
                if on_wait is not None:
                    on_wait(holder)
                time.sleep(poll_seconds)
        yield
    finally:
        if handle is not None:
            handle.close()


def _held_by(database: str | Path, found: re.Match) -> str:
    """What a DuckDB lock conflict `found` means to a reader: the process that last held the
    writer lock finishing its writes, or another program."""
    path = lock_path(str(database))
    if path is not None and lock_holder(path).split(" (")[0] == f"pid {found['pid']}":
        return (f"{_writer_named(lock_holder(path))} is writing it: try again when it "
                "ends")
    return (f"it is locked by PID {found['pid']} ({found['program']}): another program (a "
            "notebook, a BI tool) has it open; close it and retry")


def _open(database: str | Path, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """A connection to `database`, tried again for OPEN_RETRY_SECONDS while a process outside
    the writer lock holds the file; then WarehouseUnreadableError names it (DuckDB's own text
    was a paragraph ending in a link)."""
    deadline = time.monotonic() + OPEN_RETRY_SECONDS
    delay = 0.1
    while True:
        try:
            return duckdb.connect(str(database), read_only=read_only)
        except duckdb.IOException as exc:
            found = _LOCK_CONFLICT.search(str(exc))
            if found is None:
                raise
            if time.monotonic() >= deadline:
                raise WarehouseUnreadableError(_held_by(database, found)) from None
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def connect_read_only(database: str | Path, timeout_seconds: float | None = None,
                      on_wait: Callable[[str], None] | None = None
                      ) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the warehouse, upgraded first when an older version wrote
    it (`upgrade`): what the reports, estimate and the exports read through. A writer holding
    the warehouse (a materialization's run, another reader's upgrade) is waited for, up to
    `timeout_seconds` (default WRITER_WAIT_SECONDS), `on_wait` told which (default: a line on
    stderr); the file is opened while no writer can take it."""
    timeout = WRITER_WAIT_SECONDS if timeout_seconds is None else timeout_seconds
    on_wait = on_wait or waiting_on_stderr(database)
    deadline = time.monotonic() + timeout  # one wait in all, the upgrade's and the open's
    upgrade(database, timeout, on_wait)
    with writers_waited_for(database, max(deadline - time.monotonic(), 0.0), on_wait):
        return _open(database)


def _outdated(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether an older version wrote the warehouse (`upgrade` has something to do)."""
    names = table_names(con)
    return "billing_facts" in names and not (
        {"attribution_rows", "attribution_runs", "billing_months"} <= names
        and not _names_runs_by_id(con)
        and _keyed_by_key_hash(con)
        and _has_column(con, "attribution_runs", "cost_exact"))


def _needs_upgrade(database: str | Path) -> bool:
    with _open(database) as con:
        return _outdated(con)


def upgrade(database: str | Path, timeout_seconds: float = WRITER_WAIT_SECONDS,
            on_wait: Callable[[str], None] | None = None) -> None:
    """Bring a warehouse an older version wrote to this version's tables — `attribution_rows`
    under the `attribution` view, naming runs by `run_hash`, lines and runs by `key_hash`;
    `attribution_runs` with its `cost_exact`; `billing_months` — with one short read-write
    open under the writer lock, so that the read-only readers (report, estimate, export) find
    what they query. Nothing happens for a current warehouse or a missing file. Two readers
    at once: the second waits for the first's upgrade, then finds nothing to do. One that
    cannot be written (a read-only disk) is WarehouseUnreadableError, saying so."""
    if not Path(database).exists():
        return
    with writers_waited_for(database, timeout_seconds, on_wait):
        if not _needs_upgrade(database):
            return
    try:
        with exclusive_writer(str(database), "upgrade", timeout_seconds, on_wait=on_wait):
            if not _needs_upgrade(database):  # another reader upgraded it meanwhile
                return
            with _open(database, read_only=False) as con:
                # no progress bar: rewriting the rows takes seconds, under a command's output
                con.execute("SET enable_progress_bar = false")
                ensure_schema(con)
    except WarehouseBusyError:
        raise WarehouseUnreadableError(
            f"{_writer_named(lock_holder(lock_path(str(database))))} is writing it; waited "
            f"{timeout_seconds:.0f} s: try again when it ends") from None
    except WarehouseUnreadableError:
        raise
    except (OSError, duckdb.IOException) as exc:
        # the lock file (OSError) or the database (DuckDB's IO error) cannot be written
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        cause = exc.strerror if isinstance(exc, OSError) and exc.strerror else next(
            (c for c in ("Read-only file system", "Permission denied") if c in text), None)
        if cause is None:
            raise
        raise WarehouseUnreadableError(
            f"it was written by an older version and needs an upgrade that cannot be written "
            f"where it is ({cause}): materialize a month of it once where it can be written"
        ) from None
