"""The bad-input catalogue (README "Bad input") through the real Dagster job: a messy but
valid month — duplicated line ids within and across files, negative usage, an unknown
instance type, claims over capacity, runs claiming resources the bill never shows, a failed
run with no end, time-zone offsets, a 3,000-tag map, SQL metacharacters and non-ASCII text
in tags, run ids and keys — materializes with each documented outcome and cost conserved;
a restated month replaces the old delivery; an empty month is zeros. Plus the outcomes of
non-UTF-8 bytes in each kind of source and the inputs read once per run."""

from __future__ import annotations

import csv
import io
import json
import os
from datetime import date, datetime, timedelta
from pathlib import Path

import dagster as dg
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from cost_pipeline.cli.materialize import materialize_month
from cost_pipeline.defs.assets import ingest
from cost_pipeline.ingest.sources import SourceError
from tests.support.cur_rows import (
    S3_EXPORT,
    T0,
    build,
    config,
    line,
    month_dir,
    write_export,
    write_manifest,
)

JULY, JUNE = date(2026, 7, 1), date(2026, 6, 1)
H = timedelta(hours=1)
# a run id, tag value and object key no query may mistake for SQL, in any script
EVIL_RUN = "r'); DROP TABLE attribution; --\"é☃%_\\"
EVIL_KEY = f"checkpoints/{EVIL_RUN}/step 1; DELETE FROM tracker_runs/model's.pt"
BIG_TAGS = {f"user_tag_{i:04d}": f"value {i} " + "x" * 200 for i in range(3000)}


def L(name: str, cost: float, **cols) -> dict:
    return line(cost, **{"identity_line_item_id": name, **cols})


def box(name: str, cost: float, resource: str, instance: str, at: datetime, **cols) -> dict:
    return L(name, cost, start=at, line_item_usage_type=f"BoxUsage:{instance}",
             line_item_resource_id=resource, product_instance_type=instance, **cols)


def july_lines() -> dict[str, list[dict]]:
    dup = L("dup", 1.5, start=T0 + 9 * H, line_item_resource_id="i-dup")
    a = [
        box("gpu", 32.0, "i-gpu", "p4d.24xlarge", T0),                 # two runs claim it all
        box("tagged", 5.0, "i-tag", "m5.large", T0 + 2 * H,
            resource_tags={**BIG_TAGS, "user_run_id": EVIL_RUN}),
        box("neg", -2.0, "i-neg", "m5.large", T0 + 4 * H, line_item_usage_amount=-1.0),
        box("unknown", 10.0, "i-unknown", "p9e.96xlarge", T0 + 5 * H),  # not in the table
        L("storage", 3.0, start=T0, hours=24, line_item_product_code="AmazonS3",
          line_item_usage_type="TimedStorage-ByteHrs", line_item_resource_id="ml-ckpt",
          product_product_family="Storage", line_item_usage_amount=100.0),
        dup, dict(dup),                                                  # within a file
    ]
    return {"a.parquet": a, "b.parquet": [dict(dup), L("b1", 2.0, start=T0 + 9 * H)]}


RUNS = [  # times with offsets: +02:00 and -05:00 are both 00:00-01:00 UTC
    {"run_id": "r-over-1", "status": "FINISHED", "start_time": "2026-07-01T02:00:00+02:00",
     "end_time": "2026-07-01T03:00:00+02:00", "resource_ids": "i-gpu"},
    {"run_id": "r-over-2", "status": "FINISHED", "start_time": "2026-06-30T19:00:00-05:00",
     "end_time": "2026-06-30T20:00:00-05:00", "resource_ids": "i-gpu"},
    {"run_id": EVIL_RUN, "status": "FINISHED", "start_time": "2026-07-01T02:00:00Z",
     "end_time": "2026-07-01T03:00:00Z", "purpose": "production", "model": "m'; --"},
    {"run_id": "r-neg", "status": "FINISHED", "start_time": "2026-07-01T04:00:00Z",
     "end_time": "2026-07-01T05:00:00Z", "resource_ids": "i-neg"},
    {"run_id": "r-ghost", "status": "FINISHED", "start_time": "2026-07-01T06:00:00Z",
     "end_time": "2026-07-01T08:00:00Z", "resource_ids": "i-never-billed", "gpus": "2"},
    {"run_id": "r-noend", "status": "FAILED", "start_time": "2026-07-01T00:00:00Z",
     "resource_ids": "i-gpu"},
]


def project(tmp_path: Path) -> Path:
    export = write_export(tmp_path, july_lines())
    buffer = io.StringIO()
    columns = ["run_id", "status", "start_time", "end_time", "resource_ids", "gpus",
               "purpose", "model"]
    writer = csv.DictWriter(buffer, columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(RUNS)
    (tmp_path / "runs.csv").write_text(buffer.getvalue(), encoding="utf-8")
    listing = io.StringIO()
    csv.writer(listing, lineterminator="\n").writerows([
        ["bucket", "key", "size", "last_modified"],
        ["ml-ckpt", EVIL_KEY, 600, "2026-07-01T03:00:00Z"],
        ["ml-ckpt", "other/x", 400, "2026-07-01T03:00:00Z"]])
    (tmp_path / "inventory.csv").write_text(listing.getvalue(), encoding="utf-8")
    doc = {"warehouse": {"path": "warehouse.duckdb"},
           "billing": [{"kind": "aws_cur2", "path": str(export)}],
           "tracker": [{"kind": "runs_file", "path": "runs.csv"}],
           "checkpoints": [{"kind": "inventory", "path": "inventory.csv",
                            "prefix": "checkpoints/", "bucket": "ml-ckpt"}]}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def rows(con, sql: str, *params) -> list[tuple]:
    return con.execute(sql, list(params)).fetchall()


def spy_reads(monkeypatch) -> list[str]:
    """The inputs the ingest step reads ("runs", "listing"; read side by side, so in either
    order)."""
    reads: list[str] = []
    runs, listing = ingest.runs_table, ingest.read_listing
    monkeypatch.setattr(ingest, "runs_table", lambda *a: reads.append("runs") or runs(*a))
    monkeypatch.setattr(ingest, "read_listing",
                        lambda *a: reads.append("listing") or listing(*a))
    return reads


def test_a_messy_month_has_its_documented_outcomes(tmp_path, dagster_home, monkeypatch):
    cfg_path = project(tmp_path)
    reads = spy_reads(monkeypatch)
    result = materialize_month(str(cfg_path), JULY, progress=False, force=True)
    assert result.success, result.error
    # the ingest step read (validated) the runs and the listing once, before writing
    assert sorted(reads) == ["listing", "runs"]
    checks = {(c.asset, c.name): c for c in result.checks}
    assert checks["attribution", "cost_conserved"].passed
    assert not checks["reconciliation", "tracker_claims_billed"].passed  # WARN: r-ghost
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        facts = dict(rows(con, "SELECT split_part(x_SourceLine, ':', 2), EffectiveCost "
                               "FROM billing_facts WHERE month = ?", JULY))
        # duplicates within and across files: counted once
        assert facts == {"gpu": 32.0, "tagged": 5.0, "neg": -2.0, "unknown": 10.0,
                         "storage": 3.0, "dup": 1.5, "b1": 2.0}
        # the 3,000-tag map is stored whole, metacharacters and all
        (tags,) = con.execute("SELECT Tags FROM billing_facts WHERE x_SourceLine LIKE "
                              "'%:tagged:%'").fetchone()
        assert tags == {**BIG_TAGS, "user_run_id": EVIL_RUN}
        # unknown instance type: a GPU type counted as one accelerator
        assert rows(con, "SELECT x_CostComponent, x_AcceleratorCount FROM billing_facts "
                         "WHERE x_InstanceType = 'p9e.96xlarge'") == [("gpu", 1)]
        cost = {(r, k): c for r, k, c in rows(
            con, "SELECT coalesce(run_id, purpose_class), split_part(x_SourceLine, ':', 2), "
                 "sum(cost) FROM attribution WHERE month = ? GROUP BY ALL", JULY)}
        # over capacity: two whole-instance claims, S = 2 → half each, nothing untracked
        assert cost["r-over-1", "gpu"] == cost["r-over-2", "gpu"] == pytest.approx(16.0)
        assert ("untracked", "gpu") not in cost
        # the tag names the run through every metacharacter; its bytes own the storage share
        assert cost[EVIL_RUN, "tagged"] == pytest.approx(5.0)
        assert cost[EVIL_RUN, "storage"] == pytest.approx(3.0 * 600 / 1000)
        # negative usage: the line's d ≤ 0 counts as the hour, the run carries the credit
        assert cost["r-neg", "neg"] == pytest.approx(-2.0)
        assert cost["untracked", "unknown"] == pytest.approx(10.0)
        assert not [k for k in cost if k[0] in ("r-noend", "r-ghost")]  # claim nothing
        assert sum(cost.values()) == pytest.approx(sum(facts.values()))
        (over, unbilled, no_end), = rows(
            con, "SELECT over_claimed_gpu_hours, unbilled_claim_gpu_hours, runs_without_end "
                 "FROM reconciliation WHERE month = ?", JULY)
        assert (over, unbilled, no_end) == (pytest.approx(8.0), pytest.approx(4.0), 1)
        # time-zone offsets are converted to UTC
        assert rows(con, "SELECT DISTINCT start_time FROM tracker_runs WHERE run_id LIKE "
                         "'r-over-%'") == [(datetime(2026, 7, 1),)]
        assert rows(con, "SELECT model FROM tracker_runs WHERE run_id = ?", EVIL_RUN) == [
            ("m'; --",)]
        assert rows(con, "SELECT key, run_id FROM checkpoint_inventory WHERE month = ? "
                         "AND run_id IS NOT NULL", JULY) == [(EVIL_KEY, EVIL_RUN)]
    with dg.DagsterInstance.get() as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey("billing_facts"))
        metadata = event.asset_materialization.metadata
    assert metadata["unknown_instance_types"].value == "p9e.96xlarge"
    assert metadata["duplicates_dropped"].value == 2

    # AWS restates the month: a new delivery replaces the old one, nothing counts twice
    export = tmp_path / "ml-cur"
    pq.write_table(pq.read_table(month_dir(export) / "b.parquet"),
                   month_dir(export) / "c.parquet")
    manifest = write_manifest(export, [f"{S3_EXPORT}/data/BILLING_PERIOD=2026-07/c.parquet"])
    later = manifest.stat().st_mtime + 10
    os.utime(manifest, (later, later))
    assert materialize_month(str(cfg_path), JULY, progress=False).success
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        assert rows(con, "SELECT sum(EffectiveCost) FROM billing_facts WHERE month = ?",
                    JULY) == [(3.5,)]
        assert rows(con, "SELECT sum(cost) FROM attribution WHERE month = ?", JULY) == [(3.5,)]


def test_an_empty_month_is_zeros_with_its_checks_passing(tmp_path, dagster_home):
    result = materialize_month(str(project(tmp_path)), JUNE, progress=False, force=True)
    assert result.success, result.error
    checks = {(c.asset, c.name): c.passed for c in result.checks}
    assert checks["attribution", "cost_conserved"]
    assert checks["reconciliation", "reconciliation_within_threshold"]
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        for table in ("billing_facts", "attribution", "untracked_usage"):
            assert rows(con, f"SELECT count(*) FROM {table} WHERE month = ?", JUNE) == [(0,)]
        assert rows(con, "SELECT billed_gpu_hours, untracked_share, status, "
                         "total_effective_cost FROM reconciliation WHERE month = ?",
                    JUNE) == [(0.0, 0.0, "pass", 0.0)]


def test_without_billing_facts_the_ingest_step_validates_its_inputs(tmp_path, dagster_home,
                                                                    monkeypatch):
    from cost_pipeline.definitions import JOB_NAME, build_defs

    job = build_defs(str(project(tmp_path))).resolve_job_def(JOB_NAME)
    (tmp_path / "runs.csv").write_text("run_id,status,start_time,end_time\n"
                                       "r1,FINISHED,2026-07-02,2026-07-01\n")
    reads = spy_reads(monkeypatch)
    with dg.instance_for_test() as instance:
        result = job.execute_in_process(
            partition_key="2026-07-01", instance=instance, raise_on_error=False,
            asset_selection=[dg.AssetKey("checkpoint_inventory"), dg.AssetKey("tracker_runs")])
        # the one step reads the runs file and the listing side by side and fails on the
        # runs file: checkpoint_inventory (whose own listing is fine) is not written either,
        # nor is anything else
        failed = {e.step_key for e in result.all_events if e.is_step_failure}
        assert failed == {"ingest"}
        assert sorted(reads) == ["listing", "runs"]
        assert "end_time" in str(result.failure_data_for_node("ingest").error)
        assert not result.get_asset_materialization_events()


@pytest.mark.parametrize(("listed", "problem"), [
    # an object listed twice by the one listing, with another size
    ([["ml-ckpt", EVIL_KEY, 600, "2026-07-01T03:00:00Z"], ["ml-ckpt", "other/x", 400,
      "2026-07-01T03:00:00Z"], ["ml-ckpt", "other/x", 500, "2026-07-01T03:00:00Z"]],
     "bucket ml-ckpt, key 'other/x': listed twice with different values: size 400 and 500"),
    # an object without its time
    ([["ml-ckpt", EVIL_KEY, 600, "2026-07-01T03:00:00Z"], ["ml-ckpt", "other/x", 400, ""]],
     "inventory.csv row 3: last_modified: empty: an object needs its time"),
])
def test_a_bad_listing_is_refused_before_any_table_is_written(tmp_path, dagster_home, listed,
                                                              problem):
    """The listing's checks are made as it is read (in the ingest step, beside the bill):
    a listing repeating an object with other values, or listing one without its time, fails
    the step before any of its tables — the bill's included — is written or reported."""
    from cost_pipeline.definitions import JOB_NAME, build_defs

    job = build_defs(str(project(tmp_path))).resolve_job_def(JOB_NAME)
    listing = io.StringIO()
    csv.writer(listing, lineterminator="\n").writerows(
        [["bucket", "key", "size", "last_modified"], *listed])
    (tmp_path / "inventory.csv").write_text(listing.getvalue(), encoding="utf-8")
    with dg.instance_for_test() as instance:
        result = job.execute_in_process(
            partition_key="2026-07-01", instance=instance, raise_on_error=False,
            asset_selection=[dg.AssetKey(name) for name in
                             ("billing_facts", "tracker_runs", "checkpoint_inventory")])
        assert {e.step_key for e in result.all_events if e.is_step_failure} == {"ingest"}
        assert problem in str(result.failure_data_for_node("ingest").error)
        assert not result.get_asset_materialization_events()


def test_a_bad_runs_file_is_named_before_a_bad_bill(tmp_path, dagster_home):
    # the runs file and the listing are read in threads while the bill loads; when the bill
    # and the runs file are both bad, the runs file's error is the one reported, as when the
    # inputs were read one after another, and the month is left as it was
    cfg_path = project(tmp_path)
    assert materialize_month(str(cfg_path), JULY, progress=False, force=True).success
    (tmp_path / "runs.csv").write_text("run_id,status,start_time,end_time\n"
                                       "r1,FINISHED,2026-07-02,2026-07-01\n")
    doc = yaml.safe_load(cfg_path.read_text())
    doc["billing"][0]["path"] = str(tmp_path / "no-such-export")
    cfg_path.write_text(yaml.safe_dump(doc))
    result = materialize_month(str(cfg_path), JULY, progress=False, force=True)
    assert not result.success
    assert "runs.csv row 2" in result.error and "end_time" in result.error
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        assert rows(con, "SELECT count(*) FROM tracker_runs WHERE month = ?", JULY) == [
            (len(RUNS),)]


def test_held_log_lines_are_written_in_order_after_the_bill():
    held, written = ingest.HeldLog(), []

    class Log:
        def info(self, message):
            written.append(("info", message))

        def warning(self, message):
            written.append(("warning", message))

    held.info("runs_file: %d run(s)", 3)
    held.warning("run r1 also comes from mlflow")
    assert written == []
    held.replay(Log())
    assert written == [("info", "runs_file: 3 run(s)"),
                       ("warning", "run r1 also comes from mlflow")]
    with pytest.raises(AttributeError):
        held.critical  # noqa: B018 - only the levels the readers use


# ------------------------------------------------------------------ non-UTF-8 bytes

def test_non_utf8_bytes_in_a_cur_file_name_the_file(tmp_path):
    export = write_export(tmp_path, {"x.parquet": [L("a", 1.0), L("b", 2.0)]})
    file = month_dir(export) / "x.parquet"
    table = pq.read_table(file)
    bad = pa.array([b"i-ok", b"i-caf\xe9"], pa.binary()).view(pa.string())
    pq.write_table(table.set_column(table.schema.get_field_index("line_item_resource_id"),
                                    "line_item_resource_id", bad), file)
    with duckdb.connect() as con, pytest.raises(SourceError) as caught:
        build(con, config(tmp_path, export))
    message = str(caught.value)
    assert message.startswith(f"aws_cur2: {file}") and "UTF8" in message and "\n" not in message


def test_non_unicode_text_in_a_runs_file_names_row_and_field(tmp_path):
    from cost_pipeline.ingest.sources.runs_file import read_runs

    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps({"run_id": "r1", "status": "FINISHED",
                                "start_time": "2026-07-01"}) + "\n"
                    + '{"run_id": "r\\udcff", "status": "FINISHED", "start_time": "2026-07-01"}'
                    + "\n", encoding="utf-8")
    with pytest.raises(SourceError) as caught:
        read_runs(path, "runs_file")
    assert str(caught.value).startswith(f"runs_file: {path} line 2: run_id: ")
    assert "not valid Unicode" in str(caught.value)


def test_a_non_utf8_file_name_in_a_local_bucket_is_named(tmp_path):
    from cost_pipeline.ingest.sources.listing_rows import walk_local

    folder = tmp_path / "bucket" / "checkpoints" / "r1"
    folder.mkdir(parents=True)
    (folder / "ok.pt").write_bytes(b"1")
    with open(os.fsencode(folder) + b"/caf\xe9.pt", "wb") as handle:
        handle.write(b"2")
    with pytest.raises(SourceError) as caught:
        list(walk_local(tmp_path / "bucket", "checkpoints[0] local", "b"))
    assert str(caught.value) == (f"checkpoints[0] local: {folder}/caf\\xe9.pt: the file name "
                                 "is not UTF-8 (an S3 key is UTF-8 text): rename it")


def test_non_utf8_bytes_in_a_focus_file_name_the_file(tmp_path):
    path = tmp_path / "focus.csv"
    path.write_bytes(b"ChargePeriodStart,ChargePeriodEnd,ChargeCategory,BilledCost,"
                     b"EffectiveCost,BillingCurrency,ResourceId\n"
                     b"2026-07-01T00:00:00Z,2026-07-01T01:00:00Z,Usage,1,1,USD,i-caf\xe9\n")
    cfg = config(tmp_path, None, billing=[{"kind": "focus", "path": str(path)}])
    with duckdb.connect() as con, pytest.raises(SourceError) as caught:
        build(con, cfg)
    assert str(caught.value).startswith(f"focus: {path}")
