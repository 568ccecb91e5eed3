"""The ingest step refuses a checkpoint listing emptied where the month holds its objects
(`checkpoints.py` `_refuse_emptied_listings`), and `materialize --force` takes it."""

from __future__ import annotations

from datetime import date

import duckdb

from cost_pipeline.cli.materialize import materialize_month
from cost_pipeline.config import load_config
from tests.cli.test_cli import copy_demo

SEPTEMBER = date(2026, 9, 1)


def _held(config) -> tuple[int, int]:
    """September's (checkpoint_inventory, retention_violations) rows."""
    with duckdb.connect(str(load_config(config).warehouse_path), read_only=True) as con:
        return con.execute(
            "SELECT (SELECT count(*) FROM checkpoint_inventory WHERE month = $m), "
            "(SELECT count(*) FROM retention_violations WHERE month = $m)",
            {"m": SEPTEMBER}).fetchone()


def test_an_emptied_listing_fails_the_month_unless_forced(demo_quarter, tmp_path,
                                                          dagster_home):
    config = copy_demo(demo_quarter, tmp_path)
    assert materialize_month(str(config), SEPTEMBER, progress=False).success
    listed = (config.parent / "inventory.csv").read_text(encoding="utf-8").splitlines()
    held = _held(config)
    assert held[0] == len(listed) - 1 and held[1] > 0  # every object listed is September's
    (config.parent / "inventory.csv").write_text(listed[0] + "\n", encoding="utf-8")
    refused = materialize_month(str(config), SEPTEMBER, progress=False)
    assert not refused.success
    assert refused.error == (
        f"checkpoints[0] inventory: 2026-09: the listing holds no object of the month, where "
        f"the warehouse holds {held[0]:,} of the month's from it: its file or bucket emptied, "
        "or a path moved? The month keeps its listing; `materialize --force` empties it")
    assert _held(config) == held
    assert materialize_month(str(config), SEPTEMBER, progress=False, force=True).success
    assert _held(config) == (0, 0)
