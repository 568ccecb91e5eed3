"""A re-run keeps the month's attribution when nothing it depends on changed, and attributes
again only the changed runs' lines when only runs changed (attribution.py,
`attribution_basis`, `attribution_affected`): on random bills, runs, listings and random
changes to the runs — some that move the rows, some that do not (a run's model, team,
metric) — a kept or partly redone month holds the same rows and per-run sums as attributing
it whole; a changed bill, listing or parameter attributes it whole."""

from __future__ import annotations

from datetime import timedelta

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cost_pipeline.attribution import PARTIAL_MAX_SHARE, build_attribution
from cost_pipeline.config import parse_config
from cost_pipeline.ingest.billing import bill_token
from cost_pipeline.warehouse import month_params, note_input
from tests.attribution.test_attribution_property import (
    DATASETS,
    INSTANCES,
    MONTH,
    RUN_IDS,
    close,
    hour,
    keyed,
    scenarios,
)
from tests.attribution.test_token_texts import twin
from tests.support import sql_backend
from tests.support.recording import Recording
from tests.support.warehouse_rows import RUN_DEFAULTS, insert_runs

PARAMS = month_params(parse_config({"datasets": DATASETS}, __import__("pathlib").Path(".")),
                      MONTH)
DATASET_ROWS = [(name, ds["bucket"], ds["region"]) for name, ds in DATASETS.items()]
RESOURCES = sorted(INSTANCES) + ["vol-1", "i-z", "job-a", "job-b"]


@st.composite
def changed_runs(draw, runs: list[dict]) -> list[dict]:
    """The runs file of a later delivery: runs dropped, added, ended, started earlier or later,
    re-listed, re-purposed —
    or only renamed models, teams and metrics, which the attribution does not read."""
    out = []
    for run in runs:
        change = draw(st.sampled_from(["same", "same", "unread", "drop", "end", "end",
                                       "start", "resources", "purpose", "gpus", "status",
                                       "parent"]))
        run = dict(run)
        if change == "drop":
            continue
        if change == "end":
            run["end_time"] = run["start_time"] + timedelta(hours=draw(st.sampled_from(
                [0.5, 1, 3, 12])))
        elif change == "start":  # earlier or later, still before its end
            moved = run["start_time"] + timedelta(hours=draw(st.sampled_from(
                [-3, -1, -0.25, 0.5, 1, 2])))
            if run.get("end_time") is None or moved < run["end_time"]:
                run["start_time"] = moved
        elif change == "resources":
            run["resource_ids"] = draw(st.lists(st.sampled_from(RESOURCES), unique=True,
                                                max_size=3))
        elif change == "purpose":
            run["purpose"] = draw(st.sampled_from([None, "production", "search", "preprocess"]))
            run["search_id"] = draw(st.sampled_from([None, "s1", "s2"]))
        elif change == "gpus":
            run["gpus"] = draw(st.sampled_from([None, 1, 2, 4, 8]))
        elif change == "status":
            run["status"] = draw(st.sampled_from(["FINISHED", "RUNNING", "FAILED"]))
        elif change == "parent" and runs:
            run["parent_run_id"] = draw(st.sampled_from([None, runs[0]["run_id"]]))
        elif change == "unread":
            run.update(model="m2", team="t2", metric_value=0.5)
        out.append(run)
    free = [r for r in RUN_IDS if r not in {run["run_id"] for run in out}]
    added = draw(st.lists(st.sampled_from(free), unique=True, max_size=1)) if free else []
    for run_id in added:
        out.append({**RUN_DEFAULTS, "run_id": run_id, "status": "FINISHED",
                    "start_time": hour(draw(st.integers(0, 10))),
                    "end_time": hour(draw(st.integers(11, 14))),
                    "resource_ids": draw(st.lists(st.sampled_from(RESOURCES), unique=True,
                                                  max_size=2)),
                    "dataset": draw(st.sampled_from([None, "ds1"])),
                    "region": draw(st.sampled_from([None, "us-east-1", "US-WEST-2 "]))})
    return out


def month_of(lines, runs, inventory) -> duckdb.DuckDBPyConnection:
    """The month loaded, its bill noted as written (as `build_billing_facts` notes it): the
    attribution reads the bill's part of its basis from that token."""
    con = sql_backend.loaded(lines, runs, inventory, MONTH)
    bill_written(con)
    return con


def bill_written(con) -> None:
    """A write of the month's bill: its token noted, as `build_billing_facts` notes it."""
    note_input(con, MONTH, "billing", bill_token(con, MONTH, PARAMS["run_tag"]))


def new_runs(con, runs) -> None:
    con.execute("DELETE FROM tracker_runs WHERE month = ?", [MONTH])
    insert_runs(con, MONTH, [{**RUN_DEFAULTS, **r} for r in runs])


def attribute(con, **kw):
    return build_attribution(con, MONTH, PARAMS, DATASET_ROWS, keep_unchanged=True, **kw)


# the bills here are small: any changed run holds a large share of their lines, which would
# send most re-runs to the whole month; the property tests take the partial path whatever
# the share
ANY_SHARE = {"partial_max_share": 1.0, "resum_max_share": 1.0}


def attribution_of(con) -> tuple[list[dict], list[dict]]:
    """The month's attribution rows and per-run sums, as `assert_same_attribution` reads them."""
    return (sql_backend.table_rows(con, "attribution"),
            sql_backend.table_rows(con, "attribution_runs"))


def assert_same_attribution(got_con, want_con) -> None:
    """`got_con`'s attribution is `want_con`'s (a connection, or `attribution_of` one)."""
    want_rows, want_runs = (want_con if isinstance(want_con, tuple)
                            else attribution_of(want_con))
    got_rows, got_runs = attribution_of(got_con)
    got, want = keyed(got_rows), keyed(want_rows)
    assert set(got) == set(want)
    for key, row in want.items():
        for field in ("cost", "share", "claimed_share", "hours", "accelerator_hours"):
            assert close(got[key][field], row[field]), (key, field, got[key][field], row[field])
        for field in ("purpose_class", "component", "rule", "kind"):
            assert got[key][field] == row[field], (key, field)
    group = ("run_id", "purpose_class", "component", "rule", "kind")
    got_sums = {tuple(r[k] for k in group): r for r in got_runs}
    want_sums = {tuple(r[k] for k in group): r for r in want_runs}
    assert set(got_sums) == set(want_sums)
    for key, row in want_sums.items():
        assert got_sums[key]["rows"] == row["rows"], key
        for field in ("cost", "hours", "accelerator_hours"):
            assert close(got_sums[key][field], row[field]), (key, field)
    # the kept and the summed-again groups alike: each one's exact cost is its rows' DECIMAL sum
    assert got_con.execute(EXACT_SUMS_DIFFER).fetchall() == []


def basis_of(con) -> list[tuple]:
    """The month's stored attribution basis, every row, in one order."""
    return con.execute("SELECT run_id, inputs, run_key, shape_key, rs, re FROM "
                       "attribution_basis ORDER BY ALL").fetchall()


EXACT_SUMS_DIFFER = """
    WITH rows AS (
        SELECT month, run_id, purpose_class, component, rule, kind,
               sum(CAST(cost AS DECIMAL(38, 10))) AS cost_exact
        FROM attribution GROUP BY ALL
    )
    SELECT r.*, s.cost_exact AS summed
    FROM rows AS r
    FULL JOIN attribution_runs AS s
      ON s.month = r.month AND s.run_id IS NOT DISTINCT FROM r.run_id
     AND s.purpose_class = r.purpose_class AND s.component = r.component
     AND s.rule = r.rule AND s.kind IS NOT DISTINCT FROM r.kind
    WHERE s.cost_exact IS DISTINCT FROM r.cost_exact"""


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_kept_or_partly_redone_month_is_what_attributing_it_whole_would_write(data):
    lines, runs, inventory = data.draw(scenarios())
    runs = [{**RUN_DEFAULTS, **r} for r in runs]
    later = data.draw(changed_runs(runs))
    con = month_of(lines, runs, inventory)
    assert attribute(con).mode == "full"  # nothing stored yet
    first = attribution_of(con)  # the month attributed whole from the first runs
    first_basis = basis_of(con)
    new_runs(con, later)
    outcome = attribute(con, **ANY_SHARE)
    assert outcome.mode == ("kept" if outcome.changed_runs == 0 else "partial")
    whole = month_of(lines, later, inventory)
    assert build_attribution(whole, MONTH, PARAMS, DATASET_ROWS).mode == "full"
    assert_same_attribution(con, whole)
    # a partial re-run writes again only the basis rows of the runs that changed: the basis
    # is the one a whole attribution stores
    assert basis_of(con) == basis_of(whole)
    ((rows,),) = con.execute("SELECT count(*) FROM attribution_rows").fetchall()
    assert outcome.rows == rows
    if later == runs:
        assert (outcome.mode, outcome.changed_runs) == ("kept", 0)
    # and a third delivery, back to the first runs: the partial path again, from its own rows
    new_runs(con, runs)
    attribute(con, **ANY_SHARE)
    assert_same_attribution(con, first)
    assert basis_of(con) == first_basis


def gpu_lines(resources, hours, cost: float) -> list[dict]:
    """Hourly usage lines of 8-GPU instances, `{resource}-{hour}`, each at `cost`."""
    return [{"x_SourceLine": f"{resource}-{h}", "ResourceId": resource,
             "x_CostComponent": "gpu", "x_AcceleratorCount": 8, "x_UsageHours": 1.0,
             "x_InstanceUsage": True, "x_ResourceKind": "instance", "ChargeCategory": "Usage",
             "EffectiveCost": cost, "ChargePeriodStart": hour(h), "ChargePeriodEnd": hour(h + 1)}
            for resource in resources for h in hours]


def one_run_per_resource(resources, hours: int) -> list[dict]:
    """A finished run on each resource, from hour 0 for `hours` hours."""
    return [{**RUN_DEFAULTS, "run_id": f"run-{r}", "status": "FINISHED",
             "start_time": hour(0), "end_time": hour(hours), "resource_ids": [r]}
            for r in resources]


def _whole(lines, runs, inventory) -> duckdb.DuckDBPyConnection:
    con = month_of(lines, runs, inventory)
    build_attribution(con, MONTH, PARAMS, DATASET_ROWS)
    return con


def test_unchanged_runs_keep_the_rows_and_a_changed_run_redoes_its_lines_or_the_month():
    lines = gpu_lines(("i-a", "i-b", "i-c"), range(4), 10.0)
    runs = one_run_per_resource(("i-a", "i-b", "i-c"), 4)
    con = month_of(lines, runs, [])
    attribute(con)
    # the same runs again (a re-delivered file), one with another model: nothing moves
    new_runs(con, [dict(r, model="bigger") if r["run_id"] == "run-i-a" else r for r in runs])
    same = attribute(con)
    assert (same.mode, same.changed_runs, same.rows) == ("kept", 0, 12)
    # run-i-b now ended after 2 h: only its window moved, so only the lines in what it left
    # (hours 2 and 3) can have other claims; the other 10 lines keep their rows
    later = [dict(r, end_time=hour(2)) if r["run_id"] == "run-i-b" else r for r in runs]
    new_runs(con, later)
    done = attribute(con)
    assert (done.mode, done.changed_runs, done.lines_reattributed) == ("partial", 1, 2)
    untracked = dict(con.execute(
        "SELECT x_SourceLine, cost FROM attribution WHERE purpose_class = 'untracked'"
    ).fetchall())
    assert untracked == {"i-b-2": pytest.approx(10.0), "i-b-3": pytest.approx(10.0)}
    # re-listed on i-c: the lines it had rows on and those it claims now, 4 of the 12, are
    # more than the share a re-run redoes alone, so the month is attributed again
    relisted = [dict(r, resource_ids=["i-c"]) if r["run_id"] == "run-i-b" else r
                for r in later]
    new_runs(con, relisted)
    done = attribute(con)
    assert (done.mode, done.changed_runs) == ("full", 1)
    # back on i-b: with a larger share allowed, those 4 lines alone are attributed again
    new_runs(con, later)
    done = attribute(con, partial_max_share=0.5)
    assert (done.mode, done.changed_runs, done.lines_reattributed) == ("partial", 1, 4)
    assert con.execute("SELECT sum(cost) FROM attribution WHERE purpose_class = 'untracked'"
                       ).fetchall() == [(pytest.approx(20.0),)]
    # keep_unchanged off (a `--force` run): attributed whole although nothing changed
    again = build_attribution(con, MONTH, PARAMS, DATASET_ROWS)
    assert (again.mode, again.changed_runs) == ("full", 0)


def test_a_partial_re_run_redoes_every_row_of_an_azure_vm_hour_in_either_case():
    """A tagged run's line brings the other rows of its resource-hour into a partial re-run
    (d is summed over them): an Azure VM's rows spelled in two cases are one resource-hour,
    so the lowercased row comes too; left out, d was the tagged row's hours alone."""
    vm = "/subscriptions/S1/resourceGroups/ML-RG/providers/Microsoft.Compute/virtualMachines/V1"
    lines = [dict(line, x_UsageHours=0.5) for line in gpu_lines((vm,), range(1), 10.0)]
    lines.append(dict(lines[0], x_SourceLine="lower-0", ResourceId=vm.lower()))
    lines[0]["Tags"] = {"run_id": "tagged"}
    runs = [{**RUN_DEFAULTS, "run_id": "tagged", "status": "FINISHED",
             "start_time": hour(0), "end_time": hour(1), "resource_ids": []}]
    con = month_of(lines, runs, [])
    attribute(con)
    # the tagged run now ended after 15 minutes: its tagged row takes 0.25 h of d = 1 h
    later = [dict(runs[0], end_time=hour(0) + timedelta(minutes=15))]
    new_runs(con, later)
    done = attribute(con, **ANY_SHARE)
    assert done.mode == "partial"
    assert_same_attribution(con, _whole(lines, later, []))
    assert con.execute("SELECT sum(cost) FROM attribution WHERE run_id = 'tagged'"
                       ).fetchall() == [(pytest.approx(2.5),)]


def test_a_partial_re_run_finds_the_transfer_of_an_azure_account_a_dataset_names_by_its_id():
    """Two datasets name Azure storage accounts by their ids as created
    (`resourceGroups/ML-RG/…/storageAccounts/…`), one region in other letters (`EastUS`); the
    bill holds the ids lowercased. A run added to the month that reads them from another region
    takes their transfer in a partial re-run as in a whole one: the re-run looked the lines up
    by the dataset's bucket as written and redid none, the runs keeping $0."""
    account = ("/subscriptions/0000/resourcegroups/ml-rg/providers/microsoft.storage/"
               "storageaccounts/")
    datasets = {"clicks": {"bucket": "/subscriptions/0000/resourceGroups/ML-RG/providers/"
                                     "Microsoft.Storage/storageAccounts/mldata",
                           "region": "EastUS"},
                "images": {"bucket": "/subscriptions/0000/resourceGroups/ML-RG/providers/"
                                     "Microsoft.Storage/storageAccounts/mldata2",
                           "region": "eastus"}}
    params = month_params(parse_config({"datasets": datasets}, __import__("pathlib").Path(".")),
                          MONTH)
    rows = [(name, ds["bucket"], ds["region"]) for name, ds in datasets.items()]
    lines = [{"x_SourceLine": f"transfer-{name}", "ResourceId": account + name,
              "x_CostComponent": "network", "x_UsageHours": 0.0, "x_InstanceUsage": False,
              "x_ResourceKind": "bucket", "ChargeCategory": "Usage", "EffectiveCost": cost,
              "ChargePeriodStart": hour(0), "ChargePeriodEnd": hour(24)}
             for name, cost in (("mldata", 2.0), ("mldata2", 3.0))]
    lines += gpu_lines(("i-1",), range(2), 10.0)
    first = one_run_per_resource(("i-1",), 2)
    con = month_of(lines, first, [])
    build_attribution(con, MONTH, params, rows, keep_unchanged=True)
    readers = [{**RUN_DEFAULTS, "run_id": run_id, "status": "FINISHED", "start_time": hour(6),
                "end_time": hour(18), "resource_ids": [], "region": "westeurope",
                "dataset": dataset} for run_id, dataset in (("z1", "clicks"), ("z2", "images"))]
    new_runs(con, first + readers)
    done = build_attribution(con, MONTH, params, rows, keep_unchanged=True, **ANY_SHARE)
    assert done.mode == "partial"
    whole = month_of(lines, first + readers, [])
    build_attribution(whole, MONTH, params, rows)
    assert_same_attribution(con, whole)
    assert con.execute("SELECT run_id, sum(cost) FROM attribution WHERE run_id LIKE 'z%' "
                       "GROUP BY ALL ORDER BY 1").fetchall() == [
        ("z1", pytest.approx(2.0)), ("z2", pytest.approx(3.0))]


def test_rule_4s_bytes_are_computed_only_for_a_month_attributed_again():
    """attribution_storage.sql reads the listing for the buckets' per-run bytes: a kept month
    does not need them (0.2 s of a re-run at 2M lines with 1M objects)."""
    lines = gpu_lines(("i-a", "i-b"), range(2), 10.0)
    runs = one_run_per_resource(("i-a", "i-b"), 2)
    con = month_of(lines, runs, [])
    attribute(con)

    def bytes_computed(outcome_mode: str) -> bool:
        recording = Recording(con)
        assert attribute(recording, **ANY_SHARE).mode == outcome_mode
        return any("TABLE attribution_run_bytes AS" in s for s in recording.statements)

    assert not bytes_computed("kept")
    new_runs(con, [dict(runs[0], end_time=hour(1)), runs[1]])
    assert bytes_computed("partial")


def test_the_bill_is_read_as_its_token_and_hashed_only_without_one():
    """`inputs` takes the bill's part from the token the billing step noted when it wrote the
    bill (ingest/billing.py `bill_token`, a hash of every line): the attribution does not hash
    the lines again (~0.13 s at 2M lines). The bill written again with the same lines, or
    with a line restated where the attribution does not read, keeps the rows; a line's cost
    restated attributes the month whole; another run tag or a `--force` run attribute it
    whole without hashing the bill. A warehouse without tokens hashes the lines on every run,
    to the same figures."""
    lines = gpu_lines(("i-a", "i-b"), range(2), 10.0)
    runs = one_run_per_resource(("i-a", "i-b"), 2)
    con = month_of(lines, runs, [])
    attribute(con)

    def bill_hashed(params=PARAMS, **kw) -> tuple[str, bool]:
        recording = Recording(con)
        done = build_attribution(recording, MONTH, params, DATASET_ROWS, **kw)
        return done.mode, any("FROM billing_facts" in s and "sum(hash(x_SourceLine" in s
                              for s in recording.statements)

    assert bill_hashed(keep_unchanged=True) == ("kept", False)
    new_runs(con, [dict(runs[0], end_time=hour(1)), runs[1]])
    assert bill_hashed(keep_unchanged=True) == ("partial", False)
    bill_written(con)  # delivered again, the same lines: the same token, the rows kept
    assert bill_hashed(keep_unchanged=True) == ("kept", False)
    owner = {**PARAMS, "run_tag": "owner"}
    assert bill_hashed(owner, keep_unchanged=True) == ("full", False)
    assert bill_hashed(owner, keep_unchanged=True) == ("kept", False)
    assert bill_hashed(owner) == ("full", False)  # --force
    # a line restated where the attribution does not read (its region): the rows kept
    con.execute("UPDATE billing_facts SET RegionId = 'eu-north-1' WHERE x_SourceLine = ?",
                [lines[1]["x_SourceLine"]])
    bill_written(con)
    assert bill_hashed(owner, keep_unchanged=True) == ("kept", False)
    # one line restated (10.0 → 11.0) in a new write: attributed whole, its cost with it
    con.execute("UPDATE billing_facts SET EffectiveCost = 11.0 WHERE x_SourceLine = ?",
                [lines[0]["x_SourceLine"]])
    bill_written(con)
    assert bill_hashed(owner, keep_unchanged=True) == ("full", False)
    ((cost,),) = con.execute("SELECT sum(cost) FROM attribution").fetchall()
    assert cost == pytest.approx(41.0)  # 4 lines of 10.0, one now 11.0
    # a warehouse from before the tokens: the lines hashed, to the token's figures
    con.execute("DELETE FROM input_tokens")
    assert bill_hashed(owner, keep_unchanged=True) == ("kept", True)
    assert bill_hashed(owner, keep_unchanged=True) == ("kept", True)


def test_a_basis_without_windows_redoes_every_line_of_a_changed_run():
    """A basis stored before windows were (shape_key, rs, re NULL) cannot tell a moved window
    from another change: the run's lines before and now are all attributed again."""
    lines = gpu_lines(("i-a", "i-b"), range(4), 10.0)
    runs = one_run_per_resource(("i-a", "i-b"), 4)
    con = month_of(lines, runs, [])
    attribute(con)
    stored = con.execute("SELECT count(*) FROM attribution_basis WHERE run_id IS NOT NULL "
                         "AND shape_key IS NOT NULL AND rs = ? AND re = ?",
                         [hour(0), hour(4)]).fetchall()
    assert stored == [(2,)]
    con.execute("UPDATE attribution_basis SET shape_key = NULL, rs = NULL, re = NULL")
    later = [dict(r, end_time=hour(3)) if r["run_id"] == "run-i-b" else r for r in runs]
    new_runs(con, later)
    done = attribute(con, **ANY_SHARE)
    assert (done.mode, done.changed_runs, done.lines_reattributed) == ("partial", 1, 4)
    assert_same_attribution(con, _whole(lines, later, []))


def test_a_run_that_ended_earlier_redoes_the_lines_of_its_last_hour_alone():
    """r1 ran on i-a reading ds1 (bucket `data`) from another region over hours 0-3; it now
    ends at hour 2. Its claims on hours 0 and 1 are as before: only i-a's line of hour 2 and
    the bucket's transfer line of hour 2 are attributed again — not the bucket's storage line
    of that hour (a bucket's lines share no `d`), whose rows r2's bytes decide. Only the
    sums of the runs with rows on those lines, under those lines' rules, are summed again."""
    def bucket_line(name, component):  # of `data`, in hour 2
        return {"x_SourceLine": name, "ResourceId": "data", "x_CostComponent": component,
                "x_AcceleratorCount": 0, "x_UsageHours": None, "x_InstanceUsage": False,
                "x_ResourceKind": "bucket", "ChargeCategory": "Usage", "EffectiveCost": 8.0,
                "ChargePeriodStart": hour(2), "ChargePeriodEnd": hour(3)}
    lines = gpu_lines(("i-a", "i-b"), range(4), 8.0)
    lines += [bucket_line("pull-2", "network"), bucket_line("store-2", "storage")]
    r1 = {**BASE_RUN, "end_time": hour(3)}
    r2 = {**SECOND_RUN, "end_time": hour(4)}
    inventory = [{"bucket": "data", "key": "checkpoints/r2/c/w", "size": 5,
                  "last_modified": hour(1), "prefix": "checkpoints/", "run_id": "r2"}]
    con = month_of(lines, [r1, r2], inventory)
    attribute(con)
    later = [dict(r1, end_time=hour(2)), r2]
    new_runs(con, later)
    # a mark on r2's sums: they are not summed again, so it stays
    con.execute("UPDATE attribution_runs SET rows = rows + 1000 WHERE run_id = 'r2'")
    done = attribute(con, **ANY_SHARE)
    assert (done.mode, done.changed_runs, done.lines_reattributed) == ("partial", 1, 2)
    assert con.execute("SELECT min(rows) >= 1000 FROM attribution_runs WHERE run_id = 'r2'"
                       ).fetchall() == [(True,)]
    con.execute("UPDATE attribution_runs SET rows = rows - 1000 WHERE run_id = 'r2'")
    assert_same_attribution(con, _whole(lines, later, inventory))


@pytest.mark.parametrize(("shares", "still_marked"), [
    (ANY_SHARE, [("r2", "compute"), ("r3", "compute")]),
    ({}, []),
])
def test_a_partial_re_run_sums_again_the_rules_its_lines_have_rows_of(shares, still_marked):
    """r1 ends an hour earlier: i-a's line of hour 2 and the transfer line of hour 2 are
    attributed again. r2 reads ds1 from another region too: its share of that transfer line
    moves, so its transfer sums are summed again — not its compute sums, on i-b's lines,
    whose rows did not change; nor r3's, which has no row on those lines. At the default
    shares those (run, rule) pairs — r1's compute and transfer rows, r2's transfer rows, the
    untracked rows of i-a — are four of the month's six, more than `RESUM_MAX_SHARE`, so
    every run's sums are written again, r3's too (filtering the rows by so many pairs costs
    more than summing them all). The sums are the same either way."""
    lines = gpu_lines(("i-a", "i-b", "i-c"), range(4), 8.0)
    lines.append({"x_SourceLine": "pull-2", "ResourceId": "data", "x_CostComponent": "network",
                  "x_AcceleratorCount": 0, "x_UsageHours": None, "x_InstanceUsage": False,
                  "x_ResourceKind": "bucket", "ChargeCategory": "Usage", "EffectiveCost": 8.0,
                  "ChargePeriodStart": hour(2), "ChargePeriodEnd": hour(3)})
    r1 = {**BASE_RUN, "end_time": hour(3)}
    r2 = {**SECOND_RUN, "end_time": hour(4), "region": "us-east-1", "dataset": "ds1"}
    r3 = {**SECOND_RUN, "run_id": "r3", "end_time": hour(4), "resource_ids": ["i-c"]}
    con = month_of(lines, [r1, r2, r3], [])
    attribute(con)
    later = [dict(r1, end_time=hour(2)), r2, r3]
    new_runs(con, later)
    con.execute("UPDATE attribution_runs SET rows = rows + 1000")  # a mark on every sum
    done = attribute(con, **shares)
    assert (done.mode, done.changed_runs, done.lines_reattributed) == ("partial", 1, 2)
    marked = con.execute("SELECT coalesce(run_id, '-'), rule FROM attribution_runs "
                         "WHERE rows >= 1000 ORDER BY ALL").fetchall()
    assert marked == still_marked
    con.execute("UPDATE attribution_runs SET rows = rows - 1000 WHERE rows >= 1000")
    assert_same_attribution(con, _whole(lines, later, []))


BASE_RUN = {**RUN_DEFAULTS, "run_id": "r1", "status": "FINISHED", "start_time": hour(0),
            "end_time": hour(3), "resource_ids": ["i-a"], "gpus": 4, "region": "us-east-1",
            "dataset": "ds1"}
SECOND_RUN = {**RUN_DEFAULTS, "run_id": "r2", "status": "FINISHED", "start_time": hour(0),
              "end_time": hour(3), "resource_ids": ["i-b"]}


@pytest.mark.parametrize("change", [
    {"end_time": hour(2)}, {"start_time": hour(1)}, {"gpus": 8}, {"resource_ids": ["i-b"]},
    {"purpose": "production"}, {"search_id": "s1"}, {"status": "RUNNING"},
    {"region": "us-west-2"}, {"dataset": None}, "r2's parent", "dropped", "added"])
@pytest.mark.parametrize("share", [PARTIAL_MAX_SHARE, 1.0])
def test_every_change_the_rows_read_attributes_the_month_again(change, share):
    lines = gpu_lines(("i-a", "i-b"), range(4), 8.0)
    lines.append({"x_SourceLine": "pull", "ResourceId": "data", "x_CostComponent": "network",
                  "x_ResourceKind": "bucket", "ChargeCategory": "Usage", "EffectiveCost": 3.0,
                  "ChargePeriodStart": hour(1), "ChargePeriodEnd": hour(2)})
    runs = [BASE_RUN, SECOND_RUN]
    if change == "r2's parent":
        later = [BASE_RUN, dict(SECOND_RUN, parent_run_id="r1")]  # r1 becomes a sweep parent
    elif change == "dropped":
        later = [SECOND_RUN]
    elif change == "added":
        later = [*runs, dict(SECOND_RUN, run_id="r3")]
    else:
        later = [dict(BASE_RUN, **change), SECOND_RUN]
    con = month_of(lines, runs, [])
    attribute(con)
    new_runs(con, later)
    done = attribute(con, partial_max_share=share)
    # a run's 4 lines of 9 are more than the default share: the month whole, else its lines;
    # a window that moved (ended earlier, started later, running again: to the month's end)
    # redoes the one line of i-a its moved end meets
    moved = isinstance(change, dict) and set(change) <= {"start_time", "end_time", "status"}
    assert done.mode == ("full" if share < 1 and not moved else "partial")
    assert done.changed_runs >= 1
    if moved:
        assert done.lines_reattributed == 1
    whole = month_of(lines, later, [])
    build_attribution(whole, MONTH, PARAMS, DATASET_ROWS)
    assert_same_attribution(con, whole)


@pytest.mark.parametrize("change", ["bill", "listing", "run_tag", "per-run sums' SQL"])
def test_anything_but_the_runs_changed_attributes_the_month_whole(change, monkeypatch):
    line = {"x_SourceLine": "L1", "ResourceId": "i-a", "x_CostComponent": "gpu",
            "x_AcceleratorCount": 8, "x_UsageHours": 1.0, "x_InstanceUsage": True,
            "x_ResourceKind": "instance", "ChargeCategory": "Usage", "EffectiveCost": 10.0,
            "ChargePeriodStart": hour(1), "ChargePeriodEnd": hour(2)}
    run = {**RUN_DEFAULTS, "run_id": "r1", "status": "FINISHED", "start_time": hour(0),
           "end_time": hour(3), "resource_ids": ["i-a"]}
    obj = {"bucket": "ckpt", "key": "checkpoints/r1/c/w", "size": 5, "last_modified": hour(1),
           "prefix": "checkpoints/", "run_id": "r1"}
    con = month_of([line], [run], [obj])
    attribute(con)
    params = PARAMS
    if change == "bill":  # a restated line: same id, another cost, in a new write
        con.execute("UPDATE billing_facts SET EffectiveCost = 12.0")
        bill_written(con)
    elif change == "listing":
        con.execute("UPDATE checkpoint_inventory SET size = 6")
    elif change == "run_tag":
        params = {**PARAMS, "run_tag": "owner"}
    else:  # a new version of attribution_runs.sql: the kept sums would be stale
        from cost_pipeline import attribution as module
        original = module.sql_text
        monkeypatch.setattr(module, "sql_text", lambda name: original(name) + (
            "\n-- changed" if name == "attribution_runs" else ""))
    new_runs(con, [run])  # the runs as they were
    done = build_attribution(con, MONTH, params, DATASET_ROWS, keep_unchanged=True)
    assert (done.mode, done.changed_runs) == ("full", 0)
    ((cost,),) = con.execute("SELECT sum(cost) FROM attribution").fetchall()
    assert cost == pytest.approx(12.0 if change == "bill" else 10.0)


def test_through_the_cli_an_unchanged_runs_file_keeps_the_rows_and_force_does_not(
        tmp_path, dagster_home):
    import csv
    import io
    import os

    import dagster as dg

    from cost_pipeline.cli.materialize import materialize_month
    from tests.ingest.test_bad_input_catalogue import JULY, RUNS, project

    def mode() -> tuple[str, int]:
        with dg.DagsterInstance.get() as instance:
            event = instance.get_latest_materialization_event(dg.AssetKey("attribution"))
        metadata = event.asset_materialization.metadata
        return metadata["mode"].value, metadata["changed_runs"].value

    def rows() -> list[tuple]:
        with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
            return con.execute(
                "SELECT x_SourceLine, run_id, purpose_class, round(cost, 9), round(share, 12) "
                "FROM attribution WHERE month = ? ORDER BY ALL", [JULY]).fetchall()

    def write_runs(runs) -> None:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, ["run_id", "status", "start_time", "end_time",
                                         "resource_ids", "gpus", "purpose", "model"],
                                lineterminator="\n")
        writer.writeheader()
        writer.writerows(runs)
        (tmp_path / "runs.csv").write_text(buffer.getvalue(), encoding="utf-8")

    config = str(project(tmp_path))
    assert materialize_month(config, JULY, progress=False).success
    assert mode() == ("full", 0)
    first = rows()
    # the same runs delivered again: tracker_runs is read again, the attribution kept
    write_runs(RUNS)
    os.utime(tmp_path / "runs.csv", (1e9, 2e9))
    assert materialize_month(config, JULY, progress=False).success
    assert mode() == ("kept", 0)
    assert rows() == first
    # a later runs file: r-noend has ended after all
    write_runs([dict(r, end_time="2026-07-01T01:00:00Z") if r["run_id"] == "r-noend"
                else r for r in RUNS])
    assert materialize_month(config, JULY, progress=False).success
    assert mode() == ("partial", 1)  # r-noend's lines attributed again, the rest kept
    changed = rows()
    assert changed != first and any(run == "r-noend" for _, run, *_ in changed)
    assert materialize_month(config, JULY, progress=False, force=True).success
    assert mode() == ("full", 0)
    assert rows() == changed



# a bucket two inventory configurations report (sources `a` and `b`): `a`, the day before,
# lists r1's checkpoint at 10 bytes and a dataset file at 5; `b`, on the line's day, the
# same checkpoint key alone at 5 (rewritten since). A key is in the bucket as the newest
# report among the configurations covering it lists it (macros.sql `configured_snapshot`;
# `b` covers at least the keys starting with the one it listed): the bucket holds 10 bytes,
# r1's 5, so r1 takes half of the $12 storage line
CHECKPOINT, DATASET = "checkpoints/r1/c1/w", "datasets/d/part-"
TWO_CONFIGURATIONS = [("a", CHECKPOINT, 10, 1), ("a", DATASET + "0", 5, 1),
                      ("b", CHECKPOINT, 5, 0)]


def storage_line_and_run() -> tuple[dict, dict]:
    """A $12 storage line of bucket `ckpt` in hour 2, and r1, which ran over hours 0-3."""
    line = {"x_SourceLine": "store", "ResourceId": "ckpt", "x_CostComponent": "storage",
            "x_ResourceKind": "bucket", "ChargeCategory": "Usage", "EffectiveCost": 12.0,
            "ChargePeriodStart": hour(2), "ChargePeriodEnd": hour(3)}
    run = {**RUN_DEFAULTS, "run_id": "r1", "status": "FINISHED", "start_time": hour(0),
           "end_time": hour(3)}
    return line, run


def listed(objects, day) -> list[dict]:
    """(source, key, size[, days before `day`]) objects of bucket `ckpt`, r1's under its
    prefix."""
    return [{"bucket": "ckpt", "source": source, "key": key, "size": size,
             "snapshot_date": day - timedelta(days=before), "last_modified": hour(1),
             **({"prefix": "checkpoints/", "run_id": "r1"} if key == CHECKPOINT else {})}
            for source, key, size, *rest in objects for before in [rest[0] if rest else 0]]


def r1_storage_cost(con) -> list[tuple]:
    return con.execute("SELECT run_id, sum(cost) FROM attribution WHERE run_id = 'r1' "
                       "GROUP BY ALL").fetchall()


@pytest.mark.parametrize(("change", "r1_cost"), [
    # b's copy now under another key, which b covers and a's copy is not under: three
    # objects, 20 bytes, r1's 15 (b's row keeps its run) → $9.00
    ("key", 9.0),
    # the same, under a key of the same DuckDB hash() (test_token_texts.py `twin`)
    ("key's twin", 9.0),
    # b's object now read as a's: a's latest report is the day before, b's lists nothing
    # and covers no key: 15 bytes, r1's 10 → $8.00
    ("object's source", 8.0),
    # the reports now of one configuration: the bucket is read as one listing, the line's
    # day's report alone (b's 5 bytes, r1's) → $12.00
    ("one configuration", 12.0),
])
def test_a_listing_changed_only_where_rule_4_dedupes_a_key_attributes_the_month_again(
        change, r1_cost):
    """Rule 4 reads a bucket that several configurations report key by key, each key from
    the newest report covering it: the objects' `key` and `source` and the reports'
    `source` decide its bytes as much as their sizes do. A listing changed only there is a
    changed listing."""
    day = hour(2).date()
    line, run = storage_line_and_run()
    con = month_of([line], [run], listed(TWO_CONFIGURATIONS, day))
    for source, before in (("a", 1), ("b", 0)):
        con.execute("INSERT INTO checkpoint_snapshots VALUES (?, ?, 'ckpt', ?)",
                    [MONTH, source, day - timedelta(days=before)])
    assert attribute(con).mode == "full"
    assert r1_storage_cost(con) == [("r1", pytest.approx(6.0))]
    assert attribute(con).mode == "kept"  # the same listing read again
    if change.startswith("key"):
        key = "checkpoints/r1/c2/w" if change == "key" else twin(CHECKPOINT)
        con.execute("UPDATE checkpoint_inventory SET key = ? WHERE source = 'b' AND key = ?",
                    [key, CHECKPOINT])
    elif change == "object's source":
        con.execute("UPDATE checkpoint_inventory SET source = 'a' WHERE source = 'b'")
    else:
        con.execute("UPDATE checkpoint_snapshots SET source = 'a'")
    done = attribute(con)
    assert (done.mode, done.changed_runs) == ("full", 0)
    assert r1_storage_cost(con) == [("r1", pytest.approx(r1_cost))]
    # what `--force` writes
    assert build_attribution(con, MONTH, PARAMS, DATASET_ROWS).mode == "full"
    assert r1_storage_cost(con) == [("r1", pytest.approx(r1_cost))]
    assert attribute(con).mode == "kept"


def test_an_undated_listing_changed_only_in_a_key_attributes_the_month_again():
    """A bucket a dated report (`a`: r1's checkpoint, 10 bytes, on the line's day) and an
    undated listing (`u`: a dataset file, 10 bytes) both list holds the undated objects
    whose keys no dated configuration covers (macros.sql `undated_uncovered`): 20 bytes, r1
    takes half of the $12 line. The undated object renamed to the key `a` lists is read from
    `a`'s report alone: 10 bytes, all r1's, $12.00. Its key decides the bucket's bytes: a
    listing changed only there is a changed listing."""
    day = hour(2).date()
    line, run = storage_line_and_run()
    con = month_of([line], [run], [
        *listed([("a", CHECKPOINT, 10)], day),
        {"bucket": "ckpt", "source": "u", "key": DATASET + "0", "size": 10,
         "snapshot_date": None, "last_modified": hour(1)}])
    assert attribute(con).mode == "full"
    assert r1_storage_cost(con) == [("r1", pytest.approx(6.0))]
    assert attribute(con).mode == "kept"
    con.execute("UPDATE checkpoint_inventory SET key = ? WHERE source = 'u'", [CHECKPOINT])
    done = attribute(con)
    assert (done.mode, done.changed_runs) == ("full", 0)
    assert r1_storage_cost(con) == [("r1", pytest.approx(12.0))]
    assert build_attribution(con, MONTH, PARAMS, DATASET_ROWS).mode == "full"
    assert r1_storage_cost(con) == [("r1", pytest.approx(12.0))]
    assert attribute(con).mode == "kept"


def test_a_bucket_of_one_listing_keeps_its_rows_when_only_keys_change():
    """A bucket one configuration (or one plain listing) reports is summed row by row
    (attribution_storage.sql): its keys and source are not read, so objects renamed alone
    keep the month's rows — they are what `--force` writes."""
    day = hour(2).date()
    line, run = storage_line_and_run()
    # r1's 10 bytes of 20 → $6.00
    con = month_of([line], [run], listed([("a", CHECKPOINT, 10), ("a", DATASET + "0", 10)],
                                         day))
    attribute(con)
    con.execute("UPDATE checkpoint_inventory SET key = key || '.renamed', source = 'c'")
    assert attribute(con).mode == "kept"
    assert r1_storage_cost(con) == [("r1", pytest.approx(6.0))]
    assert build_attribution(con, MONTH, PARAMS, DATASET_ROWS).mode == "full"
    assert r1_storage_cost(con) == [("r1", pytest.approx(6.0))]


@pytest.mark.parametrize("failing", ["attribution_storage", "attribution"])
def test_a_failed_statement_in_a_runs_transaction_is_raised_as_itself(monkeypatch, failing):
    """A statement that fails inside a run's transaction aborts it. The cleanup asked by a
    query whether it ran in a run's transaction, which DuckDB refused ("Current transaction is
    aborted"): that error took the statement's place, and a Ctrl-C or SIGTERM while the
    attribution's queries ran ("Query interrupted") ended the command as an error, exit 1 —
    not as an interrupt, exit 130."""
    import cost_pipeline.attribution as attribution
    from cost_pipeline.warehouse import begin_run_transaction, transaction_aborted

    line, run = storage_line_and_run()
    con = month_of([line], [run], [])
    begin_run_transaction(con)
    sql_text = attribution.sql_text
    monkeypatch.setattr(attribution, "sql_text", lambda name: (
        "SELECT * FROM no_such_table" if name == failing else sql_text(name)))
    with pytest.raises(duckdb.CatalogException, match="no_such_table"):
        build_attribution(con, MONTH, PARAMS, DATASET_ROWS)
    assert transaction_aborted(con)  # left for the run's rollback
    con.execute("ROLLBACK")
