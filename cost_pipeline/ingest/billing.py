"""All configured billing sources → the month's `billing_facts`, in one transaction.

Each source's normalized rows go into the table in the transaction that deleted the month's
previous rows; each source is checked (required values, ordered periods, an hourly export),
then the month as a whole (conflicting duplicate line ids, mixed currencies). Any failure
rolls the month back to its previous rows. Identical duplicate lines are dropped and counted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date

import duckdb
import pyarrow.fs as pafs

from cost_pipeline.attribution import ATTRIBUTED_LINE_HASH, TAGGED_LINES
from cost_pipeline.config import AwsCur2Source, FocusSource, GcpBillingExportSource, PipelineConfig
from cost_pipeline.ingest.accelerators import accelerator_table
from cost_pipeline.ingest.deliveries import delivery_metadata, record_deliveries
from cost_pipeline.ingest.sources import (
    MAX_AMOUNT_TEXT,
    SourceError,
    bad_amount_sql,
    cur2,
    cur2_csv,
    cur2_s3,
    focus,
    gcp_billing,
    s3,
    source_names,
    sql_identifier,
)
from cost_pipeline.months import month_bounds
from cost_pipeline.warehouse import (
    ensure_schema,
    month_transaction,
    note_input,
    query,
    register_once,
    sql_text,
)

STAGE = "month_billing"  # a view of the month being loaded, for the checks


@dataclass
class BillingSummary:
    rows: int = 0
    duplicates_dropped: int = 0
    total_effective_cost: float = 0.0
    total_billed_cost: float = 0.0
    currency: str | None = None
    unknown_instance_types: list[str] = field(default_factory=list)
    # per type of unknown accelerator count: the counts its lines were counted as
    unknown_accelerator_counts: dict[str, list[int]] = field(default_factory=dict)
    deliveries: list = field(default_factory=list)
    # per source name: what reading it cost (bytes a query scanned, rows read vs returned …)
    source_metadata: dict[str, dict] = field(default_factory=dict)
    delivery_records: list[dict] = field(default_factory=list)  # rows of billing_deliveries


def known_buckets(cfg: PipelineConfig) -> list[str]:
    """The buckets the config names (datasets' and checkpoints'), as a bill's resource ids may
    spell them: as written, and an Azure storage account's id (`/subscriptions/…`) also in
    lower case, as Azure's cost data writes it (`resourceGroups/ML-RG/…` is billed as
    `resourcegroups/ml-rg/…`). The sources mark a line on one of them as a bucket's."""
    buckets = {d.bucket for d in cfg.datasets.values()}
    buckets |= {c.bucket for c in cfg.checkpoints if getattr(c, "bucket", None)}
    buckets |= {b.lower() for b in buckets if b.lower().startswith("/subscriptions/")}
    return sorted(buckets)


def _load_accelerators(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig) -> None:
    table = accelerator_table(cfg.accelerators)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE accelerator_counts "
        "(instance_type VARCHAR PRIMARY KEY, accelerators INTEGER)"
    )
    con.executemany("INSERT INTO accelerator_counts VALUES (?, ?)", list(table.items()))


@dataclass
class StagedSource:
    """What a billing reader hands over: a SELECT producing the staged columns (the
    `billing_facts` columns plus x_File, x_Row, x_UnknownAcceleratorType) over views it has
    registered, its parameters, where it read from, and how to name a bad file on error."""

    sql: str
    params: dict
    where: str
    locate: Callable[[str], str | None] = lambda _message: None
    delivery: object | None = None
    metadata: dict = field(default_factory=dict)
    # file → its row count, when every row of each file becomes one line (CUR 2.0 read
    # through DuckDB's parquet reader): load_month checks that each file's rows all arrived
    file_rows: dict[str, int] | None = None
    # a statement run after the insert, with the same parameters (the CUR split; FOCUS's
    # read rows dropped)
    after: str | None = None


def _stage_cur2(con, name: str, source: AwsCur2Source, cfg: PipelineConfig, month: date,
                log: logging.Logger) -> StagedSource:
    start, _end = month_bounds(month)
    fs = None
    if s3.is_s3(source.path):
        fs = s3.filesystem(source.endpoint_url, source.region)
        delivery = cur2_s3.find_delivery(name, source.path, month, fs)
    elif "://" in source.path:
        raise SourceError(name, source.path, "expected a local folder or an s3:// URI")
    else:
        delivery = cur2.find_delivery(name, cfg.resolve(source.path), month)
    where = delivery.manifest or cfg.resolve(source.path)
    if delivery.files:
        log.info(
            f"{name}: {len(delivery.files)} file(s) for {month:%Y-%m}"
            + (f" from manifest {delivery.manifest}" if delivery.manifest else "")
        )
    else:
        log.warning(f"{name}: no billing files for {month:%Y-%m} under {where}"
                    + (f": {delivery.missing}" if delivery.missing else ""))
    try:  # the first reads of footers and data pages: a broken file shows here
        # streamed into a table (CSV, S3, a local file DuckDB's reader cannot take), or
        # local parquet files read in place by DuckDB
        reader: cur2_csv.CsvReader | cur2_s3.S3Reader | None = None
        if cur2_csv.is_csv_delivery(delivery):  # an export in file format TEXT_OR_CSV
            reader = cur2_csv.CsvReader(fs, delivery, log)
        elif fs is not None:
            reader = cur2_s3.S3Reader(fs, delivery)
        else:
            cur2.inspect_schema(delivery)
            if delivery.engine_columns:  # DuckDB's reader would add a column the file has
                reader = cur2_s3.S3Reader(pafs.LocalFileSystem(), delivery)
        if reader is None:
            cur2.register_raw(con, delivery, "cur_raw")
        else:
            cur2.inspect_schema(delivery, reader.read_schema)
            cur2_s3.register_raw(con, reader, "cur_raw")
            if fs is None:
                delivery.bytes_read = None  # read locally: no transfer to count
        cur2.check_amounts(con, delivery, "cur_raw")  # inf / NaN / 1e30 stop here
        cur2.check_commitment_figures(con, delivery, "cur_raw")
        # net columns are used when the export carries them with values; the split (a
        # statement after the insert) only when a line names a parent instance: exports that
        # select every column carry the split ones, empty, without split cost allocation data
        if delivery.has_net_columns or delivery.has_split_columns:
            has_net, has_split = con.execute(
                "SELECT count(line_item_net_unblended_cost) > 0, "
                "count(nullif(trim(split_line_item_parent_resource_id), '')) > 0 FROM cur_raw"
            ).fetchone()
            delivery.has_net_columns = delivery.has_net_columns and has_net
            delivery.has_split_columns = delivery.has_split_columns and has_split
    except duckdb.Error as exc:
        raise SourceError(name, cur2.locate_bad_file(delivery, str(exc)) or where,
                          _short(exc)) from None
    params = {
        "month": month, "month_start": start, "source": name,
        "has_net": delivery.has_net_columns, "known_buckets": known_buckets(cfg),
    }
    return StagedSource(sql_text("billing_facts_cur2"), params, where,
                        lambda message: cur2.locate_bad_file(delivery, message), delivery,
                        metadata=cur2_s3.read_metadata(delivery),
                        file_rows=delivery.file_rows,
                        after=(sql_text("billing_facts_cur2_split")
                               if delivery.has_split_columns else None))


def _stage_gcp(con, name: str, source: GcpBillingExportSource, cfg: PipelineConfig,
               month: date, log: logging.Logger) -> StagedSource:
    start, _end = month_bounds(month)
    read = gcp_billing.read_month(name, source, month, cfg.run_tag)
    log.info(f"{name}: {read.export_rows_read} export row(s) of {month:%Y-%m} reduced to "
             f"{read.rows_returned} in BigQuery ({read.bytes_scanned_estimate} bytes scanned)")
    # read once, as a stream (`register_once`): registered as a table, the month's rows
    # stayed in memory until the run's commit
    register_once(con, "gcp_raw", read.rows)
    params = {"month": month, "month_start": start, "source": name,
              "known_buckets": known_buckets(cfg), "export_table": read.table}
    return StagedSource(sql_text("billing_facts_gcp"), params, read.table,
                        metadata=read.metadata)


def _stage_focus(con, name: str, source: FocusSource, cfg: PipelineConfig, month: date,
                 log: logging.Logger) -> StagedSource:
    start, _end = month_bounds(month)
    path = cfg.resolve(source.path)
    if "://" in path and not s3.is_s3(path):
        raise SourceError(name, path, "expected a local file or folder or an s3:// URI")
    fs = s3.filesystem(source.endpoint_url, source.region) if s3.is_s3(path) else None
    found = focus.register_raw(con, name, path, month, log, fs)
    log.info(f"{name}: {found.rows} FOCUS row(s) of {month:%Y-%m} from {len(found.files)} "
             f"file(s) under {path}")
    params = {"month": month, "month_start": start, "source": name,
              "known_buckets": known_buckets(cfg)}
    metadata = {"files": len(found.files), "rows": found.rows}
    if found.remote:  # what column pruning left on the server
        metadata |= {"file_bytes": found.remote.file_bytes,
                     "bytes_read": found.remote.bytes_read}
    # the rows as read are not needed once inserted: a temp table left to the run's COMMIT
    # cost it ~3 s at 2M rows
    return StagedSource(sql_text("billing_facts_focus"), params, path, metadata=metadata,
                        after=f"DROP {found.raw_kind} {focus.RAW_TABLE}")


# billing source kind → reader; each reader registers its views and returns a StagedSource
READERS: dict[str, Callable[..., StagedSource]] = {
    "aws_cur2": _stage_cur2,
    "gcp_billing_export": _stage_gcp,
    "focus": _stage_focus,
}


def load_month(
    con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, month: date, log: logging.Logger
) -> BillingSummary:
    """Insert every billing source's month into `billing_facts` (whose month the caller has
    emptied, in the transaction it commits or rolls back), checking each source, then the
    month as a whole. The rows go straight to the table: staging a copy of the month first
    cost as much as writing it."""
    _load_accelerators(con, cfg)
    # the checks below read the month's rows through this view
    con.execute(f"CREATE OR REPLACE TEMP VIEW {STAGE} AS SELECT * FROM billing_facts "
                f"WHERE month = DATE '{month.isoformat()}'")
    _relax_old_constraints(con)
    summary = BillingSummary()
    sources = dict(zip(source_names(cfg.billing), cfg.billing, strict=True))
    for name, source in sources.items():
        reader = READERS.get(source.kind)
        if reader is None:
            raise SourceError(name, None,
                              f"billing source kind {source.kind!r} is not supported yet")
        staged = reader(con, name, source, cfg, month, log)
        try:
            query(con, f"INSERT INTO billing_facts BY NAME ({staged.sql})", staged.params)
            if staged.after:
                query(con, staged.after, staged.params)
        except duckdb.Error as exc:
            raise SourceError(name, staged.locate(str(exc)) or staged.where, _short(exc)) from None
        # the sources loaded before were complete: a line lacking a value is this source's
        _check_required(con, name)
        _check_amounts(con, name, source.kind)
        if staged.file_rows is not None:  # (each line now has its x_SourceLine)
            _check_rows_arrived(con, name, staged.file_rows)
        if staged.delivery is not None:
            summary.deliveries.append(staged.delivery)
        if staged.metadata:
            summary.source_metadata[name] = staged.metadata
        # FOCUS exports may be daily (Azure's are): hours per line still hold there
        _check_source(con, name, staged.where, month, hourly=source.kind != "focus")
    _check_staged(con, month, summary, {name: s.kind for name, s in sources.items()})
    return summary


# the values every line needs; the schema leaves them nullable so that this check, not a
# constraint that aborts the transaction, names a line lacking one
REQUIRED = ("ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory", "BilledCost",
            "EffectiveCost", "x_CostComponent", "x_AcceleratorCount", "x_InstanceUsage",
            "x_SourceLine")
# the source's own name of a required value, for the message
_RAW_NAMES = {"ChargePeriodStart": "line_item_usage_start_date",
              "ChargePeriodEnd": "line_item_usage_end_date",
              "x_SourceLine": "identity_line_item_id"}


def _relax_old_constraints(con: duckdb.DuckDBPyConnection) -> None:
    """Warehouses created when the required columns were NOT NULL: drop the constraint."""
    for (column,) in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE table_name = 'billing_facts' "
            "AND schema_name = 'main' AND NOT is_nullable AND column_name <> 'month'"
    ).fetchall():
        con.execute(f"ALTER TABLE billing_facts ALTER COLUMN {column} DROP NOT NULL")


def _check_required(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Raise naming the first loaded line that lacks a required value."""
    missing = " OR ".join(f"{c} IS NULL" for c in REQUIRED)
    nulls = ", ".join(f"bool_or({c} IS NULL)" for c in REQUIRED)
    bad = con.execute(f"SELECT x_File, x_Row, {nulls} FROM {STAGE} WHERE {missing} "
                      "GROUP BY x_File, x_Row ORDER BY x_File, x_Row LIMIT 1").fetchone()
    if bad:
        column = next(c for c, null in zip(REQUIRED, bad[2:], strict=True) if null)
        raw = _RAW_NAMES.get(column, column)
        raise SourceError(name, f"{bad[0]} row {bad[1]}",
                          f"{raw} is empty or not a timestamp" if "date" in raw
                          else f"{raw} is empty")


def _check_rows_arrived(con: duckdb.DuckDBPyConnection, name: str,
                        file_rows: dict[str, int]) -> None:
    """Raise naming the first file of which not every row became a line. DuckDB skips a
    row group whose footer statistics rule out a filter's values, so statistics that
    contradict the data (a damaged footer: a minimum above the maximum) would otherwise
    drop the group's rows from the month without an error."""
    arrived = dict(con.execute(f"SELECT x_File, count(*) FROM {STAGE} "
                               "WHERE starts_with(x_SourceLine, ?) GROUP BY x_File",
                               [name + ":"]).fetchall())
    for file in sorted(file_rows):
        if arrived.get(file, 0) < file_rows[file]:  # (a file listed twice arrives twice)
            raise SourceError(name, file, f"{arrived.get(file, 0)} of its {file_rows[file]} "
                              "rows could be read: the file's statistics contradict its data "
                              "(a damaged footer?)")


# the figures of a line, and where each kind of source takes them from (for the message)
AMOUNTS = ("BilledCost", "EffectiveCost", "ListCost", "ConsumedQuantity", "x_UsageHours")
_SOURCE_FIELDS = {
    "aws_cur2": {"ConsumedQuantity": "line_item_usage_amount",
                 "x_UsageHours": "line_item_usage_amount", "ListCost":
                 "pricing_public_on_demand_cost", "BillingCurrency": "line_item_currency_code"},
    "gcp_billing_export": {"BilledCost": "cost", "EffectiveCost": "cost (with its credits)",
                           "ListCost": "cost_at_list", "ConsumedQuantity": "usage.amount",
                           "x_UsageHours": "usage.amount", "BillingCurrency": "currency"},
}


def _check_amounts(con: duckdb.DuckDBPyConnection, name: str, kind: str) -> None:
    """Raise naming the first loaded line with a figure that is not a finite amount below
    MAX_AMOUNT (inf, NaN, 1e30): it would otherwise load, and fail the report or print
    `nan`. The field is the export's own column where the line shows which."""
    bad = " OR ".join(bad_amount_sql(c) for c in AMOUNTS)
    flags = ", ".join(f"coalesce({bad_amount_sql(c)}, false)" for c in AMOUNTS)
    row = con.execute(
        f"SELECT x_File, x_Row, {', '.join(AMOUNTS)}, {flags} FROM {STAGE} "
        f"WHERE starts_with(x_SourceLine, ?) AND ({bad}) ORDER BY x_File, x_Row LIMIT 1",
        [name + ":"]).fetchone()
    if row is None:
        return
    file, line = row[0], row[1]
    column, value = next((c, v) for c, v, flagged in zip(
        AMOUNTS, row[2:2 + len(AMOUNTS)], row[2 + len(AMOUNTS):], strict=True) if flagged)
    field = _SOURCE_FIELDS.get(kind, {}).get(column, column)
    if kind == "aws_cur2":
        found = cur2.bad_amount_column(con, "cur_raw", file, line)
        if found:
            field, value = found
        elif column in ("BilledCost", "EffectiveCost"):
            field = f"{column} (from the line's cost columns)"
    raise SourceError(name, f"{file} row {line}",
                      f"{field} is {value}: a cost or quantity must be a finite number below "
                      f"{MAX_AMOUNT_TEXT}")


def _short(exc: Exception) -> str:
    return str(exc).splitlines()[0]


def _source_of(line: str) -> str:
    return line.split(":", 1)[0]


def _check_source(con: duckdb.DuckDBPyConnection, name: str, where: str, month: date,
                  hourly: bool = True) -> None:
    """Per-source checks on the rows just loaded: periods ordered, and an hourly export."""
    bad_period = con.execute(
        f"SELECT x_File, x_Row FROM {STAGE} WHERE starts_with(x_SourceLine, ?) "
        "AND ChargePeriodEnd < ChargePeriodStart ORDER BY x_File, x_Row LIMIT 1",
        [name + ":"]).fetchone()
    if bad_period:
        raise SourceError(name, f"{bad_period[0]} row {bad_period[1]}",
                          "line_item_usage_end_date is before line_item_usage_start_date")
    instance_lines, short_lines = con.execute(
        f"SELECT count(*), count(*) FILTER (WHERE ChargePeriodEnd - ChargePeriodStart "
        f"< INTERVAL 1 DAY) FROM {STAGE} WHERE starts_with(x_SourceLine, ?) "
        "AND x_UsageHours IS NOT NULL", [name + ":"]).fetchone()
    if hourly and instance_lines > 0 and short_lines == 0:
        raise SourceError(name, where, f"no instance-usage line of {month:%Y-%m} is shorter "
                          "than a day: " + cur2.GRANULARITY_FIX)


def _check_staged(con: duckdb.DuckDBPyConnection, month: date, summary: BillingSummary,
                  kinds: dict[str, str]) -> None:
    """The month as a whole: duplicate line ids, one currency (`kinds`: each source's kind,
    whose own name of the currency the message uses)."""
    # a count of distinct hashes can only under-count (collisions), so equal counts prove
    # that no line id repeats and the costly duplicate search can be skipped
    rows, distinct_hashes = con.execute(
        f"SELECT count(*), count(DISTINCT key_hash(x_SourceLine)) FROM {STAGE}").fetchone()
    has_duplicates = rows != distinct_hashes
    # a line's copies are identical when every value is (its tags, its usage type's instance
    # and component too: copies differing only there were dropped as identical, the run or the
    # GPUs a line had depending on which file sorted first); where it was read from is not
    names = [c for (c, *_) in con.execute(f"DESCRIBE {STAGE}").fetchall()
             if c not in ("month", "x_SourceLine", "x_File", "x_Row")]  # (the schema's names)
    values = [sql_identifier(c) for c in names]
    conflict = None if not has_duplicates else con.execute(
        f"""SELECT x_SourceLine, list(DISTINCT x_File ORDER BY x_File),
                   list(x_Row ORDER BY x_File, x_Row)
            FROM {STAGE}
            GROUP BY x_SourceLine
            HAVING count(DISTINCT ({', '.join(values)})) > 1
            ORDER BY 1
            LIMIT 1"""
    ).fetchone()
    if conflict:
        line, files, rows = conflict
        source = _source_of(line)
        differs = ", ".join(f"CASE WHEN count(DISTINCT {v}) > 1 THEN '{name}' END"
                            for v, name in zip(values, names, strict=True))
        (differ,) = con.execute(f"SELECT [{differs}] FROM {STAGE} WHERE x_SourceLine = ?",
                                [line]).fetchone()
        raise SourceError(source, ", ".join(files),
                          f"line {line[len(source) + 1:]} appears more than once with different "
                          f"values (rows {', '.join(map(str, rows[:5]))}; "
                          f"{', '.join(d for d in differ if d)} differ): conflicting "
                          "duplicate line id")
    if has_duplicates:
        rows, distinct = con.execute(
            f"SELECT count(*), count(DISTINCT x_SourceLine) FROM {STAGE}").fetchone()
        summary.duplicates_dropped = rows - distinct
        if distinct != distinct_hashes:
            # attribution_rows names a line by key_hash(x_SourceLine): two ids sharing one
            # (about a one-in-a-million chance for a month of 5M lines) would mix their rows
            (lines,) = con.execute(
                f"SELECT list(DISTINCT x_SourceLine ORDER BY x_SourceLine) FROM {STAGE} "
                "GROUP BY key_hash(x_SourceLine) HAVING count(DISTINCT x_SourceLine) > 1 "
                "ORDER BY 1 LIMIT 1").fetchone()
            raise SourceError(_source_of(lines[0]), None,
                              f"line ids {' and '.join(lines[:2])} share a 64-bit hash, which "
                              "the attribution keys lines by: this month cannot be attributed")
    currencies = [c for (c,) in con.execute(
        f"SELECT BillingCurrency FROM {STAGE} GROUP BY 1 ORDER BY count(*) DESC, 1").fetchall()]
    if len(currencies) > 1:
        line, file, row, currency = con.execute(
            f"SELECT x_SourceLine, x_File, x_Row, BillingCurrency FROM {STAGE} "
            "WHERE BillingCurrency <> ? ORDER BY x_File, x_Row LIMIT 1",
            [currencies[0]]).fetchone()
        field = _SOURCE_FIELDS.get(kinds.get(_source_of(line), ""), {}).get(
            "BillingCurrency", "BillingCurrency")
        raise SourceError(_source_of(line), f"{file} row {row}",
                          f"{field} {currency} differs from {currencies[0]}: "
                          f"one currency per month is required ({month:%Y-%m} has "
                          f"{', '.join(sorted(currencies))})")
    summary.currency = currencies[0] if currencies else None
    # an unknown type counts 1 accelerator an instance, but on Google's accelerator lines
    # its accelerator-hours ÷ the hours of its period, rounded up (billing_facts_gcp.sql, the
    # FOCUS reader's GCP rule): the counts its lines hold, which the warning states
    summary.unknown_accelerator_counts = {t: sorted(counts) for t, counts in con.execute(
        "SELECT x_InstanceType, list(DISTINCT CASE WHEN ProviderName ILIKE '%google%' "
        f"THEN x_AcceleratorCount ELSE 1 END) FROM {STAGE} WHERE x_UnknownAcceleratorType "
        "AND x_InstanceType IS NOT NULL GROUP BY 1 ORDER BY 1").fetchall()}
    summary.unknown_instance_types = list(summary.unknown_accelerator_counts)


def unknown_count_warning(counts: dict[str, list[int]]) -> str:
    """The warning naming the types of unknown accelerator count, each with the count(s) its
    lines were counted as: a count above 1 is a GCP accelerator line's, from its hours."""
    def counted(values: list[int]) -> str:
        text = " or ".join(filter(None, [", ".join(map(str, values[:-1])), str(values[-1])]))
        return f"counted as {text}" + (
            ": its accelerator-hours ÷ the hours of its period, rounded up"
            if values[-1] > 1 else "")
    return "accelerator count unknown (add them under `accelerators:`): " + ", ".join(
        f"{name} ({counted(values)})" for name, values in counts.items())


def _sources_with_lines(con: duckdb.DuckDBPyConnection, month: date,
                        names: list[str]) -> list[str]:
    """Those of `names` with a line in the month's `billing_facts` (a line id starts with its
    source's name and `:`): each found at its first line, where grouping the month's lines by
    source took ~0.5 s at 5M lines."""
    return [name for name in names if con.execute(
        "SELECT 1 FROM billing_facts WHERE month = ? AND starts_with(x_SourceLine, ?) LIMIT 1",
        [month, f"{name}:"]).fetchall()]


def _refuse_unnamed_sources(con: duckdb.DuckDBPyConnection, month: date,
                            names: list[str]) -> None:
    """Lines the month holds from a billing source the config no longer names (taken out, or
    renamed: its lines' ids start with the old name) are refused as a source whose files are
    gone is: written again, the month would lose them, its bill shrunk by that source's share.
    One scan of the line ids (a source's name never holds a `:`), grouped only when some
    line is of no configured source."""
    prefixes = [f"{name}:" for name in names]
    configured = " OR ".join("starts_with(x_SourceLine, ?)" for _ in prefixes) or "false"
    unnamed = con.execute(
        f"SELECT split_part(x_SourceLine, ':', 1) AS source, count(*) FROM billing_facts "
        f"WHERE month = ? AND NOT ({configured}) GROUP BY source ORDER BY source",
        [month, *prefixes]).fetchall()
    if unnamed:
        held = ", ".join(f"{lines:,} line{'s' if lines != 1 else ''} of the month from {name}"
                         for name, lines in unnamed)
        one = len(unnamed) == 1
        raise SourceError("billing", f"{month:%Y-%m}", (
            f"the warehouse holds {held}, "
            + ("a billing source the config no longer names: put it back (its name as it "
               "was), or `materialize --force` drops its lines" if one else
               "billing sources the config no longer names: put them back (their names as "
               "they were), or `materialize --force` drops their lines")))


# where a bill's line was read from: no reader's figure depends on it
BILL_LINEAGE = ("month", "x_File", "x_Row")


def bill_token(con: duckdb.DuckDBPyConnection, month: date, run_tag: str | None) -> str:
    """The month's bill as one text (`bill_figures`' first)."""
    return bill_figures(con, month, run_tag)[0]


def bill_figures(con: duckdb.DuckDBPyConnection, month: date, run_tag: str | None
                 ) -> tuple[str, int, float, float]:
    """The month's bill as one text, with its lines' count and total EffectiveCost and
    BilledCost read in the same scan. The text is for `input_tokens` (the later months' skips,
    the decision tables' bases) and the attribution's basis: its lines' count, the sum of the
    hashes of the columns the attribution reads (attribution.py `ATTRIBUTED_LINE_HASH`, its
    part), and the sum of each line's hashes over every column but where it was read from
    (`BILL_LINEAGE`) — whatever the lines' order. A bill written again with the same lines (its
    files delivered again, `--force`) gives the same token; a restated figure of any line — its
    cost, list price, currency, tags — moves it. Each text is hashed with its reverse too
    (warehouse.py `row_hash`), the run tag's value as well (a run's id, which the tags' map
    alone hashes as DuckDB hashes a text). 2M lines with four tags each take ~0.6 s of CPU,
    where the attribution's own hash of them, which it no longer computes, took ~0.3 s. A chain
    that moved on every write gave the later months a note, and a recomputation, for every bill
    delivered again."""
    kinds = {name: kind for name, kind, *_ in con.execute("DESCRIBE billing_facts").fetchall()}
    # a line's other columns, bound to it by its attributed hash (its id is hashed there)
    others = [name for name in kinds if name not in (*BILL_LINEAGE, "x_SourceLine")]
    parts = [sql_identifier(name) for name in others]
    parts += [f"reverse({sql_identifier(name)})" for name in others if kinds[name] == "VARCHAR"]
    ((rows, attributed, every, effective, billed),) = query(
        con, f"SELECT count(*), coalesce(sum(a), 0), coalesce(sum(hash(a, {', '.join(parts)})), "
        "0), coalesce(fsum(EffectiveCost), 0), coalesce(fsum(BilledCost), 0) "
        f"FROM (SELECT *, {ATTRIBUTED_LINE_HASH} AS a FROM {TAGGED_LINES})",
        {"month": month, "run_tag": run_tag}).fetchall()
    return f"{rows}:{attributed}:{every}", rows, effective, billed


def build_billing_facts(
    con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, month: date, log: logging.Logger,
    keep_held: bool = True,
) -> BillingSummary:
    """Replace the month's `billing_facts` by what the sources hold now, atomically: on any
    error the month keeps its previous rows. With `keep_held`, a source that now holds no line
    of a month the warehouse holds lines of from it is an error (its files gone, a path
    moved), not a month emptied or shrunk by that source's share; `materialize --force`
    takes what the sources hold."""
    ensure_schema(con)
    (held,) = con.execute("SELECT coalesce(max(lines), 0) FROM billing_months WHERE month = ?",
                          [month]).fetchone()
    held_sources = _sources_with_lines(con, month, source_names(cfg.billing)) \
        if keep_held and held else []
    if keep_held and held:
        _refuse_unnamed_sources(con, month, source_names(cfg.billing))
    with month_transaction(con):
        con.execute("DELETE FROM billing_facts WHERE month = ?", [month])
        summary = load_month(con, cfg, month, log)
        if summary.unknown_accelerator_counts:
            log.warning(unknown_count_warning(summary.unknown_accelerator_counts))
        if summary.duplicates_dropped:
            log.warning(f"{summary.duplicates_dropped} identical duplicate line(s) dropped")
            # keep the first copy of each identical duplicate
            con.execute(
                "DELETE FROM billing_facts WHERE month = ? AND rowid IN (SELECT rowid FROM "
                "billing_facts WHERE month = ? QUALIFY row_number() OVER (PARTITION BY "
                "x_SourceLine ORDER BY x_File, x_Row) > 1)", [month, month])
        # the delivery is recorded in the transaction that writes its rows: both or neither
        summary.delivery_records = record_deliveries(con, month, summary.deliveries)
        # the month's whole bill for the reports: its row summed from the lines just written
        con.execute("DELETE FROM billing_months WHERE month = ?", [month])
        query(con, f"INSERT INTO billing_months BY NAME ({sql_text('period_month_totals')})",
              {"first": month, "last": month})
        # what the month's bill now holds, for the decision tables' bases and the later
        # months' skips: the same lines written again give the same token
        # (and the month's totals, from the same scan of its lines)
        token, summary.rows, summary.total_effective_cost, summary.total_billed_cost = \
            bill_figures(con, month, cfg.run_tag)
        note_input(con, month, "billing", token)
        if keep_held and held and not summary.rows:
            raise SourceError("billing", f"{month:%Y-%m}", (
                f"the sources hold no line of the month, where the warehouse holds {held:,}: "
                "their files gone or a path moved? The month keeps its lines; "
                "`materialize --force` empties it"))
        for name in held_sources:
            if not _sources_with_lines(con, month, [name]):
                raise SourceError(name, f"{month:%Y-%m}", (
                    "the source holds no line of the month, where the warehouse holds lines "
                    "from it: its files gone or a path moved? The month keeps its lines; "
                    "`materialize --force` drops them"))
        con.execute(f"DROP VIEW IF EXISTS {STAGE}")
    for record in summary.delivery_records:
        summary.source_metadata.setdefault(record["source"], {}).update(delivery_metadata(record))
    return summary
