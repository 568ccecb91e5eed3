"""The month's `attribution` (SPEC §6): the claims as temp tables, then the rows — a slice of
the month's lines at a time, so that memory holds a slice, not the month.

A re-run can be incremental: when the bill, the listing, the parameters, the datasets and
this code are what the month's rows were computed from (`attribution_basis`), only the lines
of the runs that changed are attributed again (`attribution_basis.sql`,
`attribution_affected.sql`) — after a new runs file, the lines of the runs it changed."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

import duckdb

from cost_pipeline.warehouse import (
    ensure_schema,
    in_run_transaction,
    month_transaction,
    query,
    run_script,
    sql_text,
    summarize_month,
)

# lines per slice: a slice's claims, periods and lines fit well inside the default 1200MB
SLICE_LINES = 2_000_000
_SLICE_TABLES = ("attribution_lines", "attribution_compute_lines", "attribution_claims",
                 "attribution_claimed")
_MONTH_TABLES = ("attribution_claimants", "attribution_run_resources",
                 "attribution_dated_snapshots", "attribution_listed_bytes",
                 "attribution_run_bytes", "attribution_basis_now", "attribution_changed_runs",
                 "attribution_affected")
# an incremental re-run gives way to a whole one when more lines than this share of the
# month's (or than a slice) would be attributed again: the whole month is as quick then
INCREMENTAL_MAX_SHARE = 0.5


def slices(con: duckdb.DuckDBPyConnection, month: date,
           lines_per_slice: int = SLICE_LINES) -> list[tuple[datetime, datetime]]:
    """[start, end) bounds on ChargePeriodStart cutting the month's lines into slices of about
    `lines_per_slice` (lines starting at the same moment stay in one slice); the first
    starts at -infinity and the last ends at +infinity, so that every line is in one."""
    (lines,) = con.execute("SELECT count(*) FROM billing_facts WHERE month = ?",
                           [month]).fetchone()
    count = max(1, -(-lines // lines_per_slice))
    cuts: list[datetime] = []
    if count > 1:
        (quantiles,) = con.execute(
            "SELECT quantile_disc(ChargePeriodStart, ?) FROM billing_facts WHERE month = ?",
            [[i / count for i in range(1, count)], month]).fetchone()
        cuts = sorted(set(quantiles))
    low, high = datetime.min, datetime.max
    bounds = [low, *cuts, high]
    return list(zip(bounds, bounds[1:], strict=False))


@dataclass
class Outcome:
    """What `build_attribution` did: the rows the month holds, and how they were made."""

    rows: int
    mode: str                   # "full" | "incremental"
    changed_runs: int = 0       # incremental: the runs whose key changed
    lines_reattributed: int = 0  # incremental: the lines attributed again


def build_attribution(con: duckdb.DuckDBPyConnection, month: date, params: dict[str, Any],
                      datasets: Iterable[tuple[str, str, str]] = (),
                      log: logging.Logger | None = None,
                      lines_per_slice: int = SLICE_LINES, incremental: bool = False) -> Outcome:
    """Replace the month's attribution, atomically; `datasets` are the config's (name, bucket,
    region). With `incremental`, a month whose stored basis matches attributes again only the
    lines of the runs that changed (the result is the same rows as a whole run's)."""
    ensure_schema(con)
    con.execute("CREATE OR REPLACE TEMP TABLE config_datasets "
                "(name VARCHAR, bucket VARCHAR, region VARCHAR)")
    rows = list(datasets)
    if rows:   # DuckDB's executemany refuses an empty list
        con.executemany("INSERT INTO config_datasets VALUES (?, ?, ?)", rows)
    try:
        with month_transaction(con):
            run_script(con, sql_text("attribution_prepare"), params)
            inputs = _inputs(con, month, params, rows)
            run_script(con, sql_text("attribution_basis"), params)
            outcome = _incremental(con, month, params, inputs, lines_per_slice, log) \
                if incremental else None
            if outcome is None:
                _attribute_whole_month(con, month, params, lines_per_slice, log)
            if outcome is None or outcome.lines_reattributed:
                summarize_month(con, month)
            _store_basis(con, month, inputs)
            ((written,),) = con.execute(
                "SELECT count(*) FROM attribution_rows WHERE month = ?", [month]).fetchall()
    finally:
        # an error inside a run's transaction aborts it: only its rollback may run then
        if not in_run_transaction(con) or not _aborted(con):
            _drop(con, _SLICE_TABLES + _MONTH_TABLES)
            con.execute("DROP VIEW IF EXISTS attribution_month_lines")
    if outcome is None:
        return Outcome(int(written), "full")
    outcome.rows = int(written)
    return outcome


def _scope_lines(con: duckdb.DuckDBPyConnection, month: date, only_affected: bool) -> None:
    """The view the claims and rows read their lines from: the month's lines, or only the
    `attribution_affected` ones."""
    con.execute(
        "CREATE OR REPLACE TEMP VIEW attribution_month_lines AS "
        f"SELECT rowid AS line_rowid, * FROM billing_facts WHERE month = DATE '{month.isoformat()}'"
        + (" AND rowid IN (SELECT line_rowid FROM attribution_affected)" if only_affected
           else ""))


def _attribute(con: duckdb.DuckDBPyConnection, params: dict[str, Any],
               parts: list[tuple[datetime, datetime]], log: logging.Logger | None) -> None:
    """The claims and rows of the scoped lines, a slice at a time."""
    for number, (start, end) in enumerate(parts, start=1):
        bounds = {**params, "slice_start": start, "slice_end": end}
        run_script(con, sql_text("attribution_claims"), bounds)
        query(con, f"INSERT INTO attribution_rows BY NAME ({sql_text('attribution')})", bounds)
        _drop(con, _SLICE_TABLES)
        if log is not None and len(parts) > 1:
            log.info(f"attribution: slice {number} of {len(parts)} written")


def _attribute_whole_month(con: duckdb.DuckDBPyConnection, month: date, params: dict[str, Any],
                           lines_per_slice: int, log: logging.Logger | None) -> None:
    con.execute("DELETE FROM attribution_rows WHERE month = ?", [month])
    _scope_lines(con, month, only_affected=False)
    _attribute(con, params, slices(con, month, lines_per_slice), log)


def _incremental(con: duckdb.DuckDBPyConnection, month: date, params: dict[str, Any],
                 inputs: str, lines_per_slice: int,
                 log: logging.Logger | None) -> Outcome | None:
    """Attribute again only the lines of the runs that changed; None when the month must be
    attributed whole (no stored basis, other inputs, or too many lines to redo)."""
    stored = con.execute("SELECT inputs FROM attribution_basis WHERE month = ? AND run_id IS NULL",
                         [month]).fetchall()
    if stored != [(inputs,)]:
        return None
    ((changed,),) = con.execute("SELECT count(DISTINCT run_id) FROM attribution_changed_runs"
                                ).fetchall()
    if changed == 0:
        if log is not None:
            log.info("attribution: no run changed since the month was attributed: rows kept")
        return Outcome(0, "incremental")
    run_script(con, sql_text("attribution_affected"), params)
    ((affected,),) = con.execute("SELECT count(*) FROM attribution_affected").fetchall()
    ((lines,),) = con.execute("SELECT count(*) FROM billing_facts WHERE month = ?",
                              [month]).fetchall()
    if affected > min(lines_per_slice, INCREMENTAL_MAX_SHARE * lines):
        if log is not None:
            log.info(f"attribution: {changed} run(s) changed, {affected:,} of {lines:,} lines "
                     "to redo: the whole month is attributed again")
        return None
    con.execute("DELETE FROM attribution_rows WHERE month = ? AND line_key IN "
                "(SELECT line_hash FROM attribution_affected)", [month])
    run_script(con, sql_text("attribution_narrow"), params)
    _scope_lines(con, month, only_affected=True)
    _attribute(con, params, [(datetime.min, datetime.max)], log)
    if log is not None:
        log.info(f"attribution: {changed} run(s) changed: {affected:,} of {lines:,} lines "
                 "attributed again, the rest kept")
    return Outcome(0, "incremental", changed, int(affected))


def _inputs(con: duckdb.DuckDBPyConnection, month: date, params: dict[str, Any],
            datasets: list[tuple[str, str, str]]) -> str:
    """A hash of everything the month's rows depend on but the runs: the bill's and the
    listing's columns the attribution reads, the parameters, the datasets, and the code."""
    bill = query(con, """
        SELECT count(*), sum(hash(x_SourceLine, ResourceId, ChargePeriodStart, ChargePeriodEnd,
                                  ChargeCategory, ChargeClass, CommitmentDiscountStatus,
                                  x_ResourceKind, x_CostComponent, x_AcceleratorCount,
                                  x_UsageHours, EffectiveCost, x_SplitParent,
                                  coalesce(Tags[$run_tag], Tags['user_' || $run_tag],
                                           Tags['user:' || $run_tag])))
        FROM billing_facts WHERE month = $month""", params).fetchall()
    listing = query(con, """
        SELECT count(*), sum(hash(bucket, snapshot_date, size, prefix, run_id, last_modified))
        FROM checkpoint_inventory WHERE month = $month""", params).fetchall()
    code = [sql_text(name) for name in ("macros", "attribution_prepare", "attribution_claims",
                                        "attribution", "attribution_basis",
                                        "attribution_affected", "attribution_narrow")]
    code.append(Path(__file__).read_text(encoding="utf-8"))
    basis = {
        "bill": [str(v) for v in bill[0]], "listing": [str(v) for v in listing[0]],
        "params": {k: str(params[k]) for k in ("month", "month_start", "month_end", "run_tag")},
        "datasets": sorted(datasets),
        "code": hashlib.sha256("\0".join(code).encode()).hexdigest(),
    }
    return hashlib.sha256(json.dumps(basis, sort_keys=True).encode()).hexdigest()


def _store_basis(con: duckdb.DuckDBPyConnection, month: date, inputs: str) -> None:
    """What the month's rows were computed from, for the next re-run."""
    con.execute("DELETE FROM attribution_basis WHERE month = ?", [month])
    con.execute("INSERT INTO attribution_basis VALUES (?, NULL, ?, NULL, NULL)", [month, inputs])
    con.execute("INSERT INTO attribution_basis SELECT ?, run_id, ?, run_key, claim_keys "
                "FROM attribution_basis_now ORDER BY run_id", [month, inputs])


def _drop(con: duckdb.DuckDBPyConnection, tables: Iterable[str]) -> None:
    for table in tables:
        con.execute(f"DROP TABLE IF EXISTS {table}")


def _aborted(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the connection's transaction failed (nothing but a rollback runs then)."""
    try:
        con.execute("SELECT 1").fetchall()
    except duckdb.Error:
        return True
    return False
