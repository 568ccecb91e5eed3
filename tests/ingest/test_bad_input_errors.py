"""The four bad inputs that are errors (SPEC §11, issue 7): a truncated CUR file, an export
without `line_item_resource_id`, a run ending before it starts, mixed currencies. Each run of
`cost-pipeline materialize` on a month that already has data exits 1 with one line naming the
source, the file and the row or field — and writes nothing: every table, every month, holds
exactly the rows it held before."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tests.support.warehouse_dump import copy_with_warehouse, dump

AUGUST = "2026-08"
CUR_FILE = f"exports/cur/ml-cur/data/BILLING_PERIOD={AUGUST}/ml-cur-00002.snappy.parquet"


def truncate(folder: Path) -> list[str]:
    file = folder / CUR_FILE
    file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])
    return ["aws_cur2: ", str(file), "not a readable parquet file"]


def drop_resource_ids(folder: Path) -> list[str]:
    file = folder / CUR_FILE
    pq.write_table(pq.read_table(file).drop_columns(["line_item_resource_id"]), file)
    return ["aws_cur2: ", str(file), "line_item_resource_id", "INCLUDE_RESOURCES"]


def end_before_start(folder: Path) -> list[str]:
    path = folder / "runs.csv"
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    start, end = rows[0].index("start_time"), rows[0].index("end_time")
    victim = next(i for i, r in enumerate(rows[1:], start=2) if r[end] and r[end] != r[start])
    rows[victim - 1][start], rows[victim - 1][end] = rows[victim - 1][end], rows[victim - 1][start]
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    path.write_text(buffer.getvalue(), encoding="utf-8")
    return ["runs_file: ", f"{path} row {victim}", "end_time", "is before start_time"]


def mixed_currencies(folder: Path) -> list[str]:
    file = folder / CUR_FILE
    table = pq.read_table(file)
    column = table.column("line_item_currency_code")
    euro = pc.if_else(pa.array([i == 4 for i in range(table.num_rows)]), "EUR", column)
    table = table.set_column(table.schema.get_field_index("line_item_currency_code"),
                             "line_item_currency_code", euro)
    pq.write_table(table, file)
    return ["aws_cur2: ", f"{file} row 5", "EUR", "USD", "one currency per month"]


def restate(folder: Path) -> None:
    """Valid changes to every input of the month, so that a table written anyway would show:
    the bill loses a line, a run changes model, the listing gains an object."""
    other = folder / CUR_FILE.replace("00002", "00001")
    table = pq.read_table(other)
    pq.write_table(table.slice(0, table.num_rows - 1), other)
    runs = folder / "runs.csv"
    runs.write_text(runs.read_text(encoding="utf-8").replace(",churn,churn,", ",churn,restated,",
                                                             1), encoding="utf-8")
    with (folder / "inventory.csv").open("a", encoding="utf-8") as inventory:
        inventory.write("ml-checkpoints,checkpoints/late/model.pt,1,2026-08-02T00:00:00Z\n")


CASES = {"truncated CUR file": truncate, "no line_item_resource_id": drop_resource_ids,
         "run ending before it starts": end_before_start, "mixed currencies": mixed_currencies}


def test_bad_input_is_one_line_exit_1_and_nothing_written(demo_quarter, tmp_path, dagster_home):
    config, _ = demo_quarter
    before = None
    launched = {}
    for name, corrupt in CASES.items():
        folder = tmp_path / name.replace(" ", "_")
        copy = copy_with_warehouse(Path(config), folder)
        before = before or dump(folder / "warehouse.duckdb")
        assert before["billing_facts"][date(2026, 8, 1)]  # the month has data to keep
        restate(folder)
        expected = corrupt(folder)
        env = {**os.environ, "DAGSTER_HOME": str(dagster_home)}
        # the four run at once (each on its own copy of the warehouse): one wait, not four
        launched[name] = (folder, expected, subprocess.Popen(
            [sys.executable, "-m", "cost_pipeline.cli", "materialize", "--config", str(copy),
             "--month", AUGUST], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env))
    for name, (folder, expected, proc) in launched.items():
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 1, (name, out, err)
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, (name, err)
        for part in expected:
            assert part in errors[0], (name, part, errors[0])
        for noise in ("Traceback", "Stack Trace", "dagster._core", "SourceError", "Dependencies"):
            assert noise not in err, (name, noise, err)
        assert "materialized" not in out
        assert dump(folder / "warehouse.duckdb") == before, name
