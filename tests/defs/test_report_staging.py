"""The monthly report writes its page beside its place (`.cost-report-YYYY-MM.html.pending`)
and moves it there once the run's writes commit. A step failing after the page is staged
leaves neither the staged file nor a changed page behind."""

from __future__ import annotations

from datetime import date

import pytest

from cost_pipeline.cli.materialize import materialize_month
from cost_pipeline.config import load_config
from cost_pipeline.defs.assets import report as report_asset
from cost_pipeline.report import charts, report_path
from tests.cli.test_cli import copy_demo

JULY = date(2026, 7, 1)


def _fails(*_args, **_kwargs):
    raise OSError(28, "No space left on device")


@pytest.mark.parametrize(("module", "name"), [(report_asset, "store_page"),
                                              (charts, "png_data_uri")])
def test_a_report_step_failing_after_staging_its_page_leaves_no_staged_file(
        demo_quarter, tmp_path, dagster_home, monkeypatch, module, name):
    """The page's row stored, or its chart drawn, failing after the page was staged left
    `reports/.cost-report-2026-07.html.pending` behind (the move on commit was not yet
    registered): the staged file is removed, the published page is as it was."""
    config = copy_demo(demo_quarter, tmp_path)
    assert materialize_month(str(config), JULY, progress=False).success
    page = report_path(load_config(config).warehouse_path, JULY)
    published, files = page.read_bytes(), sorted(p.name for p in page.parent.iterdir())
    assert ".cost-report-2026-07.html.pending" not in files
    monkeypatch.setattr(module, name, _fails)
    failed = materialize_month(str(config), JULY, progress=False, force=True)
    assert not failed.success
    assert "No space left on device" in (failed.error_detail or failed.error or "")
    assert sorted(p.name for p in page.parent.iterdir()) == files
    assert page.read_bytes() == published
