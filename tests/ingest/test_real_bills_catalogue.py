"""Issue 16's defects found on public bills, each with a minimal file spelled as the real
export spells it: resource ids with blanks in a runs file, and bad values refused at their
source with the file, row and field named."""

from __future__ import annotations

import csv
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cost_pipeline.ingest.sources import SourceError
from cost_pipeline.ingest.sources.cur2 import widened_type
from cost_pipeline.ingest.sources.runs_file import read_runs
from cost_pipeline.ingest.sources.runs_file_sql import read_runs_table
from tests.support.cur_rows import (
    EXPORT,
    HOUR,
    T0,
    build,
    config,
    line,
    month_dir,
    write_maps_as,
    write_parquet,
)

# an Azure Monitor metric alert as Azure's cost export names it: the alert's name has a blank
AZURE_ALERT = ("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ml-rg/"
               "providers/microsoft.insights/metricAlerts/CPU Alert")


def runs_csv(path: Path, resource_ids: str, **more) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["run_id", "status", "start_time", "end_time", "resource_ids",
                         *more])
        writer.writerow(["r1", "FINISHED", "2026-07-01T00:00:00Z", "2026-07-01T02:00:00Z",
                         resource_ids, *more.values()])
    return path


def both_readers(path: Path) -> list[list[str]]:
    """resource_ids as the record-by-record and the vectorized readers give them (equal)."""
    slow = [r["resource_ids"] for r in read_runs(path, "runs")]
    fast = read_runs_table(path, "runs")["resource_ids"].to_pylist()
    assert slow == fast
    return slow


@pytest.mark.parametrize(("text", "ids"), [
    (AZURE_ALERT, [AZURE_ALERT]),                                    # kept whole
    (f"{AZURE_ALERT}; i-0a", [AZURE_ALERT, "i-0a"]),                 # the documented `;`
    (f" i-0a ,'{AZURE_ALERT}'", ["i-0a", AZURE_ALERT]),
    (f'["{AZURE_ALERT}", "vol-0b"]', [AZURE_ALERT, "vol-0b"]),       # a JSON list
    ("gke-pool|node 7", ["gke-pool|node 7"]),                        # `|` inside an id
    ("i-0a,i-0b", ["i-0a", "i-0b"]),
])
def test_resource_ids_split_only_on_comma_and_semicolon(tmp_path, text, ids):
    assert both_readers(runs_csv(tmp_path / "runs.csv", text)) == [ids]


@pytest.mark.parametrize("text", ["i-0a i-0b", "i-0a|vol-0b", "i-0a, i-0b i-0c",
                                  "arn:aws:sagemaker:us-east-1:1:training-job/a i-0b"])
def test_ids_run_together_are_ambiguous_and_named(tmp_path, text):
    path = runs_csv(tmp_path / "runs.csv", text)
    for reader in (read_runs, read_runs_table):
        with pytest.raises(SourceError) as error:
            reader(path, "runs")
        message = str(error.value)
        assert str(path) in message and "row 2" in message  # the line of the file
        assert "resource_ids" in message and "ambiguous" in message
        assert "','" in message and "JSON list" in message
        assert len(message.splitlines()) == 1


# ---------------------------------------------------------------- bad values at their source

def _one_line(error: SourceError, *parts: str) -> str:
    message = str(error)
    assert len(message.splitlines()) == 1, message
    for part in parts:
        assert part.lower() in message.lower(), (part, message)
    return message


@pytest.mark.parametrize(("column", "value"), [
    ("line_item_unblended_cost", float("inf")),
    ("line_item_unblended_cost", float("nan")),
    ("line_item_unblended_cost", 1e30),
    ("line_item_net_unblended_cost", float("-inf")),
    ("line_item_usage_amount", float("nan")),     # the report printed "nan" hours
])
def test_cur_amounts_that_are_not_finite_are_refused_with_file_row_and_column(
        tmp_path, column, value):
    import duckdb

    from tests.support.cur_rows import T0, build, config, line, write_export

    good = line(2.0, identity_line_item_id="ok")
    bad = line(1.0, start=T0.replace(hour=3), identity_line_item_id="bad", **{column: value})
    export = write_export(tmp_path, {"part-0.parquet": [good, bad]})
    with duckdb.connect() as con:
        with pytest.raises(SourceError) as error:
            build(con, config(tmp_path, export))
        _one_line(error.value, "part-0.parquet row 2", column, "finite")
        assert con.execute("SELECT count(*) FROM billing_facts").fetchone()[0] == 0


@pytest.mark.parametrize(("column", "value"), [
    ("BilledCost", "inf"), ("EffectiveCost", "NaN"), ("EffectiveCost", "1e30"),
    ("ConsumedQuantity", "NaN"), ("ConsumedQuantity", "-Infinity"),
])
def test_focus_amounts_that_are_not_finite_are_refused_with_file_row_and_column(
        tmp_path, column, value):
    import duckdb

    from tests.ingest.test_focus_source import load, vm, write_csv

    rows = [vm("ok", "m6i.large"), vm("bad", "g5.4xlarge", **{column: value})]
    path = write_csv(tmp_path / "focus" / "may.csv", rows)
    with duckdb.connect() as con:
        with pytest.raises(SourceError) as error:
            load(con, path)
        _one_line(error.value, "may.csv row 3", column, value, "finite")


def test_focus_accelerator_count_out_of_range_is_refused(tmp_path):
    import duckdb

    from tests.ingest.test_focus_source import COLUMNS, load, vm, write_csv

    rows = [vm("bad", "g5.4xlarge", x_AcceleratorCount="3000000000")]
    path = write_csv(tmp_path / "focus" / "may.csv", rows,
                     columns=COLUMNS + ("x_AcceleratorCount",))
    with duckdb.connect() as con:
        with pytest.raises(SourceError) as error:
            load(con, path)
        _one_line(error.value, "may.csv row 2", "x_AcceleratorCount", "accelerators")


@pytest.mark.parametrize("gpus", ["3000000000", "1000001", "1e12", "inf"])
def test_runs_file_gpus_beyond_any_machine_are_refused_by_both_readers(tmp_path, gpus):
    # `gpus = 3,000,000,000` failed with "too large to fit in C integer type"
    path = runs_csv(tmp_path / "runs.csv", "i-0a", gpus=gpus)
    for reader in (read_runs, read_runs_table):
        with pytest.raises(SourceError) as error:
            reader(path, "runs")
        _one_line(error.value, str(path), "row 2", "gpus")


def test_a_math_text_charge_category_loads_verbatim(tmp_path):
    # FOCUS ChargeCategory is free text in real exports; `$…$` is not matplotlib math here
    import duckdb

    from tests.ingest.test_focus_source import load, row, write_csv

    path = write_csv(tmp_path / "focus" / "may.csv",
                     [row("fee", 5.0, ChargeCategory=r"Fee $\frac{a}$ x")])
    with duckdb.connect() as con:
        facts = load(con, path)
    assert facts["fee"]["x_LineItemType"] == r"Fee $\frac{a}$ x"


def test_azure_resource_ids_match_whatever_their_case(tmp_path):
    # Azure resource ids are case-insensitive: Azure's cost data writes them lowercased, a
    # tracker (or the Azure SDK) as the resource was created. A run listing its VM in either
    # case claims the VM's lines; an AWS id is matched as it is (an instance id is lowercase)
    from datetime import datetime

    import duckdb

    from cost_pipeline.attribution import build_attribution
    from cost_pipeline.config import parse_config
    from cost_pipeline.warehouse import month_params
    from tests.ingest.test_focus_source import MAY, load, vm, write_csv
    from tests.support.warehouse_rows import RUN_DEFAULTS, insert_runs

    created = ("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ML-RG/"
               "providers/Microsoft.Compute/virtualMachines/GPU-VM-1")
    rows = [vm("azure", "Standard_ND96asr_v4", ProviderName="Microsoft",
               ResourceId=created.lower()),
            vm("aws", "m6i.large", cost=4.0, ResourceId="i-0abc")]
    with duckdb.connect() as con:
        load(con, write_csv(tmp_path / "focus" / "may.csv", rows))
        start, end = datetime(2026, 5, 3, 9), datetime(2026, 5, 3, 12)
        insert_runs(con, MAY, [
            {**RUN_DEFAULTS, "run_id": "r1", "status": "FINISHED", "start_time": start,
             "end_time": end, "resource_ids": [created]},
            {**RUN_DEFAULTS, "run_id": "r2", "status": "FINISHED", "start_time": start,
             "end_time": end, "resource_ids": ["I-0ABC"]},
        ])
        build_attribution(con, MAY, month_params(parse_config({}, tmp_path), MAY))
        costs = dict(con.execute(
            "SELECT coalesce(run_id, kind), sum(cost) FROM attribution GROUP BY 1").fetchall())
    assert costs == {"r1": 10.0, "no_run": 4.0}


# ---------------------------------------------------------------- component decisions

def test_rds_and_glue_instance_hours_are_other_not_compute(tmp_path):
    # the workshop CUR bills RDS and Glue by the instance- or DPU-hour: they are instance
    # hours, but of managed services no training run occupies; `other`, no usage hours, so
    # they never count as CPU-hours, preprocessing or untracked compute (docs/real-bills.md)
    import duckdb

    from tests.support.cur_rows import build, config, facts, line, write_export

    rows = [
        line(0.24, identity_line_item_id="rds", line_item_product_code="AmazonRDS",
             line_item_usage_type="USE1-InstanceUsage:db.r5.large",
             line_item_operation="CreateDBInstance:0014", line_item_resource_id=(
                 "arn:aws:rds:us-east-1:111122223333:db:ml-metadata"),
             product_instance_type="db.r5.large", product_product_family="Database Instance",
             product_servicecode="AmazonRDS"),
        line(0.44, identity_line_item_id="glue", line_item_product_code="AWSGlue",
             line_item_usage_type="USE1-ETL-DPU-Hour", line_item_operation="Jobrun",
             line_item_resource_id="arn:aws:glue:us-east-1:111122223333:job/features",
             pricing_unit="DPU-Hour", product_product_family="AWS Glue",
             product_servicecode="AWSGlue"),
        line(0.096, identity_line_item_id="ec2"),  # an EC2 hour stays compute
    ]
    with duckdb.connect() as con:
        build(con, config(tmp_path, write_export(tmp_path, {"a.parquet": rows})))
        got = facts(con)
    for name in ("rds", "glue"):
        assert (got[name]["x_CostComponent"], got[name]["x_UsageHours"],
                got[name]["x_InstanceUsage"]) == ("other", None, False), name
    assert (got["ec2"]["x_CostComponent"], got["ec2"]["x_UsageHours"]) == ("cpu", 1.0)


def test_an_unused_capacity_reservation_is_other_without_hours(tmp_path):
    # an On-Demand Capacity Reservation as AWS's CUR guide spells it: the instance that used
    # it bills its own BoxUsage hour, the reservation a `Reservation:` line of rate 0, and its
    # idle instances `UnusedBox:` instance-hours at the on-demand rate on the reservation's
    # ARN. SPEC §5's instance usage is BoxUsage / SpotUsage / HostUsage / SageMaker training
    # only: the idle capacity is `other`, with no hours (docs/real-bills.md)
    import duckdb

    from tests.support.cur_rows import build, config, facts, line, write_export

    reservation = "arn:aws:ec2:us-east-1:111122223333:capacity-reservation/cr-0be443e1db6f"
    p5 = {"product_instance_type": "p5.48xlarge"}
    rows = [
        line(98.32, identity_line_item_id="used", line_item_resource_id="i-0p5",
             line_item_usage_type="USE1-BoxUsage:p5.48xlarge", **p5),
        line(0.0, identity_line_item_id="reservation", line_item_resource_id=reservation,
             line_item_usage_type="USE1-Reservation:p5.48xlarge", **p5),
        line(196.64, identity_line_item_id="unused", line_item_usage_amount=2.0,
             line_item_resource_id=reservation,
             line_item_usage_type="USE1-UnusedBox:p5.48xlarge", **p5),
    ]
    with duckdb.connect() as con:
        build(con, config(tmp_path, write_export(tmp_path, {"a.parquet": rows})))
        got = facts(con)
    shape = {name: (r["x_CostComponent"], r["x_UsageHours"], r["x_AcceleratorCount"],
                    r["EffectiveCost"]) for name, r in got.items()}
    assert shape == {"used": ("gpu", 1.0, 8, 98.32), "reservation": ("other", None, 0, 0.0),
                     "unused": ("other", None, 0, 196.64)}


def test_focus_rows_are_instance_hours_only_where_a_cur_line_would_be(tmp_path):
    # the same reservation in a FOCUS export: AWS's keeps the CUR usage types in x_UsageType
    # (and names the instance type in the row's details), FOCUS 1.1+ marks the idle part
    # `CapacityReservationStatus = Unused` (Azure's export has no usage type at all). Read as
    # the CUR is: the used hour is the instance's, the reservation's own rows (`Reservation:`
    # of cost 0, `UnusedBox:`, or status Unused) are `other` without hours, so the billed
    # GPU-hours count the instance once and the idle capacity is untracked cost, not hours.
    # AWS's usage types decide as they do for a CUR line (SPEC §5), whatever the category
    import json

    import duckdb

    from tests.ingest.test_focus_source import COLUMNS, load, vm, write_csv

    reservation = "arn:aws:ec2:us-east-1:111122223333:capacity-reservation/cr-0be443e1db6f"
    azure_reservation = ("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/"
                         "ml-rg/providers/Microsoft.Compute/capacityReservationGroups/gpu/"
                         "capacityReservations/nd96")

    def p5(name, usage_type, **cols):
        return vm(name, "p5.48xlarge", **{"x_UsageType": f"USE1-{usage_type}:p5.48xlarge",
                                          "ResourceType": "",
                                          "CapacityReservationId": reservation, **cols})

    rows = [
        p5("used", "BoxUsage", cost=98.32, ResourceId="i-0p5", ResourceType="Instance",
           CapacityReservationStatus="Used"),
        p5("reservation", "Reservation", cost=0.0, ResourceId=reservation),
        p5("unused", "UnusedBox", hours=2.0, cost=196.64, ResourceId=reservation,
           CapacityReservationStatus="Unused"),
        vm("azure-used", "Standard_ND96asr_v4", ProviderName="Microsoft",
           ResourceId=azure_reservation.replace("capacityReservationGroups/gpu/"
                                                "capacityReservations/nd96",
                                                "virtualMachines/trainer"),
           CapacityReservationId=azure_reservation, CapacityReservationStatus="Used"),
        vm("azure-unused", "Standard_ND96asr_v4", hours=3.0, cost=30.0,
           ProviderName="Microsoft", ResourceId=azure_reservation,
           CapacityReservationId=azure_reservation, CapacityReservationStatus="Unused",
           SkuPriceDetails=json.dumps({"VMSize": "Standard_ND96asr_v4"})),
    ]
    # AWS usage types a CUR line is not instance usage of (SPEC §5), whatever the row's
    # category says; another provider's own x_UsageType is not read as AWS's
    rows += [
        vm("notebook", "ml.g4dn.xlarge", ServiceCategory="AI and Machine Learning",
           ServiceName="Amazon SageMaker", ResourceType="Notebook Instance",
           x_UsageType="USE1-Notebk:ml.g4dn.xlarge"),
        vm("dedicated-fee", "p4d.24xlarge", x_UsageType="USE1-DedicatedRes:p4d.24xlarge",
           cost=2.0),
        # a FOCUS 1.3 file names the provider in ServiceProviderName (empty: ProviderName's)
        vm("endpoint", "ml.g5.xlarge", ServiceCategory="AI and Machine Learning",
           ServiceName="Amazon SageMaker", ServiceProviderName="",
           x_UsageType="USE1-Host:ml.g5.xlarge"),
        vm("oci", "BM.GPU.A10.4", ProviderName="Oracle", x_UsageType="GPU.A10",
           x_AcceleratorCount=4),
        # EC2's EBS volume filed under Compute, as a per-service category would file it:
        # storage, as the CUR reader makes an `EBS:` usage type
        vm("ebs", "", ResourceId="vol-0abc", ResourceType="", SkuPriceDetails="",
           x_UsageType="USE1-EBS:VolumeUsage.gp3", ConsumedUnit="GB-Mo", cost=1.5),
        vm("cloudfront", "", ResourceId="E2QWRUHEXAMPLE", ResourceType="", SkuPriceDetails="",
           ServiceCategory="Other", x_UsageType="US-DataTransfer-Out-Bytes-Internet",
           ConsumedUnit="GB", cost=0.5),
    ]
    columns = COLUMNS + ("x_UsageType", "CapacityReservationId", "CapacityReservationStatus",
                         "x_AcceleratorCount", "ServiceProviderName")
    with duckdb.connect() as con:
        got = load(con, write_csv(tmp_path / "focus" / "may.csv", rows, columns))
    shape = {name: (r["x_CostComponent"], r["x_UsageHours"], r["x_AcceleratorCount"],
                    r["x_ResourceKind"], r["EffectiveCost"]) for name, r in got.items()}
    assert shape == {
        "used": ("gpu", 1.0, 8, "instance", 98.32),
        "reservation": ("other", None, 0, "other", 0.0),
        "unused": ("other", None, 0, "other", 196.64),
        "azure-used": ("gpu", 1.0, 8, "instance", 10.0),
        "azure-unused": ("other", None, 0, "other", 30.0),
        "notebook": ("other", None, 0, "other", 10.0),
        "dedicated-fee": ("other", None, 0, "other", 2.0),
        "endpoint": ("other", None, 0, "other", 10.0),
        "oci": ("gpu", 1.0, 4, "instance", 10.0),
        "ebs": ("storage", None, 0, "volume", 1.5),
        "cloudfront": ("network", None, 0, "other", 0.5),
    }


# ---------------------------------------------------------------- CUR 2.0's `tags` column

def test_cur_tags_column_gives_the_lines_resource_tags(tmp_path):
    # CUR 2.0's `tags` column (AWS Data Exports, "Tags column") holds every tag of a line,
    # keyed by its source: `resourceTags/…`, `accountTag/…`, `costCategory/…`,
    # `userAttribute/…`. An export may select it instead of `resource_tags`: the resource's
    # own tags claim lines (the run tag) and name their team; an account's tag names neither
    from datetime import date, timedelta

    import duckdb
    import pyarrow as pa

    from cost_pipeline.attribution import build_attribution
    from cost_pipeline.warehouse import month_params
    from tests.support.cur_rows import T0, build, config, facts, line, write_export
    from tests.support.warehouse_rows import RUN_DEFAULTS, insert_runs

    tagged = {"resourceTags/user:run_id": "r1", "resourceTags/user:team": "vision",
              "accountTag/team": "finance", "costCategory/project": "research",
              "userAttribute/Department": "ml"}
    rows = [
        line(3.0, identity_line_item_id="tagged", line_item_resource_id="i-0a", tags=tagged),
        # AWS prefixes every key with its source: a key without one is not known as the
        # resource's own, and left out
        line(2.0, identity_line_item_id="bare", line_item_resource_id="i-0b",
             tags={"resourceTags/run_id": "r2", "resourceTags/aws:createdBy": "alice",
                   "project": "unknown-source"}),
        line(1.0, identity_line_item_id="account", line_item_resource_id="i-0c",
             tags={"accountTag/run_id": "r1", "accountTag/team": "finance"}),
        line(0.5, identity_line_item_id="untagged", line_item_resource_id="i-0d", tags=None),
    ]
    export = write_export(tmp_path, {"a.parquet": rows}, drop=("resource_tags",),
                          extra={"tags": pa.map_(pa.string(), pa.string())})
    july = date(2026, 7, 1)
    with duckdb.connect() as con:
        cfg = config(tmp_path, export)
        build(con, cfg)
        got = facts(con)
        assert got["tagged"]["Tags"] == {"user:run_id": "r1", "user:team": "vision"}
        assert got["bare"]["Tags"] == {"run_id": "r2", "aws:createdBy": "alice"}
        assert got["account"]["Tags"] == {}
        assert got["untagged"]["Tags"] is None
        teams = dict(con.execute(
            "SELECT split_part(x_SourceLine, ':', 2), user_tag(Tags, 'team') "
            "FROM billing_facts").fetchall())
        assert teams == {"tagged": "vision", "bare": None, "account": None, "untagged": None}
        # r1 and r2 list no resource: the run tag alone claims their lines
        window = {"start_time": T0, "end_time": T0 + timedelta(hours=2)}
        insert_runs(con, july, [{**RUN_DEFAULTS, "run_id": run, "status": "FINISHED",
                                 **window} for run in ("r1", "r2")])
        build_attribution(con, july, month_params(cfg, july))
        costs = dict(con.execute(
            "SELECT coalesce(run_id, kind), sum(cost) FROM attribution GROUP BY 1").fetchall())
    assert costs == {"r1": 3.0, "r2": 2.0, "no_run": 1.5}


def test_an_export_selecting_both_tag_columns_reads_resource_tags(tmp_path):
    # both columns hold the same resource tags (AWS: "if you select this column, you need not
    # select Resource tags"): resource_tags is read as it is, the `tags` column not at all
    import duckdb
    import pyarrow as pa

    from tests.support.cur_rows import build, config, facts, line, write_export

    rows = [line(1.0, identity_line_item_id="both",
                 resource_tags={"user_team": "vision", "user_run_id": "r1"},
                 tags={"resourceTags/user_team": "vision", "resourceTags/user_run_id": "r1",
                       "costCategory/team": "finance"})]
    export = write_export(tmp_path, {"a.parquet": rows},
                          extra={"tags": pa.map_(pa.string(), pa.string())})
    with duckdb.connect() as con:
        build(con, config(tmp_path, export))
        assert facts(con)["both"]["Tags"] == {"user_team": "vision", "user_run_id": "r1"}


def test_a_month_whose_files_differ_in_their_tag_column_reads_each_files_own(tmp_path):
    # an export edited mid-month (AWS Data Exports lets its columns change) delivers files
    # with resource_tags beside files with only the `tags` column: each file's lines take
    # their resource tags from the column that file holds, and the run tag claims them alike
    from datetime import date, timedelta

    import duckdb

    from cost_pipeline.attribution import build_attribution
    from cost_pipeline.warehouse import month_params
    from tests.support.cur_rows import MIXED_TAGS, T0, build, config, facts, write_mixed_tag_export
    from tests.support.warehouse_rows import RUN_DEFAULTS, insert_runs

    july = date(2026, 7, 1)
    with duckdb.connect() as con:
        cfg = config(tmp_path, write_mixed_tag_export(tmp_path))
        build(con, cfg)
        assert {line: row["Tags"] for line, row in facts(con).items()} == MIXED_TAGS
        insert_runs(con, july, [{**RUN_DEFAULTS, "run_id": "r1", "status": "FINISHED",
                                 "start_time": T0, "end_time": T0 + timedelta(hours=2)}])
        build_attribution(con, july, month_params(cfg, july))
        costs = dict(con.execute(
            "SELECT coalesce(run_id, kind), sum(cost) FROM attribution GROUP BY 1").fetchall())
    assert costs == {"r1": 21.0, "no_run": 42.0}


MAP_ROWS = [
    # an accelerated type no table knows: the product's `gpu` attribute gives its G
    dict(identity_line_item_id="l1", line_item_usage_type="BoxUsage:zz9.8xlarge",
         product_instance_type="zz9.8xlarge",
         product={"product_name": "Amazon Elastic Compute Cloud", "gpu": "4",
                  "servicename": "Amazon EC2"},
         resource_tags={"user:run_id": "r1", "user_team": "vision"}),
    dict(identity_line_item_id="l2", resource_tags={"user_team": "nlp"}),
    dict(identity_line_item_id="l3", product=None, resource_tags=None),
    dict(identity_line_item_id="l4", resource_tags={}),
]


def map_export(root, shape: str):
    from tests.support.cur_rows import (
        EXPORT,
        S3_EXPORT,
        line,
        month_dir,
        write_manifest,
        write_maps_as,
        write_parquet,
    )

    rows = [line(float(i + 1), **cols) for i, cols in enumerate(MAP_ROWS)]
    export = root / EXPORT
    if shape == "map":
        write_parquet(month_dir(export) / "a.parquet", rows)
    else:
        write_maps_as(month_dir(export) / "a.parquet", rows, shape)
    write_manifest(export, [f"{S3_EXPORT}/data/BILLING_PERIOD=2026-07/a.parquet"])
    return export


@pytest.mark.parametrize("shape", ["struct", "pairs", "entries", "records", "text"])
def test_map_columns_written_otherwise_read_as_the_maps(tmp_path, shape):
    # a CUR rewritten by pandas (a column of dicts becomes a struct; a map read and written
    # back, lists of pairs), by polars (lists of {key, value} entries) or holding its maps as
    # JSON text: the lines' Tags, service and accelerators are those of the same lines
    # written with real maps
    import duckdb

    from tests.support.cur_rows import build, config

    query = "SELECT * EXCLUDE (month, x_File) FROM billing_facts ORDER BY x_SourceLine"
    with duckdb.connect() as con:
        build(con, config(tmp_path / "map", map_export(tmp_path / "map", "map")))
        want = con.execute(query).fetchall()
        build(con, config(tmp_path / shape, map_export(tmp_path / shape, shape)))
        got = con.execute(query).fetchall()
        tags = dict(con.execute("SELECT split_part(x_SourceLine, ':', 2), Tags "
                                "FROM billing_facts").fetchall())
        gpu = con.execute("SELECT x_AcceleratorCount, x_CostComponent FROM billing_facts "
                          "WHERE x_SourceLine LIKE '%:l1:%'").fetchone()
    assert got == want and len(got) == 4
    assert tags == {"l1": {"user:run_id": "r1", "user_team": "vision"},
                    "l2": {"user_team": "nlp"}, "l3": None, "l4": {}}
    assert gpu == (4, "gpu")


def test_map_text_that_is_no_map_and_files_holding_a_map_differently_are_named(tmp_path):
    rows = [line(1.0, resource_tags={"user_team": "vision"}),
            line(2.0, resource_tags={"user_team": "nlp"})]
    data = month_dir(tmp_path / "text" / EXPORT)
    bad = write_maps_as(data / "a.parquet", rows, "text")
    table = pq.read_table(bad)
    column = table.schema.get_field_index("resource_tags")
    pq.write_table(table.set_column(column, "resource_tags",
                                    pa.array(['{"user_team": "vision"}', "user_team=nlp"])), bad)
    mixed = month_dir(tmp_path / "mixed" / EXPORT)
    write_parquet(mixed / "a.parquet", rows[:1])
    write_maps_as(mixed / "b.parquet", rows[1:], "struct")
    with duckdb.connect() as con:
        with pytest.raises(SourceError) as err:
            build(con, config(tmp_path, tmp_path / "text" / EXPORT))
        assert f"{bad} row 2" in str(err.value)
        assert "column resource_tags is text that is neither a JSON object nor a map: " \
               "'user_team=nlp'" in str(err.value)
        with pytest.raises(SourceError) as err:
            build(con, config(tmp_path, tmp_path / "mixed" / EXPORT))
    assert f"{mixed / 'b.parquet'}: column product is a struct here but a map in " \
           f"{mixed / 'a.parquet'}" in str(err.value)


@pytest.mark.parametrize("shape", ["pairs", "entries"])
def test_a_list_of_entries_naming_a_key_twice_names_the_row(tmp_path, shape):
    # no map holds a key twice: DuckDB refused the month naming only the file
    data = month_dir(tmp_path / EXPORT)
    path = write_maps_as(data / "a.parquet", [
        line(1.0, resource_tags={"user_team": "vision"}),
        line(1.0, start=T0 + HOUR, resource_tags={"user_team": "nlp", "user:run_id": "r1"}),
        line(1.0, start=T0 + 2 * HOUR, resource_tags={"user_team": "nlp"})], shape)
    table = pq.read_table(path)
    index = table.schema.get_field_index("resource_tags")
    kind = table.schema.field(index).type
    tags = table.column(index).to_pylist()
    tags[1] = [*tags[1], tags[1][0]]  # row 2 names user_team twice
    pq.write_table(table.set_column(index, "resource_tags", pa.array(tags, kind)), path)
    with duckdb.connect() as con, pytest.raises(SourceError) as err:
        build(con, config(tmp_path, tmp_path / EXPORT))
    assert f"{path} row 2: column resource_tags is a list of entries naming a key twice: " \
           in str(err.value)


def test_a_map_column_the_files_type_apart_is_read_unless_no_type_holds_both(tmp_path):
    # `product` as map<string, int64> in one file and map<string, string> in another, or
    # as structs whose `gpu` field is a number in one and text in another: read (the S3
    # reader casts each file to `widened_type`, as DuckDB unifies local files); a field that
    # is a struct in one file and a number in another is refused naming both files
    gpu = {"line_item_usage_type": "BoxUsage:x9.large"}
    text_map = pa.map_(pa.string(), pa.string())
    cases = {"maps": (pa.map_(pa.string(), pa.int64()), text_map),
             "structs": (pa.struct([("gpu", pa.int64()), ("region", pa.string())]),
                         pa.struct([("gpu", pa.string())])),
             "nested": (pa.struct([("gpu", pa.int64())]),
                        pa.struct([("gpu", pa.struct([("count", pa.int64())]))]))}
    values = {"maps": ({"gpu": 4}, {"gpu": "8"}),
              "structs": ({"gpu": 4, "region": "us-east-1"}, {"gpu": "8"}),
              "nested": ({"gpu": 4}, {"gpu": {"count": 8}})}
    for case, kinds in cases.items():
        data = month_dir(tmp_path / case / EXPORT)
        for hour, (name, kind, product) in enumerate(zip(("a.parquet", "b.parquet"), kinds,
                                                         values[case], strict=True)):
            write_parquet(data / name, [line(1.0, start=T0 + hour * HOUR, product=product,
                                             line_item_resource_id=f"i-{hour}", **gpu)],
                          types={"product": kind})
    with duckdb.connect() as con:
        for case in ("maps", "structs"):
            build(con, config(tmp_path, tmp_path / case / EXPORT))
            assert con.execute("SELECT x_File[-9:], x_AcceleratorCount FROM billing_facts "
                               "ORDER BY 1").fetchall() == [("a.parquet", 4), ("b.parquet", 8)]
        with pytest.raises(SourceError) as err:
            build(con, config(tmp_path, tmp_path / "nested" / EXPORT))
    data = month_dir(tmp_path / "nested" / EXPORT)
    assert f"{data / 'b.parquet'}: column product is struct<gpu: struct<count: int64>> here " \
           f"but struct<gpu: int64> in {data / 'a.parquet'}" in str(err.value)
    assert widened_type(list(cases["maps"])) == text_map
    assert widened_type(list(cases["structs"])) == pa.struct(
        [("gpu", pa.string()), ("region", pa.string())])
    assert widened_type(list(cases["nested"])) is None
    entries = [pa.list_(pa.struct([("key", pa.string()), ("value", value)]))
               for value in (pa.int64(), pa.string())]  # entries whose values are typed apart
    assert widened_type(entries) == entries[1]
    assert widened_type([pa.list_(pa.int64()), pa.struct([("gpu", pa.int64())])]) is None


def test_a_tags_column_of_another_type_is_named_unless_resource_tags_is_there(tmp_path):
    # the `tags` column is read only without resource_tags: only then is its type checked
    import duckdb
    import pyarrow as pa

    from tests.support.cur_rows import build, config, facts, line, write_export

    # (a struct, a list of entries or text is read as a map:
    # `test_map_columns_written_otherwise_read_as_the_maps`)
    listed = pa.list_(pa.string())
    rows = [line(1.0, identity_line_item_id="l1", resource_tags={"user_team": "vision"},
                 tags=["team=vision"])]
    with duckdb.connect() as con:
        build(con, config(tmp_path / "both", write_export(tmp_path / "both", {"a.parquet": rows},
                                                          extra={"tags": listed})))
        assert facts(con)["l1"]["Tags"] == {"user_team": "vision"}
        alone = write_export(tmp_path / "alone", {"a.parquet": rows}, drop=("resource_tags",),
                             extra={"tags": listed})
        with pytest.raises(SourceError, match="column tags is list<element: string>"):
            build(con, config(tmp_path / "alone", alone))
