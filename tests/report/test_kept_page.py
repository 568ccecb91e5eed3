"""The monthly report keeps its page — neither drawn nor written again, its metadata the same —
when what the page shows is as when it was written (defs/assets/report.py `page_inputs`), the
page still in place; after any change it shows, it is drawn again as `--force` draws it."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import duckdb
import pytest

from cost_pipeline.cli.materialize import materialize_month
from cost_pipeline.config import load_config
from cost_pipeline.defs.assets.report import page_inputs
from cost_pipeline.report import report_path
from cost_pipeline.warehouse import ensure_schema, note_input, register_datasets
from tests.cli.test_cli import copy_demo
from tests.cli.test_incremental import _materialized
from tests.decisions.test_kept_decisions import edit_runs

JULY = date(2026, 7, 1)


@pytest.fixture
def demo(demo_quarter, tmp_path, dagster_home) -> tuple[Path, dict]:
    """A copy of the demo quarter with July materialized once, and its report's metadata."""
    config = copy_demo(demo_quarter, tmp_path)
    first = materialize_month(str(config), JULY, progress=False)
    assert first.success
    return config, _materialized(first.run_id)["monthly_report"]


def page_of(config: Path) -> Path:
    return report_path(load_config(config).warehouse_path, JULY)


def rerun(config: Path, force: bool = False) -> dict:
    result = materialize_month(str(config), JULY, progress=False, force=force)
    assert result.success and result.run_id, result.error
    return _materialized(result.run_id)["monthly_report"]


def without_time(html: str) -> str:
    return re.sub(r"generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "generated …", html)


def test_the_same_runs_again_keep_the_page_and_its_metadata(demo):
    config, first = demo
    page = page_of(config)
    before, written = page.read_bytes(), page.stat().st_mtime_ns
    edit_runs(config, lambda rows: None)  # the same runs, delivered again
    meta = rerun(config)
    assert meta.pop("kept") is True and first.pop("kept") is False
    assert meta == first  # the chart, the bill as lines, the totals: as written
    assert page.read_bytes() == before and page.stat().st_mtime_ns == written


def test_a_page_not_as_written_is_drawn_again(demo):
    """Edited in place (the same size, other bytes), deleted, or its row from before the
    pages' hashes: each time the page is drawn again as it was; then it is kept."""
    config, first = demo
    page = page_of(config)
    before = page.read_text(encoding="utf-8")

    def edit_in_place() -> None:
        edited = before.replace("<title>", "<title>X", 1)[:-1]  # one byte in, one byte out
        assert len(edited.encode()) == len(before.encode()) and edited != before
        page.write_text(edited, encoding="utf-8")

    def forget_hashes() -> None:
        with duckdb.connect(str(load_config(config).warehouse_path)) as con:
            con.execute("UPDATE report_pages SET html_sha256 = NULL")

    for damage in (edit_in_place, page.unlink, forget_hashes):
        damage()
        edit_runs(config, lambda rows: None)
        meta = rerun(config)
        assert meta["kept"] is False, damage
        assert meta["html_bytes"] == first["html_bytes"]
        assert without_time(page.read_text(encoding="utf-8")) == without_time(before)
    edit_runs(config, lambda rows: None)
    assert rerun(config)["kept"] is True


def test_an_older_report_pages_table_gets_the_hash_column(tmp_path):
    with duckdb.connect(str(tmp_path / "w.duckdb")) as con:
        con.execute("CREATE TABLE report_pages (month DATE NOT NULL, inputs VARCHAR NOT NULL, "
                    "path VARCHAR NOT NULL, html_bytes BIGINT NOT NULL, "
                    "metadata VARCHAR NOT NULL)")
        con.execute("INSERT INTO report_pages VALUES (?, 'i', 'p', 1, '{}')", [JULY])
        ensure_schema(con)
        assert con.execute("SELECT inputs, html_sha256 FROM report_pages").fetchall() == [
            ("i", None)]


def test_a_changed_metric_draws_the_page_again_as_force_does(demo):
    config, _ = demo
    page = page_of(config)
    before = page.read_text(encoding="utf-8")

    def better(rows):  # a July search trial's metric: the searches' improvement moves
        trial = next(r for r in rows if r["search_id"] and r["metric_value"]
                     and r["start_time"].startswith("2026-07"))
        trial["metric_value"] = str(float(trial["metric_value"]) + 0.25)

    edit_runs(config, better)
    assert rerun(config)["kept"] is False
    after = page.read_text(encoding="utf-8")
    assert without_time(after) != without_time(before)
    assert rerun(config, force=True)["kept"] is False
    assert without_time(page.read_text(encoding="utf-8")) == without_time(after)


def test_what_the_page_inputs_cover(tmp_path):
    """An earlier month's input, a strip month's reconciliation, the path: each moves the
    inputs; a reconciliation older than the strip does not."""
    with duckdb.connect(str(tmp_path / "w.duckdb")) as con:
        ensure_schema(con)
        register_datasets(con, [])
        path = tmp_path / "reports" / "cost-report-2026-07.html"
        base = page_inputs(con, JULY, path)
        assert page_inputs(con, JULY, path) == base
        assert page_inputs(con, JULY, tmp_path / "elsewhere.html") != base
        con.execute("INSERT INTO decision_basis VALUES (?, 'reconciliation', 'x', 1)",
                    [date(2026, 1, 1)])  # seven months back: not in the strip
        assert page_inputs(con, JULY, path) == base
        con.execute("INSERT INTO decision_basis VALUES (?, 'reconciliation', 'x', 1)",
                    [date(2026, 2, 1)])  # the strip's first month
        strip = page_inputs(con, JULY, path)
        assert strip != base
        note_input(con, date(2026, 6, 1), "billing", "t1")
        assert page_inputs(con, JULY, path) != strip
        con.execute("INSERT INTO decision_basis VALUES (?, 'search_costs', 'y', 3)", [JULY])
        shown = page_inputs(con, JULY, path)
        con.execute("INSERT INTO decision_basis VALUES (?, 'showback', 'z', 2)", [JULY])
        assert page_inputs(con, JULY, path) == shown  # a table the page does not show
