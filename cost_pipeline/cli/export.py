"""`cost-pipeline export …`: a month of a warehouse table written to a file for tools outside
the pipeline. `export runs` writes the month's `run_costs` (SPEC §12) as CSV or Parquet — the
per-run cost for trackers without write-back. Each export is one `cmd_*` function and one
`add_*` parser function below; `add_export_parser` assembles the group."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from cost_pipeline.export import written_atomically

if TYPE_CHECKING:  # duckdb and pyarrow are imported when an export runs, not when parsing
    import pyarrow as pa

FORMATS = ("csv", "parquet")
STDOUT = "-"  # `--out -`: the CSV to stdout (SPEC §10: results go to stdout)
# the format an --out name's extension says (any case); other names say none
EXTENSION_FORMATS = {".csv": "csv", ".parquet": "parquet"}


class ExportError(ValueError):
    """The export cannot be written: no warehouse, the month not materialized, …"""


def default_export_path(warehouse: str | Path, name: str, month: date, fmt: str) -> Path:
    """`<warehouse folder>/exports/<name>-YYYY-MM.<csv|parquet>`."""
    return Path(warehouse).resolve().parent / "exports" / f"{name}-{month:%Y-%m}.{fmt}"


# what says a table's month was written, even with no row: the decision tables' basis row
# (written with their rows, warehouse.py `replace_month_unless_same`), or the incremental
# record (cli/incremental.py; not written for the assets after an MLflow tracker, whose
# inputs cannot be fingerprinted)
WRITTEN_MARKS = (("decision_basis", "table_name"), ("materializations", "asset"))


def _month_written(con, table: str, month: date) -> bool:
    present = {name for (name,) in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_name IN "
        f"({', '.join('?' for _ in WRITTEN_MARKS)})", [m for m, _ in WRITTEN_MARKS]).fetchall()}
    return any(con.execute(f"SELECT count(*) FROM {mark} WHERE month = ? AND {column} = ?",
                           [month, table]).fetchall()[0][0]
               for mark, column in WRITTEN_MARKS if mark in present)


def _read_month(warehouse: str | Path, table: str, month: date, order_by: str) -> pa.Table:
    import duckdb

    from cost_pipeline.warehouse import connect_read_only

    if not Path(warehouse).exists():
        raise ExportError(f"no warehouse at {warehouse}: materialize a month first")
    try:
        # (a running materialization is waited for, an older version's warehouse upgraded)
        with connect_read_only(warehouse) as con:
            known = con.execute("SELECT count(*) FROM information_schema.tables "
                                "WHERE table_name = ?", [table]).fetchall()[0][0]
            materialized = known and _month_written(con, table, month)
            rows = con.sql(f"SELECT * FROM {table} WHERE month = ? ORDER BY {order_by}",
                           params=[month]).to_arrow_table() if known else None
            if rows is not None and "cost" in rows.column_names:
                rows = _with_currency(con, rows, month)
    except duckdb.Error as exc:  # e.g. a notebook holds the file, a writer kept it too long
        raise ExportError(f"cannot read {warehouse}: {str(exc).splitlines()[0]}") from None
    if rows is None or (not materialized and rows.num_rows == 0):
        raise ExportError(f"no {table} for {month:%Y-%m} in {warehouse}: materialize the "
                          "month first")
    return rows


def _with_currency(con, rows: pa.Table, month: date) -> pa.Table:
    """`currency` beside `cost`: the month's BillingCurrency (one a month, SPEC §5; USD when
    the bill names none), what every amount of the file is in — a JPY month's `82` and a
    EUR month's read alike without it."""
    import pyarrow as pa

    has_bill = con.execute("SELECT count(*) FROM information_schema.tables "
                           "WHERE table_name = 'billing_facts'").fetchall()[0][0]
    (currency,) = con.execute(
        "SELECT coalesce(min(BillingCurrency), 'USD') FROM billing_facts WHERE month = ?",
        [month]).fetchall()[0] if has_bill else ("USD",)
    return rows.add_column(rows.column_names.index("cost") + 1, "currency",
                           pa.array([currency] * rows.num_rows, pa.string()))


def _plain_decimals(rows: pa.Table) -> pa.Table:
    """Each floating-point column as the shortest text that reads back as its double, in
    plain decimal notation: Arrow's own writes `5e+11` and `1e-7` beside `333333333.3333333`.
    Only the few values Arrow's text gives an exponent are rewritten (through `Decimal`,
    exact); text, the columns are quoted, as the FOCUS CSV's amounts are."""
    from decimal import Decimal

    import pyarrow as pa
    import pyarrow.compute as pc

    columns = []
    for field, column in zip(rows.schema, rows.columns, strict=True):
        if pa.types.is_floating(field.type):
            column = pc.cast(column, pa.string())
            exponent = pc.match_substring(column, "e")
            if pc.any(exponent).as_py():
                column = pa.array([format(Decimal(text), "f") if has else text for text, has
                                   in zip(column.to_pylist(), exponent.to_pylist(), strict=True)],
                                  pa.string())
        columns.append(column)
    return pa.Table.from_arrays(columns, names=rows.column_names)


def _write(rows: pa.Table, path: Path, fmt: str) -> Path:
    """Write atomically: a reader never sees half a file, a failure leaves none."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    with written_atomically(path) as partial:
        if fmt == "csv":
            pacsv.write_csv(_plain_decimals(rows), partial)
        else:
            pq.write_table(rows, partial)
    return path.resolve()


def export_runs(warehouse: str | Path, month: date, fmt: str = "csv",
                out: str | Path | None = None) -> tuple[Path, int]:
    """The month's `run_costs` to `out` (default: `default_export_path`); (path, rows)."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    rows = _read_month(warehouse, "run_costs", month, "run_id")
    target = Path(out) if out else default_export_path(warehouse, "run-costs", month, fmt)
    return _write(rows, target, fmt), rows.num_rows


def output_format(given: str | None, out: str | None, default: str) -> str:
    """The format to write: `--format` when given, else the one `--out`'s extension names
    (`.csv`, `.parquet`; `-`, stdout, takes CSV), else the export's `default`. A `--format`
    that `--out`'s extension contradicts is refused: parquet in a `.csv` file (or CSV in a
    `.parquet` one) would be written silently otherwise."""
    if out == STDOUT:
        return given or "csv"
    suffix = Path(out).suffix if out else ""
    named = EXTENSION_FORMATS.get(suffix.lower())
    if given and named and given != named:
        raise ExportError(f"--format {given} contradicts --out {out} (a {suffix} file): "
                          f"drop --format, or name a .{given} file")
    return given or named or default


def require_csv_for_stdout(fmt: str) -> None:
    """`--out -` takes CSV; parquet (a file read from its footer, at its end) is refused."""
    if fmt != "csv":
        raise ExportError(f"{fmt} cannot go to stdout (--out -): name a file with --out, or "
                          "use --format csv")


def _staging_folder(warehouse: str | Path) -> tempfile.TemporaryDirectory:
    """A temporary folder beside the warehouse (the export may be gigabytes, and the
    warehouse's disk holds it), else in the system's temporary folder when the warehouse's
    cannot be written (a read-only disk); neither is one line naming both."""
    beside = Path(warehouse).resolve().parent
    tried = []
    for folder in ((beside,) if beside.is_dir() else ()) + (Path(tempfile.gettempdir()),):
        try:
            return tempfile.TemporaryDirectory(dir=folder, prefix=".export-to-stdout-")
        except OSError as exc:
            tried.append(f"{folder} ({os.strerror(exc.errno) if exc.errno else exc})")
    raise ExportError(f"cannot write the export's temporary copy in {' nor '.join(tried)}")


def copy_to_stdout(warehouse: str | Path, name: str, write: Callable[[Path], object]) -> None:
    """`write` the export to a file staged in a temporary folder (`_staging_folder`), then
    copy it to stdout: an export that fails, or whose totals do not check, writes nothing
    there, as it leaves no file."""
    with _staging_folder(warehouse) as folder:
        staged = Path(folder) / name
        write(staged)
        sys.stdout.flush()
        try:
            with staged.open("rb") as data:
                shutil.copyfileobj(data, sys.stdout.buffer)
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            # the reader stopped reading (`| head`): nothing more can be written there, and
            # the interpreter's last flush must not fail on it too
            try:
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            except (OSError, ValueError):  # a stdout that is no file (tests' capture)
                pass
            raise ExportError("stdout was closed before the whole export was written to it"
                              ) from None


def cmd_export_runs(args) -> int:
    from cost_pipeline.config import load_config
    from cost_pipeline.months import parse_month

    month = parse_month(args.month)
    fmt = output_format(args.format, args.out, "csv")
    cfg = load_config(args.config)
    warehouse = cfg.warehouse_path
    with in_partitions(month, cfg.first_month):
        if args.out == STDOUT:
            require_csv_for_stdout(fmt)
            copy_to_stdout(warehouse, "run-costs.csv",
                           lambda staged: export_runs(warehouse, month, fmt, staged))
            return 0
        path, _rows = export_runs(warehouse, month, fmt, args.out)
    print(path)
    return 0


@contextmanager
def in_partitions(month: date, first_month: date) -> Iterator[None]:
    """A month no export finds that no partition holds either (before `first_month`, not yet
    started) is said as such, with what to do, as `materialize` and `report` say it: "no
    run_costs for 2099-01 …: materialize the month first" sent the user to a command that
    refuses the month."""
    from cost_pipeline.export.focus import FocusExportError
    from cost_pipeline.months import out_of_range

    try:
        yield
    except (ExportError, FocusExportError) as exc:
        problem = out_of_range(month, first_month)
        if problem:
            raise type(exc)(problem) from None
        raise


def add_runs_parser(exports) -> None:
    runs = exports.add_parser(
        "runs", help="the month's per-run cost (run_costs) as CSV or Parquet",
        description="Write the month's run_costs: one row per run with cost in the month — "
        "cost by component, accelerator-hours, CPU-hours. Prints the file's path (--out -: "
        "writes the CSV itself to stdout).")
    runs.add_argument("--config", default=None,
                      help="config YAML (default: $COST_PIPELINE_CONFIG)")
    runs.add_argument("--month", required=True, help="YYYY-MM")
    runs.add_argument("--format", choices=FORMATS, default=None,
                      help="default: --out's extension (.csv, .parquet), else csv; one "
                      "contradicting the extension is refused")
    runs.add_argument("--out", default=None, help="file to write, - for stdout (CSV only; "
                      "default: <warehouse folder>/exports/run-costs-YYYY-MM.csv, or .parquet)")
    runs.set_defaults(func=cmd_export_runs)


def cmd_export_focus(args) -> int:
    from cost_pipeline.config import load_config
    from cost_pipeline.export.focus import export_focus
    from cost_pipeline.months import parse_month

    month = parse_month(args.month)
    fmt = output_format(args.format, args.out, "parquet")
    cfg = load_config(args.config)
    with in_partitions(month, cfg.first_month):
        if args.out == STDOUT:
            require_csv_for_stdout(fmt)
            copy_to_stdout(cfg.warehouse_path, "focus.csv", lambda staged: export_focus(
                cfg.warehouse_path, month, fmt, staged,
                memory_limit=cfg.warehouse.memory_limit))
            return 0
        path, _rows = export_focus(cfg.warehouse_path, month, fmt, args.out,
                                   memory_limit=cfg.warehouse.memory_limit)
    print(path)
    return 0


def add_focus_parser(exports) -> None:
    focus = exports.add_parser(
        "focus", help="the month's attributed bill as a FOCUS 1.2 dataset (parquet or CSV)",
        description="Write the month's bill as a FOCUS 1.2 cost-and-usage dataset: one row "
        "per billing line and run | untracked | unallocated, the metrics split to sum back to "
        "each line exactly, the allocation in x_RunId, x_Model, x_PurposeClass, x_SearchId, "
        "x_AllocationRule and cost-pipeline/* tags (docs/focus-export.md). Prints the path "
        "(--out -: writes the CSV itself to stdout).")
    focus.add_argument("--config", default=None,
                       help="config YAML (default: $COST_PIPELINE_CONFIG)")
    focus.add_argument("--month", required=True, help="YYYY-MM")
    focus.add_argument("--format", choices=("parquet", "csv"), default=None,
                       help="default: --out's extension (.parquet, .csv; - is csv), else "
                       "parquet; one contradicting the extension is refused")
    focus.add_argument("--out", default=None, help="file to write, - for stdout (CSV only; "
                       "default: <warehouse folder>/exports/focus-YYYY-MM.parquet, or .csv)")
    focus.set_defaults(func=cmd_export_focus)


def add_export_parser(sub: argparse._SubParsersAction) -> None:
    """The `export` group; each export adds its own subcommand here."""
    export = sub.add_parser("export", help="write a month of a table to a file",
                            description="Write a month of a warehouse table to a file.")
    exports = export.add_subparsers(dest="export", required=True, metavar="WHAT")
    add_runs_parser(exports)
    add_focus_parser(exports)
