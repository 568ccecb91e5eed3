"""The month's attributed bill → a FOCUS 1.2 cost-and-usage dataset (parquet or CSV) that any
FinOps tool reads, the attribution in `x_` columns and `cost-pipeline/…` tags.

The rows come from `assets/queries/focus_export.sql` (one row per billing line × attribution
row, the metrics split so that a line's rows sum back to it exactly). Before the file is
written the totals are checked against `billing_facts`: BilledCost and EffectiveCost must be
equal to the last decimal place, or nothing is written. The file is written atomically and is
byte-stable: the same warehouse month gives the same bytes.
"""

from __future__ import annotations

import shutil
import tempfile
import unicodedata
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from datetime import date
from decimal import Decimal
from pathlib import Path
from urllib.parse import quote

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from cost_pipeline.config import WarehouseConfig
from cost_pipeline.export import cannot_write, written_atomically
from cost_pipeline.ingest.sources import sql_identifier
from cost_pipeline.warehouse import (
    bind,
    connect_read_only,
    materialized_empty,
    run_script,
    sql_text,
)

# the config's own default, for callers without a config
DEFAULT_MEMORY_LIMIT = WarehouseConfig.model_fields["memory_limit"].default

FORMATS = ("parquet", "csv")
FOCUS_VERSION = "1.2"
# FOCUS DateTimeFormat: ISO 8601 in UTC, `Z`
CSV_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
# FOCUS StringHandling (as focus-validator checks it): these columns hold ASCII only. Ids keep
# every ASCII character and percent-encode the others (reversible); names and descriptions
# lose their accents (`Zürich` → `Zurich`), any other non-ASCII character becoming `?`.
# RegionName is RegionId, spelled alike.
ASCII_IDS = ("BillingAccountId", "InvoiceId", "RegionId", "RegionName", "ResourceId", "SkuId")
ASCII_TEXT = ("BillingAccountName", "BillingCurrency", "ChargeDescription", "ConsumedUnit",
              "InvoiceIssuerName", "PricingUnit", "ProviderName", "PublisherName",
              "ServiceName")


TOTAL_TOLERANCE = Decimal("0.01")


class FocusExportError(ValueError):
    """The dataset cannot be written: the month is not attributed, totals disagree, …"""


def _require_attribution(con: duckdb.DuckDBPyConnection, month: date) -> None:
    lines, attributed = con.execute(
        "SELECT (SELECT count(*) FROM billing_facts WHERE month = ?), "
        "(SELECT count(*) FROM (SELECT 1 FROM attribution_rows WHERE month = ? LIMIT 1))",
        [month, month]).fetchall()[0]
    if lines and not attributed:
        raise FocusExportError(f"{month:%Y-%m} has billing lines but no attribution: "
                               "materialize the month first")


def _prepare(con: duckdb.DuckDBPyConnection, month: date) -> None:
    """The month-wide facts every slice reads and where the slices start
    (`focus_export_prepare.sql`), as temp tables."""
    run_script(con, sql_text("focus_export_prepare"), {"month": month, "slice_rows": SLICE_ROWS})


def _slice_query(month: date, line_from: str | None = None, line_to: str | None = None):
    sql = sql_text("focus_export")
    return sql, bind(sql, {"month": month, "line_from": line_from, "line_to": line_to})


def focus_rows(con: duckdb.DuckDBPyConnection, month: date) -> pa.Table:
    """The month as FOCUS 1.2 rows in memory, checked to sum to `billing_facts` (for small
    months and tests; `stream_focus` writes any month in bounded memory)."""
    _require_attribution(con, month)
    _prepare(con, month)
    sql, params = _slice_query(month)
    rows = con.sql(sql, params=params).to_arrow_table()
    _check_totals(con, month, rows)
    return _ascii_strings(rows)


def _ascii_id(value: str) -> str:
    return "".join(c if c.isascii() else quote(c, safe="") for c in value)


def _ascii_text(value: str) -> str:
    folded = unicodedata.normalize("NFKD", value)
    return "".join(c if c.isascii() else "?" for c in folded if not unicodedata.combining(c))


def _ascii_strings(rows: pa.Table) -> pa.Table:
    """The FOCUS string columns in ASCII (see ASCII_IDS / ASCII_TEXT); a no-op, and no copy,
    when they already are."""
    for names, convert in ((ASCII_IDS, _ascii_id), (ASCII_TEXT, _ascii_text)):
        for name in names:
            column = rows[name]
            if pc.all(pc.or_kleene(pc.string_is_ascii(column), pc.is_null(column))).as_py():
                continue
            values = [None if v is None else convert(v) for v in column.to_pylist()]
            rows = rows.set_column(rows.column_names.index(name), name,
                                   pa.array(values, column.type))
    return rows


def _check_totals(con: duckdb.DuckDBPyConnection, month: date, rows: pa.Table) -> None:
    _check_sums(con, month, {
        column: Decimal(str(pc.sum(rows[column]).as_py() or 0)) if rows.num_rows else Decimal(0)
        for column in ("BilledCost", "EffectiveCost")})


def _check_sums(con: duckdb.DuckDBPyConnection, month: date, sums: dict[str, Decimal]) -> None:
    billed, effective = con.execute(
        "SELECT coalesce(sum(CAST(BilledCost AS DECIMAL(38, 10))), 0), "
        "coalesce(sum(CAST(EffectiveCost AS DECIMAL(38, 10))), 0) FROM billing_facts "
        "WHERE month = ?", [month]).fetchall()[0]
    for column, expected in (("BilledCost", billed), ("EffectiveCost", effective)):
        got = sums[column]
        # each line's rows sum back to it exactly (DECIMAL, the last row takes the rest); the
        # total is a guard against lost or doubled lines, compared to SPEC §6's cent
        if abs(got - Decimal(str(expected))) > TOTAL_TOLERANCE:
            raise FocusExportError(f"the FOCUS rows' {column} sums to {got}, billing_facts "
                                   f"of {month:%Y-%m} to {expected}: not written")


def _csv_ready(rows: pa.Table) -> pa.Table:
    """Timestamps as FOCUS's `YYYY-MM-DDTHH:MM:SSZ` text, decimals in plain notation (Arrow
    writes a zero or a tiny amount as `0E-10`; DuckDB's text of a DECIMAL is `0.0000000000`)."""
    columns = []
    decimals = [f.name for f in rows.schema if pa.types.is_decimal(f.type)]
    if decimals:
        with duckdb.connect() as con:
            con.register("amounts", rows.select(decimals))
            plain = con.sql("SELECT " + ", ".join(
                f"CAST({sql_identifier(name)} AS VARCHAR)" for name in decimals)
                + " FROM amounts").to_arrow_table()
    for field, column in zip(rows.schema, rows.columns, strict=True):
        if pa.types.is_timestamp(field.type):  # whole seconds: `%S` would print micros
            seconds = column.cast(pa.timestamp("s", tz="UTC"), safe=False)
            column = pc.strftime(seconds, format=CSV_TIME_FORMAT)
        elif pa.types.is_decimal(field.type):
            column = plain.column(decimals.index(field.name))
        columns.append(column)
    return pa.Table.from_arrays(columns, names=rows.column_names)


def write_focus(rows: pa.Table, path: str | Path, fmt: str = "parquet") -> Path:
    """Write atomically (a reader never sees half a file), byte-stable for the same rows."""
    if fmt not in FORMATS:
        raise FocusExportError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    with written_atomically(path) as partial:
        if fmt == "csv":
            pacsv.write_csv(_csv_ready(rows), partial)
        else:
            pq.write_table(rows, partial, compression="zstd", write_statistics=True)
    return Path(path).resolve()


def default_focus_path(warehouse: str | Path, month: date, fmt: str = "parquet") -> Path:
    """`<warehouse folder>/exports/focus-YYYY-MM.<parquet|csv>`."""
    return Path(warehouse).resolve().parent / "exports" / f"focus-{month:%Y-%m}.{fmt}"


# rows per batch the export streams: DuckDB hands the ordered rows over in batches that are
# made ASCII, summed and written one at a time, so memory stays bounded by a batch, not the month
BATCH_ROWS = 100_000
# FOCUS rows per slice: the month's rows are built and sorted a slice of its lines at a time
# (consecutive ranges of x_SourceLine, so the slices' rows follow each other in the file's
# order). Sorting the whole month at once spilled gigabytes through zstd and the disk even at
# 4 GB of memory; a slice of this size stays within `warehouse.memory_limit`'s default.
SLICE_ROWS = 250_000


def _slice_bounds(con: duckdb.DuckDBPyConnection) -> list[tuple[str | None, str | None]]:
    """[from, to) ranges of x_SourceLine, in order, that cover the month (None: unbounded),
    from `focus_slice_starts` (`_prepare`)."""
    starts = [line for (line,) in con.execute(
        "SELECT line_from FROM focus_slice_starts ORDER BY line_from").fetchall()]
    edges = [None, *starts, None]
    return list(zip(edges[:-1], edges[1:], strict=True))


def _batches(con: duckdb.DuckDBPyConnection, month: date) -> Iterator[pa.Table]:
    """The month's rows in order as tables of BATCH_ROWS rows (the last may be shorter), slice
    after slice: the same batches, and so the same file, whatever the slicing. A month without
    rows is one empty table (the dataset's columns)."""
    pending: list[pa.RecordBatch] = []
    held, written = 0, False
    for line_from, line_to in _slice_bounds(con):
        sql, params = _slice_query(month, line_from, line_to)
        with con.sql(sql, params=params).to_arrow_reader(BATCH_ROWS) as reader:
            schema = reader.schema
            for batch in reader:
                pending.append(batch)
                held += batch.num_rows
                while held >= BATCH_ROWS:
                    table = pa.Table.from_batches(pending).combine_chunks()
                    yield table.slice(0, BATCH_ROWS)
                    written = True
                    rest = table.slice(BATCH_ROWS)
                    pending, held = rest.to_batches(), rest.num_rows
    if held:
        yield pa.Table.from_batches(pending).combine_chunks()
    elif not written:
        yield schema.empty_table()


def stream_focus(con: duckdb.DuckDBPyConnection, month: date, path: str | Path,
                 fmt: str = "parquet") -> tuple[Path, int, int]:
    """Write the month as FOCUS rows to `path` batch by batch; the file appears (atomically)
    only once its BilledCost and EffectiveCost equal `billing_facts` to the cent. Returns
    (path, rows, distinct runs). Byte-stable: the rows are ordered and batched alike."""
    if fmt not in FORMATS:
        raise FocusExportError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    _require_attribution(con, month)
    # the periods are written in the connection's zone: a Dagster resource's connection had
    # the machine's (`tz=America/New_York`, other bytes than the command's file)
    con.execute("SET TimeZone = 'UTC'")
    path = Path(path)
    # the partial file becomes `path` only after the sums check; any failure removes it
    with written_atomically(path) as partial:
        _prepare(con, month)
        sums = {"BilledCost": Decimal(0), "EffectiveCost": Decimal(0)}
        rows, runs, writer, empty = 0, set(), None, None
        try:
            # a batch is written (pyarrow, without the GIL) while DuckDB hands over the next
            # one; one write at a time, in order, and the batch after it waits for it
            with (ThreadPoolExecutor(max_workers=1, thread_name_prefix="focus-writer") as pool,
                  closing(_batches(con, month)) as batches):  # a failure ends DuckDB's result
                written = None
                for batch in batches:
                    if not batch.num_rows:
                        empty = batch
                        continue
                    table = _ascii_strings(batch)
                    for column in sums:
                        sums[column] += Decimal(str(pc.sum(table[column]).as_py() or 0))
                    runs.update(pc.unique(table.column("x_RunId").drop_null()).to_pylist())
                    rows += table.num_rows
                    if fmt == "csv":
                        table = _csv_ready(table)
                        writer = writer or pacsv.CSVWriter(partial, table.schema)
                    else:
                        writer = writer or pq.ParquetWriter(partial, table.schema,
                                                            compression="zstd",
                                                            write_statistics=True)
                    if written is not None:
                        written.result()
                    written = pool.submit(writer.write_table, table)
                if written is not None:
                    written.result()
        finally:
            if writer is not None:
                writer.close()
        if writer is None:  # no rows: still a file with the dataset's columns
            write_focus(empty, partial, fmt)
        _check_sums(con, month, sums)
    return path.resolve(), rows, len(runs)


def unbilled_month(con: duckdb.DuckDBPyConnection, month: date,
                   warehouse: str | Path) -> str | None:
    """Why the month cannot be exported — it has no billing line: a file of it would read as a
    $0 month to the tools reading it; None when it can. A month materialized with nothing
    billed yet is said as such (materializing it again changes nothing), one never
    materialized is told to be."""
    (lines,) = con.execute("SELECT count(*) FROM billing_facts WHERE month = ?",
                           [month]).fetchone()
    if lines:
        return None
    if materialized_empty(con, month):
        return (f"{month:%Y-%m} has no billing lines (it was materialized: nothing billed "
                "yet), so there is nothing to export")
    return f"no billing lines for {month:%Y-%m} in {warehouse}: materialize the month first"


def _sql_string(text: str) -> str:
    return text.replace("'", "''")


def export_focus(warehouse: str | Path, month: date, fmt: str = "parquet",
                 out: str | Path | None = None,
                 memory_limit: str | None = DEFAULT_MEMORY_LIMIT) -> tuple[Path, int]:
    """The month of the warehouse at `warehouse` as a FOCUS file; (path, rows). DuckDB holds
    at most `memory_limit` (the config's `warehouse.memory_limit`) and spills the rest to a
    temporary folder beside the export."""
    if fmt not in FORMATS:
        raise FocusExportError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if not Path(warehouse).exists():
        raise FocusExportError(f"no warehouse at {warehouse}: materialize a month first")
    target = Path(out) if out else default_focus_path(warehouse, month, fmt)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # a spill folder of this export's own: two exports of the same path at once would
        # share (and remove) each other's temporary files
        spill = (Path(tempfile.mkdtemp(dir=target.resolve().parent, prefix=f".{target.name}.",
                                       suffix=".spill")) if memory_limit else None)
    except OSError as exc:  # a read-only disk, a file where the folder must be: said as the
        raise cannot_write(target, exc) from exc  # file's own write would say it
    try:
        with connect_read_only(warehouse) as con:
            con.execute("SET TimeZone = 'UTC'")
            if spill is not None:
                con.execute(f"SET memory_limit = '{memory_limit}'")
                con.execute(f"SET temp_directory = '{_sql_string(str(spill))}'")
            problem = unbilled_month(con, month, warehouse)
            if problem:
                raise FocusExportError(problem)
            path, rows, _ = stream_focus(con, month, target, fmt)
    except duckdb.Error as exc:  # e.g. another process holds the write lock, no such table
        raise FocusExportError(f"cannot read {warehouse}: {str(exc).splitlines()[0]}") from None
    finally:
        if spill is not None:
            shutil.rmtree(spill, ignore_errors=True)
    return path, rows
