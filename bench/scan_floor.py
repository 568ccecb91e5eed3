"""The scan floor: one DuckDB pass over the month's inputs reading exactly the columns the
attribution needs and summing them — no join, no write. Nothing that reads the same files
can be faster than this on the machine; the distance to it is the headroom.

    python bench/scan_floor.py DATA_DIR      # prints {"sums": {...}} as JSON
"""

from __future__ import annotations

import time
from pathlib import Path

import duckdb
import impl_cli
from reference import inventory_reader, month_inputs

CUR_SCAN = """
SELECT count(*) AS cur_lines,
    sum(coalesce(line_item_net_unblended_cost, line_item_unblended_cost))
    + sum(line_item_usage_amount)
    + sum(epoch(line_item_usage_end_date) - epoch(line_item_usage_start_date))
    + sum(length(line_item_resource_id)) + sum(length(line_item_line_item_type))
    + sum(length(line_item_usage_type)) + sum(length(line_item_product_code))
    + sum(length(product_instance_type)) + sum(length(product_product_family)) AS cur_sum
FROM read_parquet($cur_files)
"""
SCAN_SQL = f"""
SELECT * FROM
    ({CUR_SCAN}),
    (SELECT count(*) AS runs,
        sum(epoch(end_time) - epoch(start_time)) + sum(len(resource_ids))
        + sum(coalesce(gpus, 0)) + sum(length(run_id)) + sum(length(purpose)) AS runs_sum
     FROM read_parquet($runs_file)),
    (SELECT count(*) AS objects, sum(size) + sum(length(key)) + sum(epoch(written))
        AS inventory_sum
     FROM {{inventory}})
"""


def run(data: Path) -> dict:
    inputs = month_inputs(data)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    t0 = time.perf_counter()
    cursor = con.execute(SCAN_SQL.replace("{inventory}", inventory_reader(inputs)),
                         {k: inputs[k] for k in ("cur_files", "runs_file", "inventory_files")})
    names = [d[0] for d in cursor.description]
    row = cursor.fetchone()
    seconds = time.perf_counter() - t0
    # the CUR part alone, for comparison: at 100k runs and 1M objects the inventory CSV is
    # most of the floor until the bill reaches tens of millions of lines
    t0 = time.perf_counter()
    con.execute(CUR_SCAN, {"cur_files": inputs["cur_files"]}).fetchone()
    return {"sums": {n: float(v or 0) for n, v in zip(names, row, strict=True)},
            "query_seconds": round(seconds, 3),
            "cur_query_seconds": round(time.perf_counter() - t0, 3)}


if __name__ == "__main__":
    impl_cli.main(run, __doc__)
