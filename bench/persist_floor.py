"""The write floor: what persisting the pipeline's two big tables costs with nothing computed.
Copies the month's `billing_facts` and `attribution_rows` (the table under the `attribution`
view) from a warehouse the pipeline wrote
into a fresh DuckDB file (same engine, same settings, same column types), timed. The
one-statement reference persists nothing; the pipeline cannot beat this plus the reference's
compute.

    python bench/persist_floor.py WAREHOUSE [--memory-limit 1500MB]   # prints JSON
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import duckdb

TABLES = ("billing_facts", "attribution_rows")


def run(warehouse: Path, memory_limit: str | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        con = duckdb.connect(str(Path(tmp) / "copy.duckdb"))
        if memory_limit:
            con.execute(f"SET memory_limit = '{memory_limit}'")
        con.execute(f"ATTACH '{warehouse}' AS src (READ_ONLY)")
        seconds, rows = {}, {}
        for table in TABLES:
            t0 = time.perf_counter()
            con.execute(f"CREATE TABLE {table} AS SELECT * FROM src.{table}")
            con.execute("CHECKPOINT")
            seconds[table] = round(time.perf_counter() - t0, 3)
            rows[table] = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        con.close()
    return {"seconds": seconds, "rows": rows, "write_seconds": round(sum(seconds.values()), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("warehouse", type=Path)
    parser.add_argument("--memory-limit")
    args = parser.parse_args()
    json.dump(run(args.warehouse, args.memory_limit), sys.stdout)
    print()


if __name__ == "__main__":
    main()
