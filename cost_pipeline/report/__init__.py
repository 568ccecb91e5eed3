"""The monthly report: the warehouse's figures for one month as one self-contained HTML page
a finance director reads in two minutes (data.py → charts.py → render.py)."""

from .data import ReportError
from .render import report_path, write_report

__all__ = ["ReportError", "report_path", "write_report"]
