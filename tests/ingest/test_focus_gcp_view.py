"""GCP billing data in FOCUS as Google's FOCUS view for BigQuery writes it: ChargeCategory
`usage`, `tax`, `adjustment` and ChargeClass `correction` in lower case, a VM's hour as SKU
lines metered as GCP meters them (vCPU-seconds, byte-seconds, GPU-seconds over all the VM's
GPUs), Tags a list of labels, system labels, project labels and tags in which a key may come
twice. A VM's lines reach the attribution as the GCP export's do (billing_facts_gcp.sql):
one kind of line carries the VM-hours, so a run holding the VM for its hour takes all of it,
and its GPU-hours count once. Before, every line of such a month was unallocated (the lower
case), an n2-standard-8's hour read as 8 hours and an a2-highgpu-8g's as 97, and a label
repeated by the project refused the month."""

from __future__ import annotations

import json
import logging
from datetime import date, datetime

import duckdb
import pytest

from cost_pipeline.attribution import build_attribution
from cost_pipeline.config import parse_config
from cost_pipeline.ingest.billing import build_billing_facts
from cost_pipeline.warehouse import month_params
from tests.ingest.test_focus_source import write_csv
from tests.support.warehouse_rows import RUN_DEFAULTS, insert_runs

JULY = date(2026, 7, 1)
LOG = logging.getLogger("test")
COLUMNS = ("BillingPeriodStart", "ChargePeriodStart", "ChargePeriodEnd", "ProviderName",
           "ServiceName", "ServiceCategory", "ChargeCategory", "ChargeClass",
           "ChargeDescription", "ResourceId", "ResourceType", "SkuId", "ConsumedQuantity",
           "ConsumedUnit", "BilledCost", "EffectiveCost", "BillingCurrency", "Tags")
VM = "//compute.googleapis.com/projects/p/zones/us-central1-a/instances/"
HOUR = 3600.0
GIB = 2.0 ** 30


def tags(machine: str | None, cores: int | None = None, **labels: str) -> str:
    """Tags as the view builds them: the resource's labels, its system labels, then its
    project's labels (here `env` again, inherited)."""
    items = [{"key": k, "value": v, "x_type": "label", "x_inherited": False,
              "x_namespace": "n/a"} for k, v in labels.items()]
    system = {"compute.googleapis.com/machine_spec": machine,
              "compute.googleapis.com/cores": str(cores) if cores else None}
    items += [{"key": k, "value": v, "x_type": "system_label", "x_inherited": False,
               "x_namespace": "n/a"} for k, v in system.items() if v]
    items.append({"key": "env", "value": "research", "x_type": "project_label",
                  "x_inherited": True, "x_namespace": "n/a"})
    return json.dumps(items)


def sku(vm: str, sku_id: str, description: str, quantity: float, unit: str, cost: float,
        tag_text: str, **cols) -> dict:
    """One SKU line of the VM `vm`'s hour 2026-07-03 10:00-11:00."""
    return {"BillingPeriodStart": "2026-07-01T07:00:00Z",
            "ChargePeriodStart": "2026-07-03T10:00:00Z",
            "ChargePeriodEnd": "2026-07-03T11:00:00Z", "ProviderName": "Google Cloud",
            "ServiceName": "Compute Engine", "ServiceCategory": "Compute",
            "ChargeCategory": "usage", "ChargeDescription": description,
            "ResourceId": VM + vm, "ResourceType": "compute.googleapis.com/Instance",
            "SkuId": sku_id, "ConsumedQuantity": quantity, "ConsumedUnit": unit,
            "BilledCost": cost, "EffectiveCost": cost, "BillingCurrency": "USD",
            "Tags": tag_text, **cols}


N2 = tags("n2-standard-8", 8, env="prod", run_id="r1")
A2 = tags("a2-highgpu-8g", 96, env="prod")
ROWS = [
    sku("cpu-vm", "N2-CORE", "N2 Instance Core running in Americas", 8 * HOUR, "seconds",
        0.25, N2),
    sku("cpu-vm", "N2-RAM", "N2 Instance Ram running in Americas", 32 * GIB * HOUR,
        "byte-seconds", 0.14, N2),
    sku("gpu-vm", "A2-GPU", "Nvidia Tesla A100 GPU running in Americas", 8 * HOUR,
        "seconds", 23.47, A2),
    sku("gpu-vm", "A2-CORE", "A2 Instance Core running in Americas", 96 * HOUR, "seconds",
        3.0, A2),
    sku("gpu-vm", "A2-RAM", "A2 Instance Ram running in Americas", 680 * GIB * HOUR,
        "byte-seconds", 2.8, A2),
    # no `cores` label: the vCPUs of a custom machine type's name
    sku("custom-vm", "CUSTOM-CORE", "Custom Instance Core running in Americas", 6 * HOUR,
        "seconds", 0.2, tags("n2-custom-6-24576", env="dev")),
    # a shared-core VM: billed in instance-seconds, and no GPU
    sku("small-vm", "G1-SMALL", "Small Instance with 1 VCPU running in Americas", HOUR,
        "seconds", 0.03, tags("g1-small", 1, env="dev")),
    # an A100 VM without its machine type label: its GPU line says it is one, and G is its
    # GPU-hours over the hour (a lower bound, reported as unknown)
    sku("bare-vm", "BARE-GPU", "Nvidia Tesla A100 GPU running in Americas", 4 * HOUR,
        "seconds", 11.7, tags(None, 48)),
    sku("bare-vm", "BARE-CORE", "A2 Instance Core running in Americas", 48 * HOUR,
        "seconds", 1.5, tags(None, 48)),
    sku("cpu-vm", "TAX", "Tax", 0.0, "", 1.5, "[]", ChargeCategory="tax", ConsumedUnit=None,
        ConsumedQuantity=None, ResourceId=None, ResourceType=None),
    sku("cpu-vm", "ADJ", "Adjustment", 0.0, "", -0.5, "[]", ChargeCategory="adjustment",
        ChargeClass="correction", ConsumedUnit=None, ConsumedQuantity=None,
        ChargePeriodStart="2026-06-30T10:00:00Z", ChargePeriodEnd="2026-06-30T11:00:00Z"),
]


@pytest.fixture(scope="module")
def month(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gcp-focus")
    cfg = parse_config({"billing": [{"kind": "focus", "name": "gcp",
                                     "path": str(write_csv(folder / "gcp.csv", ROWS,
                                                           columns=COLUMNS))}]},
                       folder)
    con = duckdb.connect()
    build_billing_facts(con, cfg, JULY, LOG)
    # r1 holds the n2 and the a2 VMs for their hour; nothing holds the other two
    insert_runs(con, JULY, [{**RUN_DEFAULTS, "run_id": "r1", "status": "FINISHED",
                             "purpose": "production",
                             "resource_ids": [VM + "cpu-vm", VM + "gpu-vm"],
                             "start_time": datetime(2026, 7, 3, 9),
                             "end_time": datetime(2026, 7, 3, 12)}])
    build_attribution(con, JULY, month_params(cfg, JULY))
    yield con
    con.close()


def test_the_lower_case_vocabulary_reads_as_focus_spells_it(month):
    got = dict(month.execute("SELECT SkuId, (ChargeCategory, ChargeClass) FROM billing_facts "
                             "ORDER BY SkuId").fetchall())
    assert got["N2-CORE"] == ("Usage", None) and got["TAX"] == ("Tax", None)
    assert got["ADJ"] == ("Adjustment", "Correction")
    # the attribution's rules see them: tax and the correction are no usage, unallocated
    assert month.execute("SELECT list((purpose_class, kind) ORDER BY kind) FROM attribution "
                         "WHERE rule = 'non_usage'").fetchone()[0] == [
        ("unallocated", "correction"), ("unallocated", "tax")]


@pytest.mark.parametrize(("sku_id", "expected"), [
    # SkuId: component, G, x_UsageHours, instance usage
    ("N2-CORE", ("cpu", 0, 1.0, True)),         # 8 vCPU-hours ÷ the `cores` label
    ("N2-RAM", ("cpu", 0, None, True)),         # the VM's memory: its usage, no hours
    ("A2-GPU", ("gpu", 8, 1.0, True)),          # 8 GPU-hours ÷ G
    ("A2-CORE", ("gpu", 8, None, True)),        # an accelerator VM's hours are its GPUs'
    ("A2-RAM", ("gpu", 8, None, True)),
    ("CUSTOM-CORE", ("cpu", 0, 1.0, True)),     # 6 vCPU-hours ÷ n2-custom-6-…'s 6
    ("G1-SMALL", ("cpu", 0, 1.0, True)),        # instance-seconds; g1 is no GPU family
    ("BARE-GPU", ("gpu", 4, 1.0, True)),        # 4 GPU-hours in an hour: G ≥ 4
    ("BARE-CORE", ("gpu", 1, None, True)),      # a GPU line in its hour: no hours here
])
def test_a_vms_sku_lines_carry_its_hours_once(month, sku_id, expected):
    got = month.execute("SELECT x_CostComponent, x_AcceleratorCount, x_UsageHours, "
                        "x_InstanceUsage FROM billing_facts WHERE SkuId = ?", [sku_id]
                        ).fetchone()
    assert got[:2] == expected[:2] and got[3] == expected[3]
    assert got[2] == (pytest.approx(expected[2]) if expected[2] is not None else None)


def test_a_label_the_project_repeats_is_the_resources_own(month):
    (tag_map,) = month.execute("SELECT Tags FROM billing_facts WHERE SkuId = 'N2-CORE'"
                               ).fetchone()
    assert tag_map["env"] == "prod" and tag_map["run_id"] == "r1"
    assert tag_map["compute.googleapis.com/cores"] == "8"


def test_a_run_holding_the_vms_for_their_hour_takes_all_their_cost(month):
    by_line = dict(month.execute(
        "SELECT b.SkuId, sum(a.cost) FILTER (WHERE a.run_id = 'r1') FROM billing_facts b "
        "JOIN attribution a USING (x_SourceLine) GROUP BY ALL").fetchall())
    vm_rows = [r for r in ROWS if r["ResourceId"] and r["ResourceId"].endswith(("cpu-vm",
                                                                               "gpu-vm"))]
    assert by_line == {**{r["SkuId"]: pytest.approx(r["EffectiveCost"]) for r in vm_rows},
                       "CUSTOM-CORE": None, "G1-SMALL": None, "BARE-GPU": None,
                       "BARE-CORE": None, "TAX": None, "ADJ": None}
    unknown = month.execute("SELECT list(SkuId ORDER BY SkuId) FROM billing_facts "
                            "WHERE x_UnknownAcceleratorType").fetchone()[0]
    assert unknown == ["BARE-GPU"]
    billed, attributed, gpu_hours, tracked = month.execute(
        "SELECT (SELECT sum(EffectiveCost) FROM billing_facts), sum(cost), "
        "(SELECT sum(x_UsageHours * x_AcceleratorCount) FROM billing_facts "
        " WHERE x_CostComponent = 'gpu'), "
        "sum(accelerator_hours) FILTER (WHERE run_id = 'r1') FROM attribution").fetchone()
    assert attributed == pytest.approx(billed, rel=1e-12)  # conserved
    assert gpu_hours == pytest.approx(8.0 + 4.0) and tracked == pytest.approx(8.0)
