"""The month's `attribution` (SPEC §6): the claims as temp tables, then the rows — a slice of
the month's lines at a time, so that memory holds a slice, not the month.

A re-run keeps the month's rows when nothing they depend on changed: the bill, the listing,
the parameters, the datasets, this code (`inputs`) and every run's key (`attribution_basis`:
an MLflow tracker is read again on every run, and a runs file delivered again with the same
runs, re-run the attribution's parents without changing them). When only some runs changed,
it attributes again only the lines those runs claimed or claim now (`attribution_affected`),
unless they are a large part of the month."""

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
    SUM_EVERY_RUN,
    ensure_schema,
    month_transaction,
    note_input,
    noted_input,
    query,
    register_datasets,
    run_script,
    sql_text,
    summarize_month,
    transaction_aborted,
)

# lines per slice: a slice's claims, periods and lines fit well inside the default 1100MB
SLICE_LINES = 2_000_000
_SLICE_TABLES = ("attribution_lines", "attribution_compute_lines", "attribution_claims",
                 "attribution_claimed")
_MONTH_TABLES = ("attribution_claimants", "attribution_run_resources",
                 "attribution_dated_snapshots", "attribution_listed_bytes",
                 "attribution_run_bytes", "attribution_basis_now", "attribution_changed_runs",
                 "attribution_changed", "attribution_changed_spans", "attribution_before",
                 "attribution_storage_changed",
                 "attribution_affected_seeds", "attribution_affected", "attribution_resummed",
                 "attribution_basis_stale")
# a partial re-run's runs whose stored basis row is not now's (`_store_basis`)
_STALE = "attribution_basis_stale"
# a partial re-run's (run, rule) pairs whose per-run sums are summed again
# (warehouse.summarize_month): those with rows on the lines attributed again, before and after
_RESUMMED = "attribution_resummed"
_GROUPS_ON_AFFECTED = ("SELECT DISTINCT run_hash, rule FROM attribution_rows WHERE month = ? "
                       "AND line_key IN (SELECT line_hash FROM attribution_affected)")
# a re-run attributes the month whole when the changed runs' lines are more than this share
# of its lines (or than a slice): deleting and writing again most of the month in place is
# no quicker, and holds the deleted rows until the commit
PARTIAL_MAX_SHARE = 0.25
# and sums every run again when those lines' (run, rule) pairs are more than this share of the
# month's (`_resummed`): at 2M lines, summing the rows of 35% of the pairs took 0.18 s, of
# half of them 0.24 s, and summing every row 0.26 s
RESUM_MAX_SHARE = 0.4
# the statements' scope (macros.sql `in_attribution_scope`): every line, or the affected ones
_EVERY_LINE = "CREATE OR REPLACE TEMP MACRO in_attribution_scope(line_rowid) AS true"
_AFFECTED_LINES = ("CREATE OR REPLACE TEMP MACRO in_attribution_scope(line_rowid) AS "
                   "line_rowid IN (SELECT line_key FROM attribution_affected)")


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
    """What `build_attribution` did: the rows the month holds, and how."""

    rows: int
    mode: str                    # "full": attributed whole | "kept": nothing changed, rows
    #                              kept | "partial": the changed runs' lines attributed again
    changed_runs: int = 0        # the runs whose key changed since the stored basis (same inputs)
    lines_reattributed: int = 0  # partial: the lines attributed again


def _say_runs_without_end(con: duckdb.DuckDBPyConnection, month: date, params: dict[str, Any],
                          log: logging.Logger) -> None:
    """SPEC §6: a non-RUNNING run with no end claims nothing and is reported — by name, for
    the runs started in the month (`reconciliation.runs_without_end` counted them alone)."""
    ((count, named),) = con.execute(
        "SELECT count(*), list(run_id ORDER BY start_time, run_id)[:5] FROM tracker_runs "
        "WHERE month = ? AND status <> 'RUNNING' AND end_time IS NULL "
        "AND start_time >= CAST(? AS TIMESTAMP) AND start_time < CAST(? AS TIMESTAMP)",
        [month, params["month_start"], params["month_end"]]).fetchall()
    if count:
        more = f" and {count - len(named):,} more" if count > len(named) else ""
        log.warning(f"attribution: {count:,} run(s) started in {month:%Y-%m} stopped without "
                    f"an end, so they claim nothing (their lines go untracked): "
                    f"{', '.join(named)}{more}")


def build_attribution(con: duckdb.DuckDBPyConnection, month: date, params: dict[str, Any],
                      datasets: Iterable[tuple[str, str, str]] = (),
                      log: logging.Logger | None = None,
                      lines_per_slice: int = SLICE_LINES, keep_unchanged: bool = False,
                      partial_max_share: float = PARTIAL_MAX_SHARE,
                      resum_max_share: float = RESUM_MAX_SHARE) -> Outcome:
    """Replace the month's attribution, atomically; `datasets` are the config's (name, bucket,
    region). With `keep_unchanged`, a month whose stored basis is what it would be now keeps
    its rows (they are what attributing it again would write), and one where only some runs
    changed has only their lines attributed again (the same rows as attributing it whole)."""
    ensure_schema(con)
    rows = register_datasets(con, datasets)
    if log is not None:
        _say_runs_without_end(con, month, params, log)
    try:
        with month_transaction(con):
            run_script(con, sql_text("attribution_prepare"), params)
            inputs = _inputs(con, month, params, rows)
            run_script(con, sql_text("attribution_basis"), params)
            same_inputs = con.execute(
                "SELECT inputs FROM attribution_basis WHERE month = ? AND run_id IS NULL",
                [month]).fetchall() == [(inputs,)]
            ((changed,),) = con.execute(
                "SELECT count(*) FROM attribution_changed_runs").fetchall()
            kept = keep_unchanged and same_inputs and changed == 0
            redone = None
            if kept:
                if log is not None:
                    log.info("attribution: the bill, the listing and every run are as when the "
                             "month was attributed: its rows are kept")
            else:
                # rule 4's bytes: only for a month attributed again, whole or in part
                run_script(con, sql_text("attribution_storage"), params)
                if keep_unchanged and same_inputs:
                    redone = _attribute_changed(con, month, params, changed, log,
                                                lines_per_slice, partial_max_share)
                if redone is None:
                    _attribute_month(con, month, params, lines_per_slice, log)
                summarize_month(con, month, None if redone is None
                                else _resummed(con, month, resum_max_share))
                _store_basis(con, month, inputs, every_run=redone is None)
            # what the rows are computed from, for the decision tables' bases (kept rows too:
            # a warehouse from before the tokens gets its month's)
            note_input(con, month, "attribution", _basis_token(con, month))
            ((written,),) = con.execute(
                "SELECT count(*) FROM attribution_rows WHERE month = ?", [month]).fetchall()
    finally:
        # an error inside a run's transaction aborts it: only its rollback may run then (not
        # even a query asking whether this is a run's transaction: its error would replace
        # the one raised). Outside one, `month_transaction` has rolled back already
        if not transaction_aborted(con):
            _drop(con, _SLICE_TABLES + _MONTH_TABLES)
            con.execute(_EVERY_LINE)
            con.execute(SUM_EVERY_RUN)
    return Outcome(int(written), "kept" if kept else "full" if redone is None else "partial",
                   int(changed) if same_inputs else 0, redone or 0)


def _attribute_month(con: duckdb.DuckDBPyConnection, month: date, params: dict[str, Any],
                     lines_per_slice: int, log: logging.Logger | None) -> None:
    """The month's claims and rows, a slice of its lines at a time."""
    con.execute("DELETE FROM attribution_rows WHERE month = ?", [month])
    parts = slices(con, month, lines_per_slice)
    for number, (start, end) in enumerate(parts, start=1):
        bounds = {**params, "slice_start": start, "slice_end": end}
        run_script(con, sql_text("attribution_claims"), bounds)
        query(con, f"INSERT INTO attribution_rows BY NAME ({sql_text('attribution')})", bounds)
        _drop(con, _SLICE_TABLES)
        if log is not None and len(parts) > 1:
            log.info(f"attribution: slice {number} of {len(parts)} written")


def _attribute_changed(con: duckdb.DuckDBPyConnection, month: date, params: dict[str, Any],
                       changed: int, log: logging.Logger | None, lines_per_slice: int,
                       max_share: float) -> int | None:
    """Attribute again only the lines the changed runs claimed or claim now, with the lines
    sharing their resource and period (`attribution_affected.sql`); the others keep their
    rows. The lines attributed again, or None — having changed nothing — when they are more
    than `max_share` of the month's or than a slice, and the month is to be attributed
    whole."""
    run_script(con, sql_text("attribution_affected"), params)
    ((affected,),) = con.execute("SELECT count(*) FROM attribution_affected").fetchall()
    ((lines,),) = con.execute("SELECT count(*) FROM billing_facts WHERE month = ?",
                              [month]).fetchall()
    if affected > min(lines_per_slice, max_share * lines):
        if log is not None:
            log.info(f"attribution: {changed} run(s) changed since the month was attributed, "
                     f"{affected:,} of its {lines:,} lines theirs: attributing it whole")
        return None
    # their claims need only the run resources these lines are of: the rest are not
    # expanded to hours
    con.execute("DELETE FROM attribution_run_resources WHERE resource_id NOT IN "
                "(SELECT claim_key FROM attribution_affected WHERE claim_key IS NOT NULL)")
    # the sums that change: those of the (run, rule) pairs with rows on these lines, before
    # and after (a run's end moved changes its share of the transfer lines it overlaps, and
    # the other overlapping runs' transfer sums; not their compute or storage sums)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {_RESUMMED} AS {_GROUPS_ON_AFFECTED}", [month])
    con.execute("DELETE FROM attribution_rows WHERE month = ? AND line_key IN "
                "(SELECT line_hash FROM attribution_affected)", [month])
    con.execute(_AFFECTED_LINES)
    bounds = {**params, "slice_start": datetime.min, "slice_end": datetime.max}
    run_script(con, sql_text("attribution_claims"), bounds)
    query(con, f"INSERT INTO attribution_rows BY NAME ({sql_text('attribution')})", bounds)
    con.execute(f"INSERT INTO {_RESUMMED} {_GROUPS_ON_AFFECTED}", [month])
    _drop(con, _SLICE_TABLES)  # (build_attribution's `finally` sets the scope back)
    if log is not None:
        log.info(f"attribution: {changed} run(s) changed since the month was attributed: "
                 f"{affected:,} of its {lines:,} lines attributed again, the rest kept")
    return int(affected)


def _resummed(con: duckdb.DuckDBPyConnection, month: date, max_share: float) -> str | None:
    """The temp table of the (run, rule) pairs whose sums a partial re-run changed, or None —
    every run's sums written again — when they are more than `max_share` of the month's pairs
    (filtering the rows by so many pairs costs more than summing them all). The sums are the
    same either way."""
    ((resummed, pairs),) = con.execute(
        f"SELECT (SELECT count(*) FROM (SELECT DISTINCT run_hash, rule FROM {_RESUMMED})), "
        "(SELECT count(*) FROM (SELECT DISTINCT run_id, rule FROM attribution_runs "
        "WHERE month = ?))", [month]).fetchall()
    return None if resummed > max_share * pairs else _RESUMMED


# a bill line's columns the rows read, as one hash (`tag_value`: the line's run tag); a text
# with its reversed text too (warehouse.py `row_hash`). The billing step sums it into the
# bill's token (billing.py `bill_token`), of which the attribution's basis takes that part
ATTRIBUTED_LINE_HASH = """hash(x_SourceLine, ResourceId, ChargePeriodStart, ChargePeriodEnd,
    ChargeCategory, ChargeClass, CommitmentDiscountStatus, x_ResourceKind, x_CostComponent,
    x_AcceleratorCount, x_UsageHours, EffectiveCost, x_SplitParent, tag_value,
    reverse(x_SourceLine), reverse(ResourceId), reverse(tag_value))"""
# the month's lines with their run tag
TAGGED_LINES = ("(SELECT *, user_tag(Tags, $run_tag) AS tag_value FROM billing_facts "
                "WHERE month = $month)")
_BILL_HASH = (f"SELECT count(*), coalesce(sum({ATTRIBUTED_LINE_HASH}), 0) "
              f"FROM {TAGGED_LINES}")


def _bill_part(con: duckdb.DuckDBPyConnection, month: date, params: dict[str, Any]
               ) -> list[str]:
    """The bill's part of a month's `inputs`: the count and sum of `ATTRIBUTED_LINE_HASH`
    over its lines, read from the token the billing step noted when it wrote the bill
    (`input_tokens`, billing.py `bill_token`) so that the attribution does not hash the
    lines again (~0.13 s at 2M lines): a bill written again with the same lines, or with
    lines restated only where the attribution does not read (a region), keeps the rows.
    Without such a token (a warehouse from before it), `_BILL_HASH` of the lines: the same
    figures."""
    parts = (noted_input(con, month, "billing") or "").split(":")
    if len(parts) == 3:  # rows : the attributed columns' sum : every column's
        return parts[:2]
    ((rows, hashes),) = query(con, _BILL_HASH, params).fetchall()
    return [str(rows), str(hashes)]


def _inputs(con: duckdb.DuckDBPyConnection, month: date, params: dict[str, Any],
            datasets: list[tuple[str, str, str]]) -> str:
    """A hash of everything the month's rows depend on but the runs: the bill's and the
    listing's columns the attribution reads (the bill's as `_bill_part`), the parameters,
    the datasets, and the code."""
    # the listed objects, and the reports read (an empty one empties its bucket's day), with
    # their `source`s, which tell the buckets several configurations report (macros.sql
    # `configured_reports`). Rule 4 reads an object's `key` and `source` only in those
    # buckets and in those that dated reports and an undated listing both list
    # (`mixed_buckets`): a key is read from the newest report among the configurations
    # covering it (`configured_snapshot`), an undated object counts unless a dated
    # configuration covers its key (`undated_uncovered`), which its source and key decide.
    # So their objects alone (`scoped_buckets`) are hashed again with them, each in one hash
    # (keys swapped between two objects change which one counts): every object's key and
    # source cost a kept month ~75% more CPU (2M objects: 0.55 against 0.32 s)
    listing = query(con, """
        SELECT count(*), sum(hash(bucket, snapshot_date, size, prefix, run_id, last_modified,
                                  reverse(bucket), reverse(prefix), reverse(run_id))),
               (SELECT count(*) FROM checkpoint_snapshots WHERE month = $month),
               (SELECT sum(hash(source, bucket, snapshot_date, reverse(source),
                                reverse(bucket)))
                FROM checkpoint_snapshots WHERE month = $month),
               (SELECT sum(hash(o.source, o.key, o.bucket, o.snapshot_date, o.size,
                                o.prefix, o.run_id, o.last_modified, reverse(o.source),
                                reverse(o.key), reverse(o.bucket), reverse(o.prefix),
                                reverse(o.run_id)))
                FROM checkpoint_inventory AS o
                WHERE o.month = $month AND o.bucket IN
                      (SELECT bucket FROM scoped_buckets($month)))
        FROM checkpoint_inventory WHERE month = $month""", params).fetchall()
    # attribution_runs too: a kept month keeps its per-run sums as well
    code = [sql_text(name) for name in ("macros", "attribution_prepare", "attribution_storage",
                                        "attribution_claims", "attribution", "attribution_runs",
                                        "attribution_basis", "attribution_affected")]
    code.append(Path(__file__).read_text(encoding="utf-8"))
    basis = {
        "bill": _bill_part(con, month, params), "listing": [str(v) for v in listing[0]],
        "params": {k: str(params[k]) for k in ("month", "month_start", "month_end", "run_tag")},
        "datasets": sorted(datasets),
        "code": hashlib.sha256("\0".join(code).encode()).hexdigest(),
    }
    return hashlib.sha256(json.dumps(basis, sort_keys=True).encode()).hexdigest()


def _store_basis(con: duckdb.DuckDBPyConnection, month: date, inputs: str,
                 every_run: bool = True) -> None:
    """What the month's rows were computed from, for the next re-run. With `every_run` false
    (a partial re-run, under the same `inputs`), only the rows of the runs whose stored row is
    not now's are written again; the others' are what they would be (a row per run, read by
    run_id and summed by `_basis_token`: where a row lies does not matter). Writing all
    100,000 again put 13.6 MB through the commit."""
    runs = "attribution_basis_now"
    if every_run:
        con.execute("DELETE FROM attribution_basis WHERE month = ?", [month])
    else:
        # every column, not only the run key `attribution_changed_runs` compares: a row
        # stored before windows has the same key, and gets its window here
        con.execute(f"CREATE OR REPLACE TEMP TABLE {_STALE} AS "
                    "SELECT coalesce(n.run_id, b.run_id) AS run_id FROM "
                    "(SELECT * FROM attribution_basis WHERE month = ? AND run_id IS NOT NULL) "
                    "AS b FULL JOIN attribution_basis_now AS n ON n.run_id = b.run_id "
                    "WHERE b.run_key IS DISTINCT FROM n.run_key "
                    "OR b.shape_key IS DISTINCT FROM n.shape_key "
                    "OR b.rs IS DISTINCT FROM n.rs OR b.re IS DISTINCT FROM n.re "
                    "OR b.inputs IS DISTINCT FROM ?", [month, inputs])
        con.execute("DELETE FROM attribution_basis WHERE month = ? AND (run_id IS NULL OR "
                    f"run_id IN (SELECT run_id FROM {_STALE}))", [month])
        runs += f" WHERE run_id IN (SELECT run_id FROM {_STALE})"
    con.execute("INSERT INTO attribution_basis (month, inputs) VALUES (?, ?)", [month, inputs])
    con.execute("INSERT INTO attribution_basis (month, run_id, inputs, run_key, shape_key, rs, "
                f"re) SELECT ?, run_id, ?, run_key, shape_key, rs, re FROM {runs} "
                "ORDER BY run_id", [month, inputs])


def _basis_token(con: duckdb.DuckDBPyConnection, month: date) -> str:
    """The month's stored basis as one text: the rows are what it determines."""
    ((rows, hashes),) = con.execute(
        "SELECT count(*), coalesce(sum(hash(run_id, inputs, run_key, shape_key, rs, re, "
        "reverse(run_id))), 0) FROM attribution_basis WHERE month = ?", [month]).fetchall()
    return f"{rows}:{hashes}"


def _drop(con: duckdb.DuckDBPyConnection, tables: Iterable[str]) -> None:
    for table in tables:
        con.execute(f"DROP TABLE IF EXISTS {table}")


