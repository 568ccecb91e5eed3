"""FOCUS files as the providers deliver them (SPEC §3, §5, §12): an export that keeps every
run of a month beside the others (Azure without "Overwrite data", AWS Data Exports with a
manifest a month) is read as its current delivery only, and FOCUS 1.0-preview's and Azure's
own spellings (PricingCategory `Spot`, ChargeSubcategory `Unused Commitment`, `x_InvoiceId`)
mean what FOCUS 1.0's do."""

from __future__ import annotations

import json
import logging
import os
import shutil
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from cost_pipeline.attribution import build_attribution
from cost_pipeline.config import parse_config
from cost_pipeline.ingest.billing import build_billing_facts
from cost_pipeline.ingest.sources import SourceError
from cost_pipeline.report.data import bridge
from cost_pipeline.report.render import bridge_rows
from cost_pipeline.warehouse import month_params, replace_month, sql_text
from tests.ingest.test_focus_source import COLUMNS, MAY, load, row, vm, write_csv
from tests.support.s3_server import new_bucket, put

LOG = logging.getLogger("test")
AZURE_COLUMNS = tuple(c for c in COLUMNS if c not in ("InvoiceId", "ChargeClass",
                                                      "CommitmentDiscountStatus"))


@pytest.fixture
def con():
    connection = duckdb.connect()
    yield connection
    connection.close()


def day(d: int, cost: float = 100.0) -> dict:
    """One VM-day of May as Azure's daily export writes it."""
    return vm(f"day{d}", "Standard_NC24ads_A100_v4", hours=24.0, cost=cost,
              ProviderName="Microsoft", ChargePeriodStart=f"2026-05-{d:02d}T00:00:00Z",
              ChargePeriodEnd=f"2026-05-{d + 1:02d}T00:00:00Z")


def azure_run(folder: Path, run_id: str, rows: list[dict], submitted: str | None,
              modified: float | None = None) -> None:
    """An Azure Cost Management export run: `<date range>/<runId>/part_0_0001.csv` and its
    manifest.json, as the export writes them (the fields a reader uses)."""
    part = write_csv(folder / run_id / "part_0_0001.csv", rows, AZURE_COLUMNS)
    info = {"executionType": "Scheduled", "runId": run_id, "startDate": "2026-05-01T00:00:00",
            "endDate": "2026-05-31T00:00:00"}
    if submitted:
        info["submittedTime"] = submitted
    manifest = folder / run_id / "manifest.json"
    manifest.write_text(json.dumps({
        "manifestVersion": "2024-04-01", "byteCount": part.stat().st_size, "blobCount": 1,
        "exportConfig": {"exportName": folder.parent.name, "type": "FocusCost",
                         "dataVersion": "1.0", "timeFrame": "MonthToDate"},
        "deliveryConfig": {"dataOverwriteBehavior": "CreateNewReport", "fileFormat": "Csv"},
        "runInfo": info,
        "blobs": [{"blobName": f"exports/{folder.parent.name}/{folder.name}/{run_id}/"
                               "part_0_0001.csv", "byteCount": part.stat().st_size}]}))
    if modified is not None:
        for file in (part, manifest):
            os.utime(file, (modified, modified))


def month_lines(con) -> tuple[int, float, list[str]]:
    count, cost = con.execute("SELECT count(*), sum(EffectiveCost) FROM billing_facts "
                              "WHERE month = ?", [MAY]).fetchone()
    files = con.execute("SELECT DISTINCT x_SourceLine.split(':')[2] FROM billing_facts "
                        "WHERE month = ? ORDER BY 1", [MAY]).fetchall()
    return count, cost, [f[0] for f in files]


def azure_export(root: Path, by: str) -> None:
    """Two runs of May (the newer one by `by`, its folder first by name), and one run of
    another export."""
    may = root / "ml-focus-daily" / "20260501-20260531"
    if by == "submittedTime":
        azure_run(may, "f1e2-run-of-05-03", [day(1), day(2)], "2026-05-03T06:12:40.1234567Z")
        azure_run(may, "0a1b-run-of-05-04", [day(1), day(2), day(3)],
                  "2026-05-04T06:10:02.7654321Z")
    else:  # no submittedTime: the files' modification times
        now = datetime(2026, 5, 4, 6, tzinfo=UTC).timestamp()
        azure_run(may, "f1e2-run-of-05-03", [day(1), day(2)], None, now - 86_400)
        azure_run(may, "0a1b-run-of-05-04", [day(1), day(2), day(3)], None, now)
    azure_run(root / "ml-focus-other" / "20260501-20260531", "77aa-run",
              [day(4, cost=5.0)], "2026-05-02T06:00:00Z")


@pytest.mark.parametrize("by", ["submittedTime", "modification time"])
def test_an_azure_export_keeping_its_runs_is_read_as_its_newest_run(con, tmp_path, caplog, by):
    # Azure's export without "Overwrite data" writes the month to date again every day,
    # each run in a folder of its own: every run read counted May 1st and 2nd twice
    azure_export(tmp_path / "focus", by)
    with caplog.at_level(logging.INFO, logger=LOG.name):
        load(con, tmp_path / "focus")
    assert month_lines(con) == (4, 305.0, [
        "ml-focus-daily/20260501-20260531/0a1b-run-of-05-04/part_0_0001.csv",
        "ml-focus-other/20260501-20260531/77aa-run/part_0_0001.csv"])
    when = ("submitted 2026-05-03T06:12:40Z) superseded by run 0a1b-run-of-05-04 (submitted "
            "2026-05-04T06:10:02Z)" if by == "submittedTime" else
            "no submittedTime; files modified up to 2026-05-03T06:00:00Z) superseded by run "
            "0a1b-run-of-05-04 (no submittedTime; files modified up to 2026-05-04T06:00:00Z)")
    assert (f"focus: {tmp_path / 'focus' / 'ml-focus-daily' / '20260501-20260531'}: export "
            f"run f1e2-run-of-05-03 ({when}: its 1 file(s) not read") in caplog.text


def test_an_azure_run_still_being_written_is_not_read(con, tmp_path, caplog):
    # Azure writes a run's manifest last: a newer run folder without one is a run still being
    # written, and read as the newest (its files' times) it made the month its part files
    may = tmp_path / "focus" / "ml-focus-daily" / "20260501-20260531"
    azure_run(may, "f1e2-run-of-05-03", [day(1), day(2)], "2026-05-03T06:12:40Z")
    write_csv(may / "9f9f-run-in-progress" / "part_0_0001.csv", [day(1)], AZURE_COLUMNS)
    with caplog.at_level(logging.INFO, logger=LOG.name):
        load(con, tmp_path / "focus")
    assert month_lines(con)[:2] == (2, 200.0)
    assert "9f9f-run-in-progress has no manifest.json (a run still being written)" in caplog.text


def test_one_azure_run_or_other_folders_are_read_whole(con, tmp_path):
    # the path naming one run's folder reads it; folders without an Azure manifest (another
    # tool's manifest.json) read every file below them, as before
    may = tmp_path / "focus" / "ml-focus-daily" / "20260501-20260531"
    azure_run(may, "f1e2-run-of-05-03", [day(1), day(2)], "2026-05-03T06:12:40Z")
    azure_run(may, "0a1b-run-of-05-04", [day(1), day(2), day(3)], "2026-05-04T06:10:02Z")
    load(con, may / "f1e2-run-of-05-03")
    assert month_lines(con)[:2] == (2, 200.0)
    other = tmp_path / "other"
    write_csv(other / "a" / "part.csv", [day(1)])
    write_csv(other / "b" / "part.csv", [day(2)])
    (other / "a" / "manifest.json").write_text(json.dumps({"files": ["part.csv"]}))
    load(con, other)
    assert month_lines(con)[:2] == (2, 200.0)


def aws_export(root: Path) -> None:
    """An AWS Data Exports FOCUS export that keeps its deliveries (CREATE_NEW_REPORT): two
    deliveries of May, the month's newest manifest listing the second."""
    export = root / "ml-focus-export"
    month = "BILLING_PERIOD=2026-05"
    older = datetime(2026, 5, 4, 3, tzinfo=UTC).timestamp()
    for n, (execution, rows) in enumerate((("20260504T0312Z-e1", [day(1), day(2)]),
                                           ("20260505T0310Z-e2", [day(1), day(2), day(3)]))):
        name = f"data/{month}/{execution}/ml-focus-export-00001.csv"
        write_csv(export / name, rows, AZURE_COLUMNS)
        manifest = export / "metadata" / month / execution / "ml-focus-export-Manifest.json"
        manifest.parent.mkdir(parents=True)
        manifest.write_text(json.dumps({
            "executionId": execution, "dataFiles": [f"s3://billing/focus/ml-focus-export/{name}"],
            "tableConfigurations": {"FOCUS_1_0_AWS": {}}}))
        os.utime(manifest, (older + n * 86_400, older + n * 86_400))


def test_an_aws_focus_export_is_read_as_its_manifest_lists(con, tmp_path, caplog):
    aws_export(tmp_path / "focus")
    with caplog.at_level(logging.INFO, logger=LOG.name):
        load(con, tmp_path / "focus")
    assert month_lines(con) == (3, 300.0, [
        "ml-focus-export/data/BILLING_PERIOD=2026-05/20260505T0310Z-e2/"
        "ml-focus-export-00001.csv"])
    assert ("BILLING_PERIOD=2026-05: 1 file(s) of earlier deliveries not read (the month's "
            "newest manifest lists 1)") in caplog.text


def test_deliveries_on_s3_are_read_as_the_local_copy(tmp_path, s3_server, con):
    local = tmp_path / "focus"
    azure_export(local, "submittedTime")
    aws_export(local)
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    for file in sorted(p for p in local.rglob("*") if p.is_file()):
        put(endpoint, bucket, f"exports/{file.relative_to(local)}", file.read_bytes())
    build_billing_facts(con, parse_config({"billing": [{
        "kind": "focus", "path": f"s3://{bucket}/exports", "endpoint_url": endpoint,
        "region": "us-east-1", "name": "focus"}]}, tmp_path), MAY, LOG)
    assert month_lines(con) == (7, 605.0, [
        "ml-focus-daily/20260501-20260531/0a1b-run-of-05-04/part_0_0001.csv",
        "ml-focus-export/data/BILLING_PERIOD=2026-05/20260505T0310Z-e2/"
        "ml-focus-export-00001.csv",
        "ml-focus-other/20260501-20260531/77aa-run/part_0_0001.csv"])


@pytest.mark.parametrize("inside", ["data", "data/BILLING_PERIOD=2026-05"])
def test_an_aws_focus_exports_data_folder_is_read_as_its_manifest_lists(con, tmp_path, caplog,
                                                                        inside):
    # the path at the export's data/ folder (or the month's folder in it) left the manifests
    # of metadata/ outside it: both deliveries were read, May 1st and 2nd counted twice
    # ($500.00 for the $300.00 of the newest delivery), and nothing said so
    aws_export(tmp_path / "focus")
    export = tmp_path / "focus" / "ml-focus-export"
    with caplog.at_level(logging.INFO, logger=LOG.name):
        load(con, export / inside)
    newest = "data/BILLING_PERIOD=2026-05/20260505T0310Z-e2/ml-focus-export-00001.csv"
    assert month_lines(con) == (3, 300.0, [newest.removeprefix(inside + "/")])
    assert (f"focus: {export}: BILLING_PERIOD=2026-05: 1 file(s) of earlier deliveries not "
            f"read (the month's newest manifest lists 1), e.g. {export / 'data'}/"
            "BILLING_PERIOD=2026-05/20260504T0312Z-e1/ml-focus-export-00001.csv") in caplog.text


@pytest.mark.parametrize("inside", ["", "data", "data/BILLING_PERIOD=2026-05"])
def test_two_aws_deliveries_without_their_manifests_are_refused(con, tmp_path, inside):
    # without the manifests nothing tells which execution folder is the month: read whole,
    # both deliveries were summed ($500.00 for $300.00)
    aws_export(tmp_path / "focus")
    export = tmp_path / "focus" / "ml-focus-export"
    shutil.rmtree(export / "metadata")
    with pytest.raises(SourceError) as error:
        load(con, export / inside if inside else export)
    assert error.value.where == str(export / "data" / "BILLING_PERIOD=2026-05")
    assert error.value.problem.startswith(
        "the month's files are in 2 execution folders (20260504T0312Z-e1, 20260505T0310Z-e2), "
        "deliveries of which the newest replaces the others, and no manifest of the month "
        "tells which is the newest: ")
    # from the root or from data/, the export's metadata/ was looked in and held no manifest
    # of the month: pointing path at the root (as the message from data/ said) changes nothing
    assert error.value.problem.endswith(
        f"{export / 'metadata'}/BILLING_PERIOD=2026-05/ holds none: copy the export with "
        "its metadata/ folder (its manifests pick the newest delivery), or keep only the "
        "newest execution folder")


def test_one_aws_delivery_without_its_manifest_is_read_whole(con, tmp_path):
    # one execution folder (or files beside none) is the month, as before; another month's
    # two deliveries do not refuse this one
    aws_export(tmp_path / "focus")
    export = tmp_path / "focus" / "ml-focus-export"
    shutil.rmtree(export / "metadata")
    shutil.rmtree(export / "data" / "BILLING_PERIOD=2026-05" / "20260504T0312Z-e1")
    june = {"BillingPeriodStart": "2026-06-01T00:00:00Z",
            "ChargePeriodStart": "2026-06-02T00:00:00Z", "ChargePeriodEnd": "2026-06-03T00:00:00Z"}
    for execution in ("20260602T0300Z-e3", "20260603T0300Z-e4"):
        write_csv(export / "data" / "BILLING_PERIOD=2026-06" / execution / "june.csv",
                  [day(2, cost=7.0) | june], AZURE_COLUMNS)
    load(con, export / "data")
    assert month_lines(con) == (3, 300.0, [
        "BILLING_PERIOD=2026-05/20260505T0310Z-e2/ml-focus-export-00001.csv"])


def test_an_aws_exports_data_prefix_on_s3_is_read_as_its_manifest_lists(tmp_path, s3_server,
                                                                          con, caplog):
    local = tmp_path / "focus"
    aws_export(local)
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    for file in sorted(p for p in local.rglob("*") if p.is_file()):
        put(endpoint, bucket, f"exports/{file.relative_to(local)}", file.read_bytes())

    def build(path: str) -> None:
        build_billing_facts(con, parse_config({"billing": [{
            "kind": "focus", "path": path, "endpoint_url": endpoint, "region": "us-east-1",
            "name": "focus"}]}, tmp_path), MAY, LOG)

    export = f"s3://{bucket}/exports/ml-focus-export"
    with caplog.at_level(logging.INFO, logger=LOG.name):
        build(f"{export}/data/")
    assert month_lines(con) == (3, 300.0, [
        "BILLING_PERIOD=2026-05/20260505T0310Z-e2/ml-focus-export-00001.csv"])
    assert (f"focus: {export}: BILLING_PERIOD=2026-05: 1 file(s) of earlier deliveries not "
            "read") in caplog.text
    # the same files without the manifests: refused, not summed
    other = f"s3://{bucket}/copy/ml-focus-export"
    for file in sorted(p for p in (local / "ml-focus-export" / "data").rglob("*")
                       if p.is_file()):
        put(endpoint, bucket, f"copy/ml-focus-export/{file.relative_to(local / 'ml-focus-export')}",
            file.read_bytes())
    with pytest.raises(SourceError) as error:
        build(f"{other}/data/BILLING_PERIOD=2026-05/")
    assert error.value.where == f"{other}/data/BILLING_PERIOD=2026-05"
    assert "2 execution folders (20260504T0312Z-e1, 20260505T0310Z-e2)" in error.value.problem
    assert f"{other}/metadata/BILLING_PERIOD=2026-05/ holds none" in error.value.problem


def test_focus_preview_pricing_categories_read_as_focus_1_0s(con, tmp_path):
    # FOCUS 1.0-preview (Azure's "FOCUS 1.0-preview" export) names them On-Demand, Spot and
    # Commitment-Based: all were `other`, so no spot VM was spot
    categories = {"spot": "Spot", "on-demand": "On-Demand", "commitment": "Commitment-Based",
                  "dynamic": "Dynamic", "standard": "standard", "committed": "Committed",
                  "other": "Other", "none": ""}
    rows = [vm(name, "Standard_NC24ads_A100_v4", PricingCategory=value)
            for name, value in categories.items()]
    facts = load(con, write_csv(tmp_path / "f" / "may.csv", rows,
                                COLUMNS + ("PricingCategory",)))
    assert {k: f["x_PricingCategory"] for k, f in facts.items()} == {
        "spot": "spot", "on-demand": "on_demand", "commitment": "committed",
        "dynamic": "spot", "standard": "on_demand", "committed": "committed",
        "other": "other", "none": "other"}


def test_azure_x_invoice_id_is_the_invoice_where_invoice_id_is_absent(con, tmp_path):
    # Azure's FOCUS 1.0 export writes the invoice in x_InvoiceId (InvoiceId is FOCUS 1.2's):
    # unread, an invoiced Azure month stayed provisional
    rows = [vm("a", "Standard_D4s_v5", x_InvoiceId="G052317890"), vm("b", "Standard_D4s_v5")]
    facts = load(con, write_csv(tmp_path / "f" / "may.csv", rows,
                                AZURE_COLUMNS + ("x_InvoiceId",)))
    assert {k: f["x_InvoiceId"] for k, f in facts.items()} == {"a": "G052317890", "b": None}
    # where a file has both, InvoiceId is the invoice
    rows = [vm("a", "Standard_D4s_v5", InvoiceId="INV-7", x_InvoiceId="G052317890"),
            vm("b", "Standard_D4s_v5", InvoiceId="", x_InvoiceId="G052317890")]
    facts = load(con, write_csv(tmp_path / "g" / "may.csv", rows, COLUMNS + ("x_InvoiceId",)))
    assert {k: f["x_InvoiceId"] for k, f in facts.items()} == {"a": "INV-7", "b": "G052317890"}


def test_focus_preview_charge_subcategory_says_commitment_and_correction(con, tmp_path):
    # FOCUS 1.0-preview has no CommitmentDiscountStatus nor ChargeClass: an unused
    # reservation (a Usage row of the reservation's VM size) was a VM's usage, its idle hours
    # billed GPU-hours and its cost untracked compute
    april = {"ChargePeriodStart": "2026-04-20T00:00:00Z", "ChargePeriodEnd": "2026-04-21T00:00:00Z"}
    rows = [
        vm("used", "Standard_NC24ads_A100_v4", hours=14.0, cost=30.8,
           ChargeSubcategory="Used Commitment"),
        vm("unused", "Standard_NC24ads_A100_v4", hours=10.0, cost=22.0,
           ResourceId="/providers/microsoft.capacity/reservationorders/ro-1/reservations/r-1",
           ChargeSubcategory="unused commitment"),
        vm("on-demand", "Standard_NC24ads_A100_v4", ChargeSubcategory="On-Demand"),
        row("refund-april", -3.0, ChargeCategory="Adjustment", ChargeSubcategory="Refund",
            **april),
        row("refund-may", -2.0, ChargeCategory="Adjustment", ChargeSubcategory="Refund"),
    ]
    facts = load(con, write_csv(tmp_path / "f" / "may.csv", rows,
                                AZURE_COLUMNS + ("ChargeSubcategory",)))
    got = {k: (f["CommitmentDiscountStatus"], f["ChargeClass"], f["x_UsageHours"],
               f["x_CostComponent"]) for k, f in facts.items()}
    assert got == {"used": ("Used", None, 14.0, "gpu"), "unused": ("Unused", None, None, "other"),
                   "on-demand": (None, None, 1.0, "gpu"),
                   "refund-april": (None, "Correction", None, "other"),
                   "refund-may": (None, None, None, "other")}
    build_attribution(con, MAY, month_params(parse_config({}, tmp_path), MAY))
    kinds = dict(con.execute(
        "SELECT b.SkuId, (a.purpose_class, a.kind, a.cost) FROM attribution a "
        "JOIN billing_facts b USING (month, x_SourceLine) WHERE a.run_id IS NULL").fetchall())
    assert kinds["unused"] == ("unallocated", "unused_commitment", 22.0)
    assert kinds["refund-april"] == ("unallocated", "correction", -3.0)


def test_a_reservations_amortization_is_named_in_the_bridge(con, tmp_path):
    # every FOCUS Usage row was the line item type `Usage`: a reservation's covered hours
    # (0 billed, 800 amortized) and its unused hours (0 / 1,120) read "On-demand usage
    # +EUR 1,920.00" over 9 lines, where the seven on-demand rows move nothing
    eur = {"ProviderName": "Microsoft", "BillingCurrency": "EUR"}
    reservation = "/providers/microsoft.capacity/reservationorders/o1/reservations/rz"
    commitment = {"BilledCost": 0.0, "CommitmentDiscountCategory": "Usage",
                  "CommitmentDiscountId": reservation, **eur}
    rows = [vm(f"on-demand-{n}", "Standard_NC24ads_A100_v4", hours=2.0, cost=10.0, **eur)
            for n in range(7)]
    rows += [
        vm("covered", "Standard_ND96isr_H100_v5", hours=10.0, cost=800.0,
           CommitmentDiscountStatus="Used", **commitment),
        vm("unused", "Standard_ND96isr_H100_v5", hours=14.0, cost=1120.0, ResourceId=reservation,
           ResourceType="Reservation", CommitmentDiscountStatus="Unused", **commitment),
        row("refund", -500.0, EffectiveCost=0.0, ChargeCategory="Purchase",
            ChargeClass="Correction", ServiceName="Reservations", **eur),
    ]
    facts = load(con, write_csv(tmp_path / "f" / "may.csv", rows,
                                COLUMNS + ("CommitmentDiscountCategory", "CommitmentDiscountId")))
    assert {f["x_LineItemType"] for k, f in facts.items() if k.startswith("on-demand")} == {
        "Usage"}
    month = bridge(con, MAY)
    # invoice: 7 × 10 − 500 = −430; amortized: 70 + 800 + 1,120 + 0 = 1,990
    assert (month["start"], month["end"]) == (Decimal("-430"), Decimal("1990"))
    steps = [(s["item_type"], s["label"], s["lines"], s["shown"])
             for s in bridge_rows(month, "EUR ")]
    assert steps == [
        ("UnusedCommitment", "Commitment paid for but not used", 1, Decimal("1120.00")),
        ("DiscountedUsage", "Reserved-instance usage at its amortized rate", 1,
         Decimal("800.00")),
        ("Purchase", "Purchase", 1, Decimal("500.00"))]
    # the attribution is the reader's as before: the unused hours are unused commitment
    build_attribution(con, MAY, month_params(parse_config({}, tmp_path), MAY))
    kinds = dict(con.execute(
        "SELECT b.SkuId, (a.purpose_class, a.kind, a.cost) FROM attribution a "
        "JOIN billing_facts b USING (month, x_SourceLine) WHERE a.run_id IS NULL "
        "AND b.SkuId IN ('unused', 'refund')").fetchall())
    assert kinds == {"unused": ("unallocated", "unused_commitment", 1120.0),
                     "refund": ("unallocated", "correction", 0.0)}


def test_an_azure_gpu_vm_without_a_resource_id_keeps_its_gpu_hours(con, tmp_path):
    # Azure rows of N-series VMs whose ResourceId is empty were `other` with no hours: the
    # month billed none of their GPU-hours. A day of an NC24ads A100 v4 (1 GPU, the size
    # named by its meter) and an hour of an NC12s v3 (2 GPUs, named in SkuPriceDetails):
    # 24 × 1 + 1 × 2 = 26 GPU-hours, all untracked (no resource: only a tag can claim them)
    azure = {"ProviderName": "Microsoft", "ServiceName": "Virtual Machines",
             "x_SkuMeterCategory": "Virtual Machines", "ResourceId": "",
             "ConsumedUnit": "1 Hour"}
    rows = [vm("nc24-day", "", hours=24.0, cost=88.16, SkuPriceDetails="", ResourceType="",
               x_SkuMeterName="NC24ads A100 v4", ChargePeriodStart="2026-05-04T00:00:00Z",
               ChargePeriodEnd="2026-05-05T00:00:00Z", **azure),
            vm("nc12-hour", "Standard_NC12s_v3", cost=3.06, **azure)]
    facts = load(con, write_csv(tmp_path / "f" / "may.csv", rows,
                                AZURE_COLUMNS + ("x_SkuMeterName", "x_SkuMeterCategory")))
    got = {k: (f["x_CostComponent"], f["x_AcceleratorCount"], f["x_UsageHours"],
               f["x_InstanceType"], f["x_ResourceKind"]) for k, f in facts.items()}
    assert got == {"nc24-day": ("gpu", 1, 24.0, "Standard_NC24ads_A100_v4", "shared"),
                   "nc12-hour": ("gpu", 2, 1.0, "Standard_NC12s_v3", "shared")}
    params = month_params(parse_config({}, tmp_path), MAY)
    build_attribution(con, MAY, params)
    replace_month(con, "reconciliation", MAY, sql_text("reconciliation"), params)
    assert con.execute("SELECT billed_gpu_hours, untracked_share, status FROM reconciliation"
                       ).fetchone() == (pytest.approx(26.0), pytest.approx(1.0), "fail")
    assert con.execute("SELECT list(DISTINCT kind), sum(cost) FROM attribution").fetchone() == (
        ["shared"], pytest.approx(91.22))
