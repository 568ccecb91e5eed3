"""The monthly report: the warehouse's figures for one month as one self-contained HTML page
a finance director reads in two minutes (data.py → charts.py → render.py)."""

from datetime import date
from pathlib import Path
from typing import Any

__all__ = ["ReportError", "report_path", "write_report"]


def report_path(warehouse: str | Path, month: date) -> Path:
    """`<warehouse folder>/reports/cost-report-YYYY-MM.html` (here: naming it imports neither
    jinja2 nor matplotlib, and the report asset that keeps its page needs no more)."""
    return Path(warehouse).resolve().parent / "reports" / f"cost-report-{month:%Y-%m}.html"


def __getattr__(name: str) -> Any:
    # lazy: `report.money` (the CLI's estimate, alerts) needs neither jinja2 nor matplotlib
    if name == "ReportError":
        from cost_pipeline.report.data import ReportError

        return ReportError
    if name == "write_report":
        from cost_pipeline.report.render import write_report

        return write_report
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
