"""`cost-pipeline demo`: write the demo quarter, materialize its three months through Dagster,
and print the bill as lines from the warehouse."""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb

from cost_pipeline.cli.materialize import dagster_home, materialize_month, must_be_folder
from cost_pipeline.config import load_config
from cost_pipeline.demo.generate import generate_demo
from cost_pipeline.demo.quarter import MONTHS
from cost_pipeline.interrupts import EXIT_INTERRUPTED
from cost_pipeline.months import parse_month
from cost_pipeline.report import write_report
from cost_pipeline.report.bill_lines import (
    bill_currency,
    bill_lines,
    reconciliation_notes,
    render,
)
from cost_pipeline.report.data import LEVERS_OVERLAP
from cost_pipeline.report.period import lever_summary, write_period_report

DEMO_MONTHS = [parse_month(m) for m in MONTHS]


def run_demo(out_dir: Path, strict: bool = False) -> int:
    out_dir = out_dir.resolve()
    # both folders, before anything is written (a file there: `[Errno 17] File exists`)
    problem = must_be_folder(out_dir, "--out")
    if problem:
        raise ValueError(problem)
    dagster_home()
    print(f"writing the demo quarter to {out_dir}", file=sys.stderr)
    config_path = generate_demo(out_dir)
    return materialize_and_print(config_path, strict)


def materialize_and_print(config_path: Path, strict: bool = False) -> int:
    """Materialize the demo quarter named by `config_path` and print the bill as lines
    (also `make demo-services`, whose config reads the same files through servers)."""
    failed_checks = 0
    for month in DEMO_MONTHS:
        print(f"materializing {month:%Y-%m}", file=sys.stderr)
        result = materialize_month(str(config_path), month)
        if not result.success:
            print(f"error: {month:%Y-%m}: {result.error}", file=sys.stderr)
            return EXIT_INTERRUPTED if result.interrupted else 1
        failed_checks += len(result.failed_error_checks)
    warehouse = load_config(config_path).warehouse_path
    first, last = DEMO_MONTHS[0], DEMO_MONTHS[-1]
    # the quarter's report first: the page the demo exists to show (SPEC §12)
    quarter, period = write_period_report(warehouse, first, last)
    print(quarter)
    print(f"levers over the quarter {first:%Y-%m} … {last:%Y-%m}, ranked:")
    print("\n".join(f"  {line}" for line in lever_summary(period)))
    print(f"{LEVERS_OVERLAP}\n")  # once after the list: a run can be in several levers
    with duckdb.connect(warehouse, read_only=True) as con:
        text = render(bill_lines(con, first, last), reconciliation_notes(con, first, last),
                      f"The bill as lines, {first:%Y-%m} … {last:%Y-%m}",
                      bill_currency(con, first, last))
    print(text)
    print(f"\nwarehouse: {warehouse}\nconfig:    {config_path}")
    # the failing month first: the report a reader of the demo should open
    reports = [write_report(warehouse, month) for month in DEMO_MONTHS]
    reports.sort(key=lambda r: (r[1]["reconciliation"] or {}).get("status") != "fail")
    for label, (path, data) in zip(["reports:", *[""] * len(reports)], reports, strict=False):
        failed = (data["reconciliation"] or {}).get("status") == "fail"
        print(f"{label:<10} {path}{'  (reconciliation failed)' if failed else ''}")
    return 2 if strict and failed_checks else 0

