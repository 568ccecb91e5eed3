"""EKS split cost allocation data (SPEC §3 `aws_cur2`): a pod's split row is a line of its own
costing its amortized split cost, taken out of its parent instance's hour; the instance keeps
its unused capacity as `idle_capacity`, and the month's totals do not move.

The rows follow AWS's "Example of split cost allocation data" (Data Exports user guide): the
node's amortized hour is divided with the 9:1 vCPU:GB weights, one vCPU row and one memory
row per pod and hour (`USE1-EKS-EC2-vCPU-Hours` / `-GB-Hours`, operation `EKSPod-EC2`,
resource = the pod's ARN, `split_line_item_parent_resource_id` = the node), each with its
split usage and ratio, split cost and the unused cost AWS spreads over the pods. Here a
g5.12xlarge node (48 vCPU, 192 GB) at $6.24 an hour: $6.24 / (9 × 48 + 192) = $0.01 per
weight unit, so $0.09 per vCPU-hour and $0.01 per GB-hour.
  pod A (24 vCPU, 96 GB): split 2.16 + 0.96 = 3.12, unused 0.72 + 0.32
  pod B (12 vCPU, 48 GB): split 1.08 + 0.48 = 1.56, unused 0.36 + 0.16
  unallocated node capacity (12 vCPU, 48 GB): 1.08 + 0.48 = 1.56 = the pods' unused costs
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

import duckdb
import pyarrow as pa
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cost_pipeline.attribution import build_attribution
from cost_pipeline.warehouse import month_params
from tests.support.cur_rows import SPLIT_COLUMNS, T0, build, config, facts, line, write_export
from tests.support.warehouse_rows import RUN_DEFAULTS, insert_runs

JULY = date(2026, 7, 1)
CENT = 0.005
HOUR = T0 + timedelta(days=13, hours=10)  # 2026-07-14 10:00 UTC
NODE = "i-0a1b2c3d4e5f60718"
CLUSTER = "arn:aws:eks:us-east-1:111122223333:pod/ml-platform/training"
POD_A = f"{CLUSTER}/sft-worker-0/5f0d8a3c-1e2b-4c6d-9f7a-0b1c2d3e4f50"
POD_B = f"{CLUSTER}/eval-worker-0/9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"


def node_hour(name: str, cost: float = 6.24, start: datetime = HOUR, **cols) -> dict:
    cols = {"line_item_usage_type": "USE1-BoxUsage:g5.12xlarge", **cols}
    return line(cost, start=start, identity_line_item_id=name, line_item_resource_id=NODE,
                product_instance_type="g5.12xlarge", **cols)


def pod_row(name: str, pod: str, resource: str, usage: float, ratio: float, split: float,
            unused: float, net_split: float | None = None, start: datetime = HOUR,
            parent: str = NODE) -> dict:
    """One split row as AWS writes it: `resource` is 'vCPU' or 'GB'. The row's own
    line_item cost is 0; its cost lives in the split columns."""
    return line(
        0.0, start=start, identity_line_item_id=name, line_item_product_code="AmazonEKS",
        line_item_usage_type=f"USE1-EKS-EC2-{resource}-Hours", line_item_operation="EKSPod-EC2",
        line_item_resource_id=pod, line_item_usage_amount=usage,
        pricing_unit=f"{resource}-Hours", product_servicecode="AmazonEKS",
        product={"product_name": "Amazon Elastic Kubernetes Service"},
        product_product_family=None,
        resource_tags={"aws_eks_cluster_name": "ml-platform", "aws_eks_namespace": "training"},
        split_line_item_parent_resource_id=parent, split_line_item_split_usage=usage,
        split_line_item_reserved_usage=usage, split_line_item_actual_usage=usage * 0.8,
        split_line_item_split_usage_ratio=ratio, split_line_item_split_cost=split,
        split_line_item_unused_cost=unused, split_line_item_net_split_cost=net_split,
        split_line_item_public_on_demand_split_cost=split,
        split_line_item_public_on_demand_unused_cost=unused,
    )


def two_pods(start: datetime = HOUR, net: dict | None = None) -> list[dict]:
    net = net or {}
    tag = start.strftime("%H")
    return [
        pod_row(f"a_cpu{tag}", POD_A, "vCPU", 24, 0.5, 2.16, 0.72, net.get("a_cpu"), start),
        pod_row(f"a_mem{tag}", POD_A, "GB", 96, 0.5, 0.96, 0.32, net.get("a_mem"), start),
        pod_row(f"b_cpu{tag}", POD_B, "vCPU", 12, 0.25, 1.08, 0.36, net.get("b_cpu"), start),
        pod_row(f"b_mem{tag}", POD_B, "GB", 48, 0.25, 0.48, 0.16, net.get("b_mem"), start),
    ]


def attribute(con: duckdb.DuckDBPyConnection, cfg, runs: list[dict]) -> dict:
    """Run the month's attribution over the billing_facts built from the export; the cost per
    run id or untracked kind."""
    insert_runs(con, JULY, [{**RUN_DEFAULTS, **r} for r in runs])
    build_attribution(con, JULY, month_params(cfg, JULY))
    return dict(con.execute(
        "SELECT coalesce(run_id, kind), sum(cost) FROM attribution WHERE month = ? GROUP BY 1",
        [JULY]).fetchall())


@pytest.fixture
def con():
    connection = duckdb.connect()
    yield connection
    connection.close()


def test_node_hour_with_two_pods_through_the_runner(tmp_path, dagster_home):
    """The documented shape end to end: each pod's split cost goes to the run listing it, the
    node's remainder is idle capacity, and the month keeps its total to the cent."""
    from cost_pipeline.cli.materialize import materialize_month

    # the pods' hour, and the node's next hour without pods (a plain unclaimed instance)
    rows = [node_hour("node10"), *two_pods(), node_hour("node11", start=HOUR + timedelta(hours=1))]
    export = write_export(tmp_path, {"part-00001.snappy.parquet": rows}, extra=SPLIT_COLUMNS)
    (tmp_path / "runs.csv").write_text(
        "run_id,status,start_time,end_time,resource_ids,gpus,purpose\n"
        # 2 of the node's 4 GPUs: the pod's split cost is already its share, not halved again
        f"ft-a,FINISHED,2026-07-14T09:30:00Z,2026-07-14T12:00:00Z,{POD_A},2,production\n"
        f"ev-b,FINISHED,2026-07-14T10:00:00Z,2026-07-14T11:00:00Z,{POD_B},,eval\n",
        encoding="utf-8")
    doc = {"warehouse": {"path": "warehouse.duckdb"},
           "billing": [{"kind": "aws_cur2", "path": str(export)}],
           "tracker": [{"kind": "runs_file", "path": "runs.csv"}]}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")

    result = materialize_month(str(tmp_path / "config.yaml"), JULY, progress=False)
    assert result.success, result.error
    assert {c.name: c.passed for c in result.checks}["cost_conserved"]
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as wh:
        by_owner = dict(wh.execute(
            "SELECT coalesce(run_id, kind), sum(cost) FROM attribution WHERE month = ? "
            "GROUP BY 1", [JULY]).fetchall())
        effective, billed = wh.execute(
            "SELECT sum(EffectiveCost), sum(BilledCost) FROM billing_facts WHERE month = ?",
            [JULY]).fetchone()
        billed_gpu_hours, total = wh.execute(
            "SELECT billed_gpu_hours, total_effective_cost FROM reconciliation "
            "WHERE month = ?", [JULY]).fetchone()
    assert by_owner == {"ft-a": pytest.approx(3.12, abs=CENT),
                        "ev-b": pytest.approx(1.56, abs=CENT),
                        "idle_capacity": pytest.approx(1.56, abs=CENT),
                        "no_run": pytest.approx(6.24, abs=CENT)}
    # the split moved cost, it added none: two node-hours billed, before and after
    assert effective == pytest.approx(12.48, abs=1e-9) and billed == pytest.approx(12.48)
    assert total == pytest.approx(12.48, abs=1e-9)
    assert sum(by_owner.values()) == pytest.approx(total, abs=1e-9)
    # the node's 4 GPUs for its two hours, once: the pods carry no hours of their own
    assert billed_gpu_hours == pytest.approx(8.0)


def test_pod_rows_become_lines_and_the_parent_keeps_the_rest(tmp_path, con):
    export = write_export(tmp_path, {"p.parquet": [node_hour("node"), *two_pods()]},
                          extra=SPLIT_COLUMNS)
    build(con, config(tmp_path, export))
    rows = facts(con)
    pod_a_cpu, pod_b_mem, node = rows["a_cpu10"], rows["b_mem10"], rows["node"]
    assert (pod_a_cpu["ResourceId"], pod_a_cpu["EffectiveCost"]) == (POD_A, pytest.approx(2.16))
    assert pod_b_mem["EffectiveCost"] == pytest.approx(0.48)
    # on demand: what a pod bills is its split cost too
    assert pod_a_cpu["BilledCost"] == pytest.approx(2.16)
    for pod in (pod_a_cpu, pod_b_mem):
        # part of a GPU node's cost, but no hours and no G of their own
        assert pod["x_CostComponent"] == "gpu"
        assert pod["ServiceCategory"] == "AI and Machine Learning"
        assert (pod["x_AcceleratorCount"], pod["x_UsageHours"]) == (0, None)
        assert (pod["x_InstanceType"], pod["x_ResourceKind"]) == ("g5.12xlarge", "container")
        assert pod["ChargeCategory"] == "Usage" and not pod["x_SplitParent"]
    assert (node["EffectiveCost"], node["BilledCost"]) == (pytest.approx(1.56),) * 2
    assert (node["x_UsageHours"], node["x_AcceleratorCount"]) == (1.0, 4)
    assert node["x_SplitParent"] is True


def test_savings_plan_node_with_net_split_costs_conserves_both_totals(tmp_path, con):
    """A node hour covered by a savings plan, with a 10 % private-rate discount in the net
    columns: the SP effective cost $3.12 (net $2.808) is what AWS splits; the covered row and
    its negation cancel on the invoice, so the pods bill nothing and the month's BilledCost
    stays what it was."""
    sp = dict(savings_plan_savings_plan_a_r_n="arn:aws:savingsplans::999988887777:savingsplan/x")
    covered = node_hour("covered", 6.24, net=5.616,
                        line_item_line_item_type="SavingsPlanCoveredUsage",
                        savings_plan_savings_plan_effective_cost=3.12,
                        savings_plan_net_savings_plan_effective_cost=2.808, **sp)
    negation = node_hour("negation", -6.24, net=-5.616,
                         line_item_line_item_type="SavingsPlanNegation", **sp)
    # AWS's figures on an amortized $3.12 hour: half of the example's, net 10 % lower
    pods = [
        pod_row("a_cpu", POD_A, "vCPU", 24, 0.5, 1.08, 0.36, 0.972),
        pod_row("a_mem", POD_A, "GB", 96, 0.5, 0.48, 0.16, 0.432),
        pod_row("b_cpu", POD_B, "vCPU", 12, 0.25, 0.54, 0.18, 0.486),
        pod_row("b_mem", POD_B, "GB", 48, 0.25, 0.24, 0.08, 0.216),
    ]
    export = write_export(tmp_path, {"p.parquet": [covered, negation, *pods]},
                          extra=SPLIT_COLUMNS)
    cfg = config(tmp_path, export)
    summary = build(con, cfg)
    assert summary.total_effective_cost == pytest.approx(2.808, abs=1e-9)
    assert summary.total_billed_cost == pytest.approx(0.0, abs=1e-9)
    rows = facts(con)
    assert rows["a_cpu"]["EffectiveCost"] == pytest.approx(0.972)
    assert rows["covered"]["EffectiveCost"] == pytest.approx(2.808 - 2.106)
    assert rows["covered"]["BilledCost"] == pytest.approx(5.616 * 0.702 / 2.808)
    assert rows["negation"]["BilledCost"] == pytest.approx(-5.616 * 0.702 / 2.808)
    assert rows["negation"]["x_SplitParent"] and rows["negation"]["EffectiveCost"] == 0
    assert all(rows[p]["BilledCost"] == pytest.approx(0.0) for p in ("a_cpu", "b_mem"))

    by_owner = attribute(con, cfg, [
        {"run_id": "ft-a", "status": "FINISHED", "start_time": datetime(2026, 7, 14, 10),
         "end_time": datetime(2026, 7, 14, 11), "resource_ids": [POD_A]},
        # lists the node itself: it gets what the pods left, the unused capacity
        {"run_id": "ops", "status": "FINISHED", "start_time": datetime(2026, 7, 14, 10),
         "end_time": datetime(2026, 7, 14, 11), "resource_ids": [NODE]},
    ])
    assert by_owner == {"ft-a": pytest.approx(1.404), "ops": pytest.approx(0.702),
                        "no_run": pytest.approx(0.702)}  # pod B: no run lists it


def test_pods_on_a_node_hour_partly_covered_by_a_savings_plan_are_committed(tmp_path, con):
    """A node hour 0.75 covered by a savings plan (list $4.68, SP effective $3.00, with its
    negation) and 0.25 on demand ($1.56): the hour's amortized cost is $4.56, its invoice
    $1.56, its list price $6.24. Pod A (50 %) splits 1.58 + 0.70 = 2.28, pod B (25 %)
    0.79 + 0.35 = 1.14; the node keeps 1.14. The pods took the alphabetical greatest of the
    rows' pricing categories, `on_demand` over `committed`; a node hour any of whose usage a
    commitment covers is `committed` (spot first, then committed, then on demand). The money
    stays as it was."""
    sp = dict(savings_plan_savings_plan_a_r_n="arn:aws:savingsplans::1:savingsplan/sp-1")
    rows = [
        node_hour("covered", 4.68, line_item_line_item_type="SavingsPlanCoveredUsage",
                  line_item_usage_amount=0.75, savings_plan_savings_plan_effective_cost=3.00,
                  savings_plan_net_savings_plan_effective_cost=3.00,
                  pricing_public_on_demand_cost=4.68, **sp),
        node_hour("negation", -4.68, line_item_line_item_type="SavingsPlanNegation",
                  line_item_usage_amount=0.75, pricing_public_on_demand_cost=4.68, **sp),
        node_hour("od", 1.56, line_item_usage_amount=0.25, pricing_public_on_demand_cost=1.56),
        pod_row("a_cpu", POD_A, "vCPU", 24, 0.5, 1.58, 0.53),
        pod_row("a_mem", POD_A, "GB", 96, 0.5, 0.70, 0.23),
        pod_row("b_cpu", POD_B, "vCPU", 12, 0.25, 0.79, 0.26),
        pod_row("b_mem", POD_B, "GB", 48, 0.25, 0.35, 0.12),
    ]
    export = write_export(tmp_path, {"p.parquet": rows},
                          extra={**SPLIT_COLUMNS, "pricing_public_on_demand_cost": pa.float64()})
    cfg = config(tmp_path, export)
    build(con, cfg)
    got = facts(con)
    pods = {"a": ("a_cpu", "a_mem"), "b": ("b_cpu", "b_mem")}
    assert {got[k]["x_PricingCategory"] for names in pods.values() for k in names} == {
        "committed"}
    # the node's own rows keep theirs
    assert [got[k]["x_PricingCategory"] for k in ("covered", "negation", "od")] == [
        "committed", "committed", "on_demand"]

    def pod_total(column: str, pod: str) -> float:
        return sum(got[k][column] for k in pods[pod])

    # amortized: each pod its split cost; invoice and list: the hour's × its split ÷ 4.56
    assert got["a_cpu"]["EffectiveCost"] == pytest.approx(1.58)
    assert got["a_cpu"]["BilledCost"] == pytest.approx(1.56 * 1.58 / 4.56)
    assert (pod_total("EffectiveCost", "a"), pod_total("EffectiveCost", "b")) == (
        pytest.approx(2.28), pytest.approx(1.14))
    assert (pod_total("BilledCost", "a"), pod_total("BilledCost", "b")) == (
        pytest.approx(0.78), pytest.approx(0.39))
    assert (pod_total("ListCost", "a"), pod_total("ListCost", "b")) == (
        pytest.approx(3.12), pytest.approx(1.56))
    # the node keeps a quarter of each row: 3.00 × 0.25 + 1.56 × 0.25 = 1.14
    assert [got[k]["EffectiveCost"] for k in ("covered", "negation", "od")] == [
        pytest.approx(0.75), 0, pytest.approx(0.39)]
    assert [got[k]["BilledCost"] for k in ("covered", "negation", "od")] == [
        pytest.approx(1.17), pytest.approx(-1.17), pytest.approx(0.39)]
    by_owner = attribute(con, cfg, [
        {"run_id": "ft-a", "status": "FINISHED", "start_time": datetime(2026, 7, 14, 10),
         "end_time": datetime(2026, 7, 14, 11), "resource_ids": [POD_A]}])
    assert by_owner == {"ft-a": pytest.approx(2.28), "no_run": pytest.approx(1.14),
                        "idle_capacity": pytest.approx(1.14)}


@pytest.mark.parametrize(("hour", "pricing"), [
    ([{"line_item_usage_type": "USE1-SpotUsage:g5.12xlarge"}], "spot"),
    ([{}], "on_demand"),
    # half of the hour on a reservation, half on demand
    ([{"line_item_line_item_type": "DiscountedUsage", "line_item_usage_amount": 0.5,
       "reservation_reservation_a_r_n": "arn:aws:ec2:us-east-1:1:reserved-instances/r-1",
       "reservation_effective_cost": 2.0}, {"line_item_usage_amount": 0.5}], "committed"),
], ids=["spot node", "on-demand node", "reservation and on demand"])
def test_a_pod_takes_its_node_hours_pricing(tmp_path, con, hour, pricing):
    rows = [node_hour(f"node{i}", 3.12, **cols) for i, cols in enumerate(hour)]
    export = write_export(tmp_path, {"p.parquet": [*rows, *two_pods()]}, extra=SPLIT_COLUMNS)
    build(con, config(tmp_path, export))
    got = facts(con)
    assert {got[k]["x_PricingCategory"] for k in ("a_cpu10", "a_mem10", "b_cpu10", "b_mem10")} == {
        pricing}


def test_pods_never_take_more_than_their_parent_hour(tmp_path, con):
    """Conservation first: pods whose split costs exceed the node's hour share what the hour
    cost; pods whose node row is absent from the export (another payer's export, say) take
    nothing, for their cost is inside a row this bill does not hold."""
    later = HOUR + timedelta(hours=3)
    rows = [node_hour("cheap", 2.34), *two_pods(),  # the pods claim 4.68 of a $2.34 hour
            *two_pods(start=later)]                 # no node row at 13:00
    export = write_export(tmp_path, {"p.parquet": rows}, extra=SPLIT_COLUMNS)
    cfg = config(tmp_path, export)
    summary = build(con, cfg)
    assert summary.total_effective_cost == pytest.approx(2.34, abs=1e-9)
    assert summary.total_billed_cost == pytest.approx(2.34, abs=1e-9)
    got = facts(con)
    assert got["cheap"]["EffectiveCost"] == pytest.approx(0.0, abs=1e-12)
    # scaled by 2.34 / 4.68: each keeps its proportion
    assert got["a_cpu10"]["EffectiveCost"] == pytest.approx(1.08)
    assert got["b_mem10"]["EffectiveCost"] == pytest.approx(0.24)
    assert all(got[f"{p}13"]["EffectiveCost"] == 0 for p in ("a_cpu", "a_mem", "b_cpu", "b_mem"))


def test_an_export_without_split_columns_is_unchanged(tmp_path, con):
    export = write_export(tmp_path, {"p.parquet": [node_hour("node")]})
    build(con, config(tmp_path, export))
    node = facts(con)["node"]
    assert node["EffectiveCost"] == pytest.approx(6.24) and node["x_SplitParent"] is False
    by_owner = attribute(con, config(tmp_path, export), [])
    assert by_owner == {"no_run": pytest.approx(6.24)}


def test_empty_split_columns_take_the_single_pass(tmp_path):
    """An export selecting every column carries the split ones, empty, when the account has
    no split cost allocation data: the month is read in one pass (no `parent_rows` pass over
    the month), with the same lines as an export without the columns. One row naming a
    parent turns the split path on."""
    rows = [node_hour("node10"), node_hour("node11", start=HOUR + timedelta(hours=1),
                                           split_line_item_parent_resource_id="  ")]
    months = {}
    for name, extra in (("with", SPLIT_COLUMNS), ("without", None)):
        export = write_export(tmp_path / name, {"p.parquet": rows}, extra=extra)
        with duckdb.connect() as con:
            summary = build(con, config(tmp_path / name, export))
            assert [d.has_split_columns for d in summary.deliveries] == [False]
            months[name] = {k: {c: v for c, v in row.items() if c not in ("x_File",)}
                            for k, row in facts(con).items()}
    assert months["with"] == months["without"]

    split = write_export(tmp_path / "split", {"p.parquet": [*rows, *two_pods()]},
                         extra=SPLIT_COLUMNS)
    with duckdb.connect() as con:
        summary = build(con, config(tmp_path / "split", split))
        assert [d.has_split_columns for d in summary.deliveries] == [True]
        assert facts(con)["node10"]["x_SplitParent"] is True


# nodes × hours, each node hour: its row (absent / on demand / covered + negation) and pods
NODE_HOURS = st.lists(
    st.tuples(
        st.sampled_from(["none", "usage", "covered"]),
        st.floats(0.5, 20, allow_nan=False).map(lambda c: round(c, 4)),
        st.lists(st.tuples(st.floats(0, 30, allow_nan=False).map(lambda c: round(c, 4)),
                           st.booleans(), st.sampled_from(["", " "])),
                 max_size=4),
        st.booleans(),  # the node row delivered twice (an identical duplicate)
    ),
    min_size=1, max_size=6)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(node_hours=NODE_HOURS)
def test_the_split_moves_cost_and_adds_none(tmp_path_factory, node_hours):
    """Random node hours with pods: each node hour's pods take at most what the hour cost
    (all of their split cost when it fits, in proportion when it does not, nothing without
    the node's row), the node keeps the rest, and the month bills what the export bills
    without split data."""
    base = tmp_path_factory.mktemp("split")
    rows, expected = [], {}
    for k, (kind, cost, pods, twice) in enumerate(node_hours):
        node, start = f"i-node{k % 3}", HOUR + timedelta(hours=k // 3)
        if kind == "usage":
            rows.append(line(cost, start=start, identity_line_item_id=f"n{k}",
                             line_item_usage_type="USE1-BoxUsage:g5.12xlarge",
                             line_item_resource_id=node, product_instance_type="g5.12xlarge"))
        elif kind == "covered":
            for name, amount, kind_of_line in ((f"n{k}", cost, "SavingsPlanCoveredUsage"),
                                               (f"neg{k}", -cost, "SavingsPlanNegation")):
                rows.append(line(amount, start=start, identity_line_item_id=name,
                                 line_item_usage_type="USE1-BoxUsage:g5.12xlarge",
                                 line_item_resource_id=node, product_instance_type="g5.12xlarge",
                                 line_item_line_item_type=kind_of_line,
                                 savings_plan_savings_plan_effective_cost=cost))
        if twice and kind != "none":
            rows.append(dict(rows[-1]))
        for p, (split, net, pad) in enumerate(pods):
            rows.append(pod_row(f"p{k}_{p}", f"{CLUSTER}/pod-{k}-{p}", "vCPU", 1, 0.1, split,
                                0.0, round(split * 0.9, 4) if net else None, start,
                                parent=pad + node + pad))
        claimed = sum(round(s * 0.9, 4) if net else s for s, net, _ in pods)
        billed = 0.0 if kind == "none" else cost
        expected[f"n{k}"] = (billed, min(claimed, billed) if billed > 0 else 0.0)
    with_split = write_export(base / "with", {"p.parquet": rows}, extra=SPLIT_COLUMNS)
    without = write_export(base / "without", {"p.parquet": rows})
    totals = {}
    for name, export in (("with", with_split), ("without", without)):
        with duckdb.connect() as con:
            summary = build(con, config(base / name, export))
            totals[name] = (summary.total_effective_cost, summary.total_billed_cost)
            if name == "with":
                got = facts(con)
    assert totals["with"] == pytest.approx(totals["without"], abs=1e-9)
    for k, (kind, _cost, pods, _twice) in enumerate(node_hours):
        billed, moved = expected[f"n{k}"]
        pod_costs = sum(got[f"p{k}_{p}"]["EffectiveCost"] for p in range(len(pods)))
        assert pod_costs == pytest.approx(moved, abs=1e-9)
        if kind != "none":
            node = got[f"n{k}"]
            assert node["x_SplitParent"] is bool(pods)
            if kind == "usage":
                assert node["EffectiveCost"] == pytest.approx(billed - moved, abs=1e-9)
        assert all(got[f"p{k}_{p}"]["x_ResourceKind"] == "container" for p in range(len(pods)))
