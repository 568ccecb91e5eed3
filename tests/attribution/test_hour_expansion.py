"""Runs are expanded to hourly rows to meet the hourly lines on (resource, hour). A line ending
9999-12-31 and runs without a real end (RUNNING, or an end in 9999) must expand to at most the
month's hours: the month completes in seconds under a small `memory_limit`, and its figures
are the oracle's."""

from __future__ import annotations

import resource
import time
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from cost_pipeline.attribution import build_attribution
from cost_pipeline.config import parse_config
from cost_pipeline.warehouse import month_params, replace_month, sql_text
from tests.attribution.test_oracle import M, T, line, run
from tests.support import oracle
from tests.support.sql_backend import table_rows
from tests.support.warehouse_rows import (
    BILLING_DEFAULTS,
    RUN_DEFAULTS,
    insert_lines,
    insert_runs,
)

FOREVER = datetime(9999, 12, 31)
MEMORY_LIMIT = "256MB"


def _scenario():
    lines = [line(rid=f"i-{i}", s=T(5, h), e=T(5, h + 1), cost=8.0) for i in range(1, 5)
             for h in range(10, 14)]
    # a line whose charge period never ends (a bad export row), on an instance runs list
    lines.append(line(rid="i-1", s=T(1), e=FOREVER, cost=5.0, uh=None, comp="other", g=0))
    runs = [run(f"done-{i}", start=T(5, 10), end=FOREVER, res=(f"i-{i}",)) for i in range(1, 5)]
    runs += [run(f"live-{i}", start=T(5, 11, 30), end=None, res=(f"i-{i}",), gpus=4,
                 status="RUNNING") for i in range(1, 5)]
    runs.append(run("before", start=datetime(1970, 1, 1), end=FOREVER, res=("i-2",)))
    return lines, runs


def test_runs_and_lines_without_end_expand_to_the_month_only():
    lines, runs = _scenario()
    con = duckdb.connect(config={"memory_limit": MEMORY_LIMIT, "threads": 2})
    insert_lines(con, M, [{**BILLING_DEFAULTS, **ln} for ln in lines])
    insert_runs(con, M, [{**RUN_DEFAULTS, **r} for r in runs])
    params = month_params(parse_config({}, Path(".")), M)
    started = time.monotonic()
    build_attribution(con, M, params)
    replace_month(con, "reconciliation", M, sql_text("reconciliation"), params)
    took = time.monotonic() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert took < 30, took
    assert peak_mb < 2048, peak_mb

    got = {(r["x_SourceLine"], r["run_id"] or r["purpose_class"]): r["cost"]
           for r in table_rows(con, "attribution")}
    want = {(r["x_SourceLine"], r["run_id"] or r["purpose_class"]): r["cost"]
            for r in oracle.attribute(lines, runs, [], {}, M)}
    assert got.keys() == want.keys()
    for key, cost in want.items():
        assert got[key] == pytest.approx(cost, abs=1e-9), key
    assert sum(got.values()) == pytest.approx(sum(ln["EffectiveCost"] for ln in lines))
