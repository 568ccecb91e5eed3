"""The resources to chase (assets/queries/top_untracked.sql): the same list, in the same
order, as summing every resource's untracked rows and taking the largest, whatever the rows."""

from __future__ import annotations

from datetime import date, timedelta

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cost_pipeline.report.data import top_untracked
from cost_pipeline.warehouse import ensure_schema

MONTH = date(2026, 7, 1)
ROWS = st.lists(st.tuples(
    st.sampled_from(["i-1", "i-2", "i-3", "vol-1", "bucket-a", None]),
    st.integers(0, 3),                                    # day of the month
    st.sampled_from(["gpu", "cpu", "storage", "network"]),
    st.sampled_from(["no_run", "idle_capacity", "shared"]),
    st.one_of(st.none(), st.integers(0, 4)),              # hours (integral: sums are exact)
    st.one_of(st.none(), st.integers(0, 32)),             # accelerator-hours
    st.integers(0, 6),                                    # cost: ties are common
), max_size=30)


def _expected(rows, component, top):
    groups: dict = {}
    for rid, day, comp, kind, hours, acc, cost in rows:
        if component is not None and comp != component:
            continue
        g = groups.setdefault(rid, {"kinds": set(), "components": set(), "days": set(),
                                    "gpu_hours": None, "hours": None, "cost": 0.0})
        g["kinds"].add(kind)
        g["components"].add(comp)
        g["days"].add(day)
        if acc is not None:
            g["gpu_hours"] = (g["gpu_hours"] or 0.0) + acc
        if hours is not None:
            g["hours"] = (g["hours"] or 0.0) + hours
        g["cost"] += cost
    ranked = sorted(groups.items(), key=lambda kv: (
        -kv[1]["cost"], kv[1]["gpu_hours"] is None, -(kv[1]["gpu_hours"] or 0),
        kv[0] is None, kv[0] or ""))
    return [(rid, ", ".join(sorted(g["kinds"])), ", ".join(sorted(g["components"])),
             len(g["days"]), g["gpu_hours"], g["hours"], g["cost"], "p4d.24xlarge"
             if rid == "i-1" else None) for rid, g in ranked[:top]]


@pytest.fixture(scope="module")
def con():
    with duckdb.connect(":memory:") as con:
        ensure_schema(con)
        con.execute("INSERT INTO billing_facts (month, ResourceId, x_InstanceType) "
                    "VALUES (?, 'i-1', 'p4d.24xlarge')", [MONTH])
        yield con


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=ROWS, component=st.sampled_from([None, "gpu", "storage"]), top=st.integers(1, 7))
def test_the_largest_untracked_resources_with_their_lists(con, rows, component, top):
    con.execute("DELETE FROM untracked_usage")
    con.executemany(
        "INSERT INTO untracked_usage VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [(MONTH, rid, MONTH + timedelta(days=day), comp, kind, hours, acc, cost)
         for rid, day, comp, kind, hours, acc, cost in rows]
        # another month's rows are not this month's
        + [(date(2026, 6, 1), "i-2", date(2026, 6, 1), "gpu", "no_run", 1, 8, 99)])
    got = [(r["resource_id"], r["kinds"], r["components"], r["days"], r["gpu_hours"],
            r["hours"], r["cost"], r["instance_type"])
           for r in top_untracked(con, MONTH, component, top)]
    assert got == _expected(rows, component, top)
