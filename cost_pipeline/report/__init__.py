"""The monthly report: the warehouse's figures for one month as one self-contained HTML page
a finance director reads in two minutes (data.py → charts.py → render.py)."""

from cost_pipeline.report.data import ReportError
from cost_pipeline.report.render import report_path, write_report

__all__ = ["ReportError", "report_path", "write_report"]
