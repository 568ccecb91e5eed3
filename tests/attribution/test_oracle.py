"""Hand-computed cases for the attribution / reconciliation oracle (tests/oracle.py)."""

from __future__ import annotations

import itertools
from datetime import date, datetime

import pytest

from tests.support.oracle import attribute, reconcile

M = date(2024, 3, 1)
_ids = itertools.count()


def T(day: int, hh: int = 0, mm: int = 0) -> datetime:
    return datetime(2024, 3, day, hh, mm)


H10, H11 = T(5, 10), T(5, 11)  # the default charge hour: 5 March 10:00-11:00


def line(rid="i-1", s=H10, e=H11, cost=8.0, comp="gpu", g=8, uh=1.0, **kw) -> dict:
    out = {
        "ChargePeriodStart": s, "ChargePeriodEnd": e, "ChargeCategory": "Usage",
        "ResourceId": rid, "EffectiveCost": cost, "x_CostComponent": comp,
        "x_AcceleratorCount": g, "x_UsageHours": uh, "x_ResourceKind": "instance",
        "CommitmentDiscountStatus": None, "Tags": None, "x_SourceLine": f"L{next(_ids)}",
    }
    return out | kw


def run(rid, start=H10, end=H11, res=("i-1",), gpus=None, **kw) -> dict:
    out = {
        "run_id": rid, "purpose": "production", "search_id": None, "status": "FINISHED",
        "start_time": start, "end_time": end, "resource_ids": list(res) if res else None,
        "gpus": gpus, "region": None, "dataset": None, "parent_run_id": None,
        "deleted": False, "keep": False, "model": "churn",
    }
    return out | kw


def attr(lines, runs, inventory=(), datasets=None, run_tag="run_id") -> dict:
    """Attribute, check conservation line by line, return {(line id, run or kind): row}."""
    rows = attribute(lines, runs, list(inventory), datasets or {}, M, run_tag)
    for ln in lines:
        mine = [r for r in rows if r["x_SourceLine"] == ln["x_SourceLine"]]
        assert sum(r["cost"] for r in mine) == pytest.approx(ln["EffectiveCost"], abs=1e-9)
    assert sum(r["cost"] for r in rows) == pytest.approx(sum(ln["EffectiveCost"] for ln in lines))
    return {(r["x_SourceLine"], r["run_id"] or r["kind"]): r for r in rows}


def sl(ln) -> str:
    return ln["x_SourceLine"]


def test_partial_hour_of_a_full_instance_hour():
    # instance ran the full hour (d = 1 h); r1 covers 10:00-10:20 → share 1/3 of $8.
    ln = line()
    out = attr([ln], [run("r1", end=T(5, 10, 20))])
    r1, idle = out[sl(ln), "r1"], out[sl(ln), "idle_capacity"]
    assert r1["share"] == pytest.approx(1 / 3) and r1["cost"] == pytest.approx(8 / 3)
    assert r1["hours"] == pytest.approx(1 / 3) and r1["accelerator_hours"] == pytest.approx(8 / 3)
    assert r1["purpose_class"] == "production" and r1["rule"] == "compute"
    assert idle["share"] == pytest.approx(2 / 3) and idle["cost"] == pytest.approx(16 / 3)
    assert idle["purpose_class"] == "untracked" and idle["run_id"] is None


def test_instance_that_ran_twenty_minutes():
    # usage hours 1/3 → d = 1/3; r1 covers those 20 minutes: min(1, (1/3)/(1/3)) = 1.
    # A no-hours row of the same (resource, hour) (e.g. an SP negation) shares that d.
    ln, neg = line(uh=1 / 3, cost=2.0), line(uh=None, cost=-2.0)
    out = attr([ln, neg], [run("r1", end=T(5, 10, 20))])
    assert set(out) == {(sl(ln), "r1"), (sl(neg), "r1")}
    assert out[sl(ln), "r1"]["share"] == out[sl(neg), "r1"]["share"] == pytest.approx(1.0)
    assert out[sl(ln), "r1"]["hours"] == pytest.approx(1 / 3)


def test_hour_split_across_savings_plan_and_on_demand_rows():
    # Same instance-hour in two rows of 0.25 h each → d = 0.5 h; r1 covers 15 min
    # → share 0.25 / 0.5 = 0.5 on both rows: $3 → 1.5, $5 → 2.5; the rest idle.
    sp, od = line(uh=0.25, cost=3.0), line(uh=0.25, cost=5.0)
    out = attr([sp, od], [run("r1", end=T(5, 10, 15))])
    assert out[sl(sp), "r1"]["share"] == out[sl(od), "r1"]["share"] == pytest.approx(0.5)
    assert out[sl(sp), "r1"]["cost"] == pytest.approx(1.5)
    assert out[sl(od), "r1"]["cost"] == pytest.approx(2.5)
    assert out[sl(od), "idle_capacity"]["cost"] == pytest.approx(2.5)


def test_an_azure_vm_spelled_in_two_cases_is_one_resource():
    # Azure ids are case-insensitive: a reservation-covered row spelled as created and an
    # on-demand row lowercased, 12 h each of one VM-day → d = 24 h; a run on the VM for 12 h
    # holds half of each row (each row read as its own resource gave d = 12: share 1, the
    # run took the whole day and nothing was untracked)
    vm = ("/subscriptions/S1/resourceGroups/ML-RG/providers/Microsoft.Compute/"
          "virtualMachines/GPU-VM-1")
    day0, day1 = T(5), T(6)
    covered = line(rid=vm, s=day0, e=day1, uh=12.0, cost=100.0)
    on_demand = line(rid=vm.lower(), s=day0, e=day1, uh=12.0, cost=300.0)
    out = attr([covered, on_demand], [run("r1", start=day0, end=T(5, 12), res=(vm,))])
    assert out[sl(covered), "r1"]["share"] == pytest.approx(0.5)
    assert out[sl(on_demand), "r1"]["cost"] == pytest.approx(150.0)
    assert out[sl(on_demand), "idle_capacity"]["cost"] == pytest.approx(150.0)


def test_shared_instance_two_runs_of_four_gpus():
    # G = 8; each run: min(1, 1/1) × 4/8 = 0.5; S = 1 → no untracked row. $16 → 8 + 8.
    ln = line(cost=16.0)
    out = attr([ln], [run("a", gpus=4), run("b", gpus=4)])
    assert set(out) == {(sl(ln), "a"), (sl(ln), "b")}
    assert out[sl(ln), "a"]["cost"] == pytest.approx(8.0)
    assert out[sl(ln), "b"]["accelerator_hours"] == pytest.approx(4.0)  # 0.5 × 1 h × 8


def test_over_claim_is_normalized():
    # three runs × 4/8 = S 1.5 > 1 → each 0.5 / 1.5 = 1/3 of $12 = 4; no untracked row.
    ln = line(cost=12.0)
    out = attr([ln], [run(x, gpus=4) for x in "abc"])
    assert set(out) == {(sl(ln), x) for x in "abc"}
    assert all(out[sl(ln), x]["cost"] == pytest.approx(4.0) for x in "abc")


def test_tagged_line_claims_for_a_run_not_listing_the_resource():
    # r1 lists another instance but the line carries its tag and they overlap → share 1.
    ln = line(Tags={"user_run_id": "r1"})
    out = attr([ln], [run("r1", res=("i-other",))], run_tag="user_run_id")
    assert out[sl(ln), "r1"]["share"] == pytest.approx(1.0)
    # with the default run_tag `run_id`, CUR 2.0's `user_run_id` key is the same tag (SPEC §6)
    assert attr([ln], [run("r1", res=("i-other",))])[sl(ln), "r1"]["share"] == pytest.approx(1.0)
    # another tag key is not read → untracked, no run
    other = line(Tags={"user_owner": "r1"})
    assert (sl(other), "no_run") in attr([other], [run("r1", res=("i-other",))])


def test_stale_tag_is_untracked():
    # the tag names r1, but r1 ran the day before the line → no overlap → no_run.
    ln = line(Tags={"run_id": "r1"})
    out = attr([ln], [run("r1", start=T(4, 10), end=T(4, 11))])
    assert list(out) == [(sl(ln), "no_run")]
    assert out[sl(ln), "no_run"]["cost"] == pytest.approx(8.0)


def test_sweep_parent_claims_nothing():
    # parent p lists i-1 for the whole hour; child c covers 30 min → c 0.5, untracked 0.5.
    ln = line(cost=10.0)
    parent = run("p", purpose=None, search_id="s1")
    child = run("c", end=T(5, 10, 30), purpose=None, search_id="s1", parent_run_id="p")
    out = attr([ln], [parent, child])
    assert set(out) == {(sl(ln), "c"), (sl(ln), "idle_capacity")}
    assert out[sl(ln), "c"]["cost"] == pytest.approx(5.0)
    assert out[sl(ln), "c"]["purpose_class"] == "search"


def test_running_run_ends_at_month_end():
    # RUNNING, no end, started 23:00 on the 31st → claims the month's last hour fully;
    # a RUNNING run with a stale end_time (23:30) also runs to the month's end.
    ln = line(s=T(31, 23), e=datetime(2024, 4, 1))
    for end in (None, T(31, 23, 30)):
        out = attr([ln], [run("r1", start=T(31, 23), end=end, status="RUNNING")])
        assert out[sl(ln), "r1"]["share"] == pytest.approx(1.0)


def test_finished_run_without_end_claims_nothing():
    ln = line()
    out = attr([ln], [run("r1", end=None, status="FAILED")])
    assert list(out) == [(sl(ln), "no_run")]


INV = [  # bucket ckpt, one undated listing: r1 600 B, orphan 200 B, non-prefix 200 B.
    {"bucket": "ckpt", "key": "checkpoints/r1/c1/a", "size": 600, "snapshot_date": None,
     "last_modified": T(2), "prefix": "checkpoints/", "run_id": "r1"},
    {"bucket": "ckpt", "key": "checkpoints/ghost/c1/a", "size": 200, "snapshot_date": None,
     "last_modified": T(2), "prefix": "checkpoints/", "run_id": "ghost"},
    {"bucket": "ckpt", "key": "datasets/x.parquet", "size": 200, "snapshot_date": None,
     "last_modified": T(2), "prefix": None, "run_id": None},
    {"bucket": "ckpt", "key": "checkpoints/r1/c2/a", "size": 5000, "snapshot_date": None,
     "last_modified": datetime(2024, 4, 2), "prefix": "checkpoints/", "run_id": "r1"},
]


def bucket_line(comp="storage", cost=10.0, **kw) -> dict:
    return line("ckpt", comp=comp, cost=cost, g=0, uh=None, x_ResourceKind="bucket", **kw)


def test_storage_split_by_bytes():
    # r1 (failed, no end: no compute, still owns bytes) 600 of 1000 listed bytes → $6;
    # orphan + non-prefix 400 → $4 untracked; the April object is not in March's snapshot.
    ln, empty = bucket_line(), bucket_line(ResourceId="nothing-listed")
    out = attr([ln, empty], [run("r1", end=None, status="FAILED")], INV)
    assert out[sl(ln), "r1"]["cost"] == pytest.approx(6.0)
    assert out[sl(ln), "r1"]["rule"] == "bucket_storage"
    assert out[sl(ln), "idle_capacity"]["cost"] == pytest.approx(4.0)
    assert list(k for k in out if k[0] == sl(empty)) == [(sl(empty), "no_run")]


def test_storage_uses_the_days_snapshot_else_the_latest():
    # dated snapshots: 03-05 r1 100/400 B; 03-20 r1 300/400 B. A line on the 5th uses the
    # 5th (share 0.25); a line on the 10th has no snapshot → the latest one (share 0.75).
    def obj(day, rid, size):
        return {"bucket": "ckpt", "key": f"k{day}{rid}", "size": size,
                "snapshot_date": date(2024, 3, day), "last_modified": T(1),
                "prefix": "checkpoints/", "run_id": rid}
    inv = [obj(5, "r1", 100), obj(5, "x", 300), obj(20, "r1", 300), obj(20, "x", 100)]
    on5, on10 = bucket_line(), bucket_line(s=T(10), e=T(11))
    out = attr([on5, on10], [run("r1")], inv)
    assert out[sl(on5), "r1"]["share"] == pytest.approx(0.25)
    assert out[sl(on10), "r1"]["share"] == pytest.approx(0.75)


def test_tagged_storage_line_goes_wholly_to_the_run():
    # the tag names a known run (a sweep parent with no end) → share 1, bytes ignored.
    ln = bucket_line(Tags={"run_id": "p"})
    runs = [run("p", end=None, status="KILLED"), run("c", parent_run_id="p")]
    out = attr([ln], runs, INV)
    assert list(out) == [(sl(ln), "p")]


def test_bucket_transfer_split_by_overlap():
    # a & b read dataset `events` (bucket data, us-east-1) from other regions: a overlaps
    # 40 min, b 20 min → 2/3 and 1/3 of $9. c is in us-east-1: excluded although it lists
    # the bucket and is tagged.
    ds = {"events": {"bucket": "data", "region": "us-east-1"}}
    ln = line("data", comp="network", cost=9.0, g=0, uh=None, x_ResourceKind="bucket",
              Tags={"run_id": "c"})
    a = run("a", end=T(5, 10, 40), res=None, dataset="events", region="eu-west-1")
    b = run("b", start=T(5, 10, 40), res=None, dataset="events", region="us-west-2")
    c = run("c", res=("data",), dataset="events", region="us-east-1")
    out = attr([ln], [a, b, c], datasets=ds)
    assert set(out) == {(sl(ln), "a"), (sl(ln), "b")}
    assert out[sl(ln), "a"]["cost"] == pytest.approx(6.0)
    assert out[sl(ln), "b"]["cost"] == pytest.approx(3.0)
    assert out[sl(ln), "a"]["rule"] == "bucket_transfer"
    assert list(attr([ln], [c], datasets=ds)) == [(sl(ln), "no_run")]


def test_a_region_in_another_case_or_with_blanks_is_the_same_region():
    # GCS reports the bucket's location as `US-EAST1`, Compute the run's region as `us-east1`:
    # g1 reads from its own region, the line is untracked; g2 (europe-west4) takes it whole
    ds = {"events": {"bucket": "gcs-data", "region": "US-EAST1"}}
    ln = line("gcs-data", comp="network", cost=0.08, g=0, uh=None, x_ResourceKind="bucket")
    g1 = run("g1", res=None, dataset="events", region=" us-east1 ")
    g2 = run("g2", res=None, dataset="events", region="europe-west4")
    assert list(attr([ln], [g1], datasets=ds)) == [(sl(ln), "no_run")]
    out = attr([ln], [g1, g2], datasets=ds)
    assert list(out) == [(sl(ln), "g2")] and out[sl(ln), "g2"]["cost"] == pytest.approx(0.08)


def test_an_azure_storage_account_is_a_dataset_by_its_id_in_any_case_not_by_its_name():
    # the export lowercases the account's id; `views` names the account by its id as created:
    # z2 takes the $3 line. `clicks` names the S3 bucket `mldata`: z1 takes its $4 line and
    # not the $2 of the Azure account of that name (matched by its name, it took both)
    account = ("/subscriptions/0000/resourcegroups/ml-rg/providers/microsoft.storage/"
               "storageaccounts/")
    ds = {"clicks": {"bucket": "mldata", "region": "eastus"},
          "views": {"bucket": "/subscriptions/0000/resourceGroups/ML-RG/providers/"
                              "Microsoft.Storage/storageAccounts/mldata2", "region": "eastus"}}
    one, two, s3 = (line(resource, comp="network", cost=cost, g=0, uh=None,
                         x_ResourceKind="bucket")
                    for resource, cost in ((account + "mldata", 2.0), (account + "mldata2", 3.0),
                                           ("mldata", 4.0)))
    z1 = run("z1", res=None, dataset="clicks", region="westeurope")
    z2 = run("z2", res=None, dataset="views", region="westeurope")
    out = attr([one, two, s3], [z1, z2], datasets=ds)
    assert {k for k in out if k[1] in ("z1", "z2")} == {(sl(s3), "z1"), (sl(two), "z2")}
    assert (out[sl(s3), "z1"]["cost"], out[sl(two), "z2"]["cost"]) == (4.0, 3.0)
    assert out[sl(one), "no_run"]["cost"] == 2.0


def test_network_line_on_an_instance_uses_the_normal_claim():
    # no usage hours → d = e − s = 1 h; r1 covers 30 min → 0.5 of $2; hours stay NULL.
    ln = line(comp="network", cost=2.0, g=0, uh=None)
    out = attr([ln], [run("r1", end=T(5, 10, 30))])
    assert out[sl(ln), "r1"]["cost"] == pytest.approx(1.0)
    assert out[sl(ln), "r1"]["hours"] is None and out[sl(ln), "r1"]["rule"] == "compute"
    assert out[sl(ln), "idle_capacity"]["cost"] == pytest.approx(1.0)


def test_non_usage_lines_are_unallocated():
    tax = line(cost=3.0, ChargeCategory="Tax", uh=None)
    credit = line(cost=-5.0, ChargeCategory="Credit", uh=None)
    fee = line(cost=7.0, ChargeCategory="Purchase", CommitmentDiscountStatus="Unused", uh=None)
    focus_unused = line(cost=4.0, CommitmentDiscountStatus="Unused", uh=None)  # FOCUS style
    out = attr([tax, credit, fee, focus_unused], [run("r1")])
    assert set(out) == {(sl(tax), "tax"), (sl(credit), "credit"), (sl(fee), "unused_commitment"),
                        (sl(focus_unused), "unused_commitment")}
    assert all(r["purpose_class"] == "unallocated" and r["share"] == 1 for r in out.values())
    assert all(r["rule"] == "non_usage" for r in out.values())


def test_lines_no_run_can_name_are_shared():
    nat = line("nat-1", comp="network", g=0, uh=None, x_ResourceKind="shared")
    bare = line(None, comp="other", g=0, uh=None)
    out = attr([nat, bare], [run("r1")])
    assert set(out) == {(sl(nat), "shared"), (sl(bare), "shared")}


def recon_case():
    i1 = line("i-1", cost=16.0)  # r1 gpus 4 of 8 → 0.5 tracked, 0.5 idle
    i2 = line("i-2", cost=16.0)  # three runs × 4/8 → S = 1.5, over-claimed
    tax = line(cost=2.0, ChargeCategory="Tax", uh=None)
    vol = line("vol-1", comp="storage", cost=4.0, g=0, uh=None)  # untracked
    runs = [run("r1", gpus=4)] + [run(x, res=("i-2",), gpus=4) for x in "abc"] + [
        # 22:00 Feb 29 → 03:00 Mar 1: 3 h in March on an unbilled id × 2 gpus = 6
        run("g1", start=datetime(2024, 2, 29, 22), end=T(1, 3), res=("i-ghost",), gpus=2),
        # 1 h on an unbilled id listed twice, gpus empty → 1
        run("g2", res=("i-ghost2", "i-ghost2", "i-1")),
        # a parent listing an unbilled id counts nothing
        run("p", res=("i-ghost3",)), run("kid", res=(), parent_run_id="p"),
    ]
    return [i1, i2, tax, vol], runs


def test_reconcile_small_month():
    lines, runs = recon_case()
    rows = attribute(lines, runs, [], {}, M)
    rec = reconcile(lines, rows, runs, M, threshold=0.05)
    # i-1 now also claimed by g2 (whole hour, gpus empty) → S = 1.5 there too.
    assert rec["billed_gpu_hours"] == pytest.approx(16.0)  # 2 lines × 1 h × 8
    assert rec["tracked_gpu_hours"] == pytest.approx(16.0)
    assert rec["untracked_gpu_hours"] == pytest.approx(0.0)
    assert rec["over_claimed_gpu_hours"] == pytest.approx(0.5 * 8 + 0.5 * 8)
    assert rec["unbilled_claim_gpu_hours"] == pytest.approx(6 + 1)
    assert rec["status"] == "pass"


def test_reconcile_with_untracked_gpu_hours():
    lines, runs = recon_case()
    runs = [r for r in runs if r["run_id"] != "g2"]
    rows = attribute(lines, runs, [], {}, M)
    rec = reconcile(lines, rows, runs, M, threshold=0.05)
    # tracked: i-1 0.5 × 8 + i-2 1 × 8 = 12; untracked 4 of 16 billed → 0.25 > 0.05 → fail.
    assert rec["tracked_gpu_hours"] == pytest.approx(12.0)
    assert rec["untracked_gpu_hours"] == pytest.approx(4.0)
    assert rec["untracked_share"] == pytest.approx(0.25) and rec["status"] == "fail"
    assert reconcile(lines, rows, runs, M, threshold=0.25)["status"] == "pass"
    # money: total 16 + 16 + 2 + 4 = 38; runs 8 + 16 = 24; untracked 8 + 4; unallocated 2.
    assert rec["total_effective_cost"] == pytest.approx(38.0)
    assert rec["attributed_cost"] == pytest.approx(24.0)
    assert rec["untracked_cost"] == pytest.approx(12.0)
    assert rec["unallocated_cost"] == pytest.approx(2.0)
    assert rec["coverage"] == pytest.approx(24 / 38)
    assert rec["untracked_cost_share"] == pytest.approx(8 / 32)  # gpu untracked ÷ gpu Usage
    assert rec["over_claimed_gpu_hours"] == pytest.approx(4.0)  # (1.5 − 1) × 1 h × 8
    assert rec["unbilled_claim_gpu_hours"] == pytest.approx(6.0)


def test_reconcile_empty_month():
    rec = reconcile([], [], [], M, threshold=0.05)
    assert rec["untracked_share"] == rec["coverage"] == rec["untracked_cost_share"] == 0
    assert rec["status"] == "pass"


APRIL_1 = datetime(2024, 4, 1)


def bill_through(last_day: int) -> list[dict]:
    """A month's bill as delivered so far: i-1's hour 23:00-24:00 of each day to `last_day`,
    and a tax line stated for the whole month (not Usage: it says nothing of how far the
    bill reaches)."""
    days = [line(s=T(d, 23), e=T(d + 1) if d < 31 else APRIL_1) for d in range(1, last_day + 1)]
    return days + [line(s=T(1), e=APRIL_1, cost=2.0, ChargeCategory="Tax", uh=None, g=0)]


def unbilled_hours(lines, runs) -> float:
    return reconcile(lines, attribute(lines, runs, [], {}, M), runs, M,
                     threshold=0.05)["unbilled_claim_gpu_hours"]


def test_unbilled_claims_of_the_open_month_end_where_its_bill_does():
    # the bill reaches 6 March 24:00; a run RUNNING since 1 March 00:00 on 2 GPUs lists a
    # resource it never shows: 6 days × 24 h × 2 = 288 GPU-hours, not the month's 744 × 2
    # (a RUNNING run's claim runs to the month's end, hours the bill has yet to cover)
    ghost = run("u", start=T(1), end=None, status="RUNNING", res=("i-unbilled",), gpus=2)
    assert unbilled_hours(bill_through(6), [ghost]) == pytest.approx(2 * 144)


def test_a_line_stated_for_the_whole_month_does_not_say_how_far_the_bill_reaches():
    # the bill of hours and days reaches 6 March 24:00; a Usage line stated for the whole
    # month (a monthly charge, a subscription) ends on 1 April, and took the figure to the
    # month's end: the hours to come counted again, 2 × 744
    ghost = run("u", start=T(1), end=None, status="RUNNING", res=("i-unbilled",), gpus=2)
    monthly = line(rid="support", s=T(1), e=APRIL_1, cost=5.0, comp="other", uh=None, g=0)
    assert unbilled_hours([*bill_through(6), monthly], [ghost]) == pytest.approx(2 * 144)


def test_unbilled_claims_of_a_closed_month_count_the_whole_month():
    # the bill reaches 31 March 24:00, the month's end: the run's 744 h in March × 2 GPUs
    ghost = run("u", start=T(1), end=None, status="RUNNING", res=("i-unbilled",), gpus=2)
    assert unbilled_hours(bill_through(31), [ghost]) == pytest.approx(2 * 744)


def test_a_finished_run_counts_unbilled_hours_up_to_where_the_bill_reaches():
    # bill to 6 March 24:00. f1: 5 March 12:00 → 10 March, 4 GPUs: 36 h before the bill
    # stops → 144; f2 starts on 8 March, after it: 0 (the bill cannot show it yet)
    runs = [run("f1", start=T(5, 12), end=T(10), res=("i-gone",), gpus=4),
            run("f2", start=T(8), end=T(9), res=("i-gone",), gpus=8)]
    assert unbilled_hours(bill_through(6), runs) == pytest.approx(36 * 4)


def test_unbilled_claims_of_a_month_without_usage_lines_are_zero():
    # only the tax line: the bill covers no hour of the month yet, so no resource is
    # missing from it
    ghost = run("u", start=T(1), end=None, status="RUNNING", res=("i-unbilled",), gpus=2)
    tax = bill_through(0)
    assert unbilled_hours(tax, [ghost]) == 0.0
