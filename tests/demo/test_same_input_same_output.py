"""Same input, same output (issue 16.5): the demo's month materialized twice through the real
Dagster job, into two fresh warehouses, gives identical tables — every table, every column,
the rows sorted — and the same report page. Only what records the run itself (its id, when
it ran) may differ."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import duckdb

from cost_pipeline.cli.materialize import materialize_month
from cost_pipeline.config import load_config
from cost_pipeline.demo.generate import generate_demo
from cost_pipeline.months import parse_month

MONTH = parse_month("2026-09")  # the demo's savings-plan month: the most line item types
# the columns that record the materialization itself, not the data: when, by which run (the
# page's hash covers its "generated" minute)
RUN_RECORD = {"materializations": {"materialized_at", "run_id"},
              "billing_deliveries": {"first_seen", "last_seen"},
              "report_pages": {"html_sha256"}}


def tables(warehouse: str) -> dict[str, list[str]]:
    """{table: its rows as exact reprs (floats to the last bit), sorted}."""
    out = {}
    with duckdb.connect(warehouse, read_only=True) as con:
        names = [t for (t,) in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
            "AND table_type IN ('BASE TABLE', 'VIEW') ORDER BY 1").fetchall()]  # views: attribution
        for name in names:
            columns = [c for (c,) in con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                "ORDER BY ordinal_position", [name]).fetchall()]
            kept = [c for c in columns if c not in RUN_RECORD.get(name, set())]
            rows = con.execute(f'SELECT {", ".join(f"{chr(34)}{c}{chr(34)}" for c in kept)} '
                               f'FROM "{name}"').fetchall()
            out[name] = sorted(repr(row) for row in rows)
    return out


def test_the_same_month_twice_gives_identical_tables(tmp_path, dagster_home):
    config = generate_demo(tmp_path / "demo")  # one folder: the same input paths both times
    warehouse = Path(load_config(config).warehouse_path)
    warehouses, pages = [], []
    for _ in range(2):
        for stale in [warehouse, warehouse.with_name(warehouse.name + ".wal"),
                      warehouse.parent / "reports"]:  # a fresh warehouse each time
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink(missing_ok=True)
        result = materialize_month(str(config), MONTH, progress=False)
        assert result.success, result.error
        for check in result.checks:  # the UI's figures: rounded (cents, 4 digits)
            for key, value in check.metadata.items():
                assert not isinstance(value, float) or round(value, 4) == value, (key, value)
        warehouses.append(tables(str(warehouse)))
        page = next((warehouse.parent / "reports").glob("cost-report-*.html"))
        pages.append(re.sub(r"generated [^<·]*", "", page.read_text(encoding="utf-8")))
    first, second = warehouses
    assert sorted(first) == sorted(second)
    assert first["billing_facts"] and first["attribution"] and first["cost_levers"]
    for name in first:
        assert first[name] == second[name], f"table {name} differs between the two runs"
    assert pages[0] == pages[1]
