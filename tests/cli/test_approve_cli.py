"""The approval round trip through the command line (SPEC §12): `estimate … --approve` records
the estimate in the warehouse; the next `materialize` shows it in search_costs (the recorded
approvals are an input of search_costs: an unchanged month is not skipped over them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import duckdb
import pytest

from cost_pipeline.config import load_config
from cost_pipeline.demo.generate import generate_demo

MONTH = "2026-09"


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DAGSTER_DISABLE_TELEMETRY": "1"}
    return subprocess.run([sys.executable, "-m", "cost_pipeline.cli", *args],
                          capture_output=True, text=True, timeout=300, env=env)


def search_costs(warehouse: str, search_id: str):
    with duckdb.connect(warehouse, read_only=True) as con:
        return con.execute("SELECT estimated_cost, cumulative_cost, overrun FROM search_costs "
                           "WHERE month = '2026-09-01' AND search_id = ?", [search_id]
                           ).fetchone()


def test_estimate_approve_then_materialize(tmp_path, dagster_home):
    config = str(generate_demo(tmp_path / "demo"))
    warehouse = load_config(config).warehouse_path
    done = cli("materialize", "--config", config, "--month", MONTH)
    assert done.returncode == 0, done.stderr
    estimate, cost, overrun = search_costs(warehouse, "s-2026-09a")
    assert estimate is None and overrun is None and cost > 0       # launched without approval

    approved = cli("estimate", "--config", config, "--model", "churn", "--configs", "12",
                   "--seeds", "3", "--approve", "--search-id", "s-2026-09a",
                   "--expected-improvement", "0.002", "--approved-by", "ana", "--json")
    assert approved.returncode == 0, approved.stderr
    out = json.loads(approved.stdout)
    recorded = out["approval"]
    assert recorded["search_id"] == "s-2026-09a" and recorded["approved"] is True
    assert recorded["estimated_cost"] == pytest.approx(out["total_cost"])
    assert recorded["approved_by"] == "ana" and recorded["expected_improvement"] == 0.002

    again = cli("materialize", "--config", config, "--month", MONTH)
    assert again.returncode == 0, again.stderr
    assert "search_costs: unchanged" not in again.stdout
    estimate, cost, overrun = search_costs(warehouse, "s-2026-09a")
    assert estimate == pytest.approx(out["total_cost"])
    assert overrun == pytest.approx(cost - estimate)


def test_over_budget_is_recorded_and_exits_3(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("warehouse: {path: warehouse.duckdb}\n"
                      "billing: [{kind: focus, path: focus/}]\n"
                      "tracker: [{kind: runs_file, path: runs.csv}]\n"
                      "policy: {search: {approval_budget: 1000.0}}\n")
    done = cli("estimate", "--config", str(config), "--model", "churn", "--configs", "10",
               "--seeds", "3", "--gpus", "4", "--hours", "12", "--price", "4.0",
               "--approve", "--search-id", "s-big")
    assert done.returncode == 3, done.stderr                  # 30 × 192 = 5,760 > 1,000
    assert "NOT approved (over budget)" in done.stdout
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        assert con.execute("SELECT search_id, runs, estimated_cost, approved "
                           "FROM search_approvals").fetchall() == [("s-big", 30, 5760.0, False)]


def test_approve_needs_a_search_id(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("warehouse: {path: warehouse.duckdb}\n"
                      "billing: [{kind: focus, path: focus/}]\n"
                      "tracker: [{kind: runs_file, path: runs.csv}]\n")
    done = cli("estimate", "--config", str(config), "--model", "churn", "--configs", "1",
               "--seeds", "1", "--gpus", "1", "--hours", "1", "--price", "1", "--approve")
    assert done.returncode == 1
    assert done.stderr.strip() == ("error: --approve needs --search-id S: the search the "
                                   "estimate is for")
    assert not (tmp_path / "warehouse.duckdb").exists()
