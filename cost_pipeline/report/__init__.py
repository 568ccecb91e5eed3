"""The monthly report: the warehouse's figures for one month as one self-contained HTML page
a finance director reads in two minutes (data.py → charts.py → render.py)."""

from typing import Any

__all__ = ["ReportError", "report_path", "write_report"]


def __getattr__(name: str) -> Any:
    # lazy: `report.money` (the CLI's estimate, alerts) needs neither jinja2 nor matplotlib
    if name == "ReportError":
        from cost_pipeline.report.data import ReportError

        return ReportError
    if name in ("report_path", "write_report"):
        from cost_pipeline.report import render

        return getattr(render, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
