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
from cost_pipeline.warehouse import month_params, replace_month, sql_text
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
    # an A100 VM without its machine type or cores label: its GPU line says it is one, and
    # G is its GPU-hours over the hour (a lower bound, reported as unknown), on its core line
    # too
    sku("bare-vm", "BARE-GPU", "Nvidia Tesla A100 GPU running in Americas", 4 * HOUR,
        "seconds", 11.7, tags(None)),
    sku("bare-vm", "BARE-CORE", "A2 Instance Core running in Americas", 48 * HOUR,
        "seconds", 1.5, tags(None)),
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
    ("BARE-CORE", ("gpu", 4, None, True)),      # a GPU line in its hour: no hours here
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


# A VM whose machine type names no GPU count: an N1 with attached GPUs, or a type whose name
# the patterns did not know. G is the VM's, per resource-hour, from its VM-hours (its core
# line's vCPU-hours ÷ its vCPUs), and its core and RAM lines carry the same G.
N1 = tags("n1-standard-8", 8, run_id="r1")
T4 = "Nvidia Tesla T4 GPU running in Americas"
N1_CORE = "N1 Predefined Instance Core running in Americas"
N1_RAM = "N1 Predefined Instance Ram running in Americas"


def gcp_month(folder, rows: list[dict], runs: list[dict], accelerators: dict | None = None):
    """The month of `rows` read as a FOCUS file, attributed to `runs` and reconciled: the
    connection and the billing summary."""
    cfg = parse_config({"billing": [{"kind": "focus", "name": "gcp",
                                     "path": str(write_csv(folder / "gcp.csv", rows,
                                                           columns=COLUMNS))}],
                        "accelerators": accelerators or {}}, folder)
    con = duckdb.connect()
    summary = build_billing_facts(con, cfg, JULY, LOG)
    insert_runs(con, JULY, [{**RUN_DEFAULTS, "status": "FINISHED", "purpose": "production",
                             **run} for run in runs])
    params = month_params(cfg, JULY)
    build_attribution(con, JULY, params)
    replace_month(con, "reconciliation", JULY, sql_text("reconciliation"), params)
    return con, summary


def lines_of(con) -> dict[str, tuple]:
    """SkuId → (x_InstanceType, component, G, x_UsageHours, unknown type)."""
    return {r[0]: r[1:] for r in con.execute(
        "SELECT SkuId, x_InstanceType, x_CostComponent, x_AcceleratorCount, x_UsageHours, "
        "x_UnknownAcceleratorType FROM billing_facts").fetchall()}


def run_costs(con) -> dict[str, float]:
    return dict(con.execute("SELECT b.SkuId, sum(a.cost) FROM billing_facts b JOIN attribution a "
                            "USING (x_SourceLine) WHERE a.run_id = 'r1' GROUP BY ALL"
                            ).fetchall())


def test_an_n1_vms_gpu_count_is_its_gpu_hours_over_its_vm_hours(tmp_path):
    """An n1-standard-8 with 2 T4s ran 10:00-10:30 of the hour: 1 T4-hour (3,600
    GPU-seconds) and 4 vCPU-hours (8 × 1,800 vCPU-seconds ÷ 8 vCPUs = 0.5 VM-hours), so
    G = 1 ÷ 0.5 = 2 on both lines and the GPU line's hours are 1 ÷ 2 = 0.5. G was the GPU-hours
    over the whole hour, 1 (listed as unknown), the core line's 1, the hours 1.0: r1, which
    held the VM for the half hour it ran, took half of its $0.50 and half its GPU-hours were
    untracked."""
    rows = [
        sku("n1-vm", "T4-GPU", T4, 3600.0, "seconds", 0.35, N1),
        sku("n1-vm", "N1-CORE", N1_CORE, 8 * 1800.0, "seconds", 0.15, N1),
    ]
    con, summary = gcp_month(tmp_path, rows, [{
        "run_id": "r1", "resource_ids": [VM + "n1-vm"],
        "start_time": datetime(2026, 7, 3, 10), "end_time": datetime(2026, 7, 3, 10, 30)}])
    t4 = "n1-standard-8 + nvidia-tesla-t4"
    assert lines_of(con) == {"T4-GPU": (t4, "gpu", 2, pytest.approx(0.5), False),
                             "N1-CORE": (t4, "gpu", 2, None, False)}
    assert run_costs(con) == {"T4-GPU": pytest.approx(0.35), "N1-CORE": pytest.approx(0.15)}
    billed, tracked, untracked = con.execute(
        "SELECT billed_gpu_hours, tracked_gpu_hours, untracked_share FROM reconciliation"
    ).fetchone()
    assert (billed, tracked, untracked) == (pytest.approx(1.0), pytest.approx(1.0),
                                            pytest.approx(0.0))
    assert summary.unknown_instance_types == []
    con.close()


@pytest.mark.parametrize(("machine", "gpus", "gpu_hours", "g", "run_share"), [
    # an N1 with 2 T4s for the hour: 2 T4-hours over 1 VM-hour (8 vCPU-hours ÷ 8)
    ("n1-standard-8", "nvidia-tesla-t4", 2.0, 2, 0.5),
    # an A4X names its 4 GPUs as `a2-highgpu-8g` names 8: its name's `-4g`
    ("a4x-highgpu-4g", None, 4.0, 4, 0.25),
])
def test_an_accelerator_vms_core_line_has_its_gpu_lines_count(tmp_path, machine, gpus,
                                                              gpu_hours, g, run_share):
    """The VM's core and RAM lines had G = 1 while its GPU line had the VM's: a run using 1
    GPU took the whole $3.00 core line. Each line has the VM's G, so the run takes 1 ÷ G of
    every line: $3.00 × 0.5 of the N1's core line, $3.00 × 0.25 of the A4X's."""
    vm_tags = tags(machine, 8)
    rows = [
        sku("vm", "GPU", f"Nvidia {'Tesla T4' if gpus else 'GB200'} GPU running in Americas",
            gpu_hours * HOUR, "seconds", 2.0 * gpu_hours, vm_tags),
        sku("vm", "CORE", f"{machine[:3].upper()} Instance Core running in Americas",
            8 * HOUR, "seconds", 3.0, vm_tags),
        sku("vm", "RAM", f"{machine[:3].upper()} Instance Ram running in Americas",
            32 * GIB * HOUR, "byte-seconds", 1.0, vm_tags),
    ]
    con, summary = gcp_month(tmp_path, rows, [{
        "run_id": "r1", "resource_ids": [VM + "vm"], "gpus": 1,
        "start_time": datetime(2026, 7, 3, 9), "end_time": datetime(2026, 7, 3, 12)}])
    name = f"{machine} + {gpus}" if gpus else machine
    assert lines_of(con) == {"GPU": (name, "gpu", g, pytest.approx(1.0), False),
                             "CORE": (name, "gpu", g, None, False),
                             "RAM": (name, "gpu", g, None, False)}
    assert run_costs(con) == {"GPU": pytest.approx(2.0 * gpu_hours * run_share),
                              "CORE": pytest.approx(3.0 * run_share),
                              "RAM": pytest.approx(1.0 * run_share)}
    # the warning named both types ("a4x-highgpu-4g, n1-standard-8") while their G was known
    assert summary.unknown_instance_types == []
    con.close()


def test_an_unknown_n1_gpu_count_is_set_under_the_type_the_warning_names(tmp_path):
    """Without a core line the N1's VM-hours are unknown: G is its 4 T4-hours over the hour
    (a lower bound), listed under `n1-standard-8 + nvidia-tesla-t4`, as the GCP export's
    reader names it; `accelerators:` under that name sets it, for its core line too."""
    rows = [sku("n1-vm", "T4-GPU", T4, 4 * HOUR, "seconds", 1.4, N1),
            sku("n1-vm", "N1-RAM", N1_RAM, 30 * GIB * HOUR, "byte-seconds", 0.1, N1)]
    t4 = "n1-standard-8 + nvidia-tesla-t4"
    con, summary = gcp_month(tmp_path, rows, [])
    assert lines_of(con) == {"T4-GPU": (t4, "gpu", 4, pytest.approx(1.0), True),
                             "N1-RAM": (t4, "gpu", 4, None, False)}
    assert summary.unknown_instance_types == [t4]
    con.close()
    con, summary = gcp_month(tmp_path, rows, [], accelerators={t4: 2})
    assert lines_of(con) == {"T4-GPU": (t4, "gpu", 2, pytest.approx(2.0), False),
                             "N1-RAM": (t4, "gpu", 2, None, False)}
    assert summary.unknown_instance_types == []
    con.close()


# A VM's lines without a ResourceId (the lines of an export that names no resource): nothing
# groups them by VM, so each line carries what it states of itself. A GPU line its own
# GPU-hours (÷ G), a core, RAM or shared-core line no hours (its VM's GPU line, if any, may
# carry them: an N1's attached GPUs are no part of its machine type), so no VM-hour counts
# twice. They were `other` with no hours: the month billed none of their GPU-hours.
A2_1G = tags("a2-highgpu-1g", 12, run_id="r1")
NAMELESS = {"ResourceId": None, "ResourceType": None}


def test_an_a2_vm_without_a_resource_id_keeps_its_gpu_hours_once(tmp_path):
    """An a2-highgpu-1g's hour (1 A100: 3,600 GPU-seconds; 12 vCPUs; 85 GiB) tagged r1,
    which ran the hour: its GPU line is 1 GPU-hour (G 1 from `-1g`), its core and RAM lines
    are the accelerator VM's, gpu with G 1 and no hours; r1 takes the $3.66 and the 1
    GPU-hour billed."""
    rows = [sku("a2", "A2-GPU", "Nvidia Tesla A100 GPU running in Americas", HOUR, "seconds",
                2.93, A2_1G, **NAMELESS),
            sku("a2", "A2-CORE", "A2 Instance Core running in Americas", 12 * HOUR, "seconds",
                0.38, A2_1G, **NAMELESS),
            sku("a2", "A2-RAM", "A2 Instance Ram running in Americas", 85 * GIB * HOUR,
                "byte-seconds", 0.35, A2_1G, **NAMELESS)]
    con, summary = gcp_month(tmp_path, rows, [{
        "run_id": "r1", "start_time": datetime(2026, 7, 3, 10),
        "end_time": datetime(2026, 7, 3, 11)}])
    a2 = "a2-highgpu-1g"
    assert lines_of(con) == {"A2-GPU": (a2, "gpu", 1, pytest.approx(1.0), False),
                             "A2-CORE": (a2, "gpu", 1, None, False),
                             "A2-RAM": (a2, "gpu", 1, None, False)}
    assert run_costs(con) == {"A2-GPU": pytest.approx(2.93), "A2-CORE": pytest.approx(0.38),
                              "A2-RAM": pytest.approx(0.35)}
    assert con.execute("SELECT billed_gpu_hours, tracked_gpu_hours, untracked_share "
                       "FROM reconciliation").fetchone() == (
        pytest.approx(1.0), pytest.approx(1.0), pytest.approx(0.0))
    assert con.execute("SELECT list(DISTINCT x_ResourceKind), bool_and(x_InstanceUsage) "
                       "FROM billing_facts").fetchone() == (["shared"], True)
    assert summary.unknown_instance_types == []
    con.close()


def test_an_n1_and_a_plain_vm_without_a_resource_id_count_each_hour_once(tmp_path):
    """An n1-standard-8 with 2 T4s and an n2-standard-8, their hour without ResourceId: the
    T4 line is 2 GPU-hours, G 2 (its GPU-hours over the hour, a lower bound reported as
    unknown), 1 h; the N1's core line, which cannot know its GPU line, carries no hours, cpu
    (its VM-hour is the GPU line's); the N2's core line no hours either. Billed: 2 GPU-hours,
    and 1 VM-hour on all the lines, not 1 on the GPU line and 1 on the core line."""
    n1, n2 = tags("n1-standard-8", 8), tags("n2-standard-8", 8)
    rows = [sku("n1", "T4-GPU", T4, 2 * HOUR, "seconds", 0.70, n1, **NAMELESS),
            sku("n1", "N1-CORE", N1_CORE, 8 * HOUR, "seconds", 0.30, n1, **NAMELESS),
            sku("n1", "N1-RAM", N1_RAM, 30 * GIB * HOUR, "byte-seconds", 0.10, n1, **NAMELESS),
            sku("n2", "N2-CORE", "N2 Instance Core running in Americas", 8 * HOUR, "seconds",
                0.25, n2, **NAMELESS)]
    con, summary = gcp_month(tmp_path, rows, [])
    assert lines_of(con) == {
        "T4-GPU": ("n1-standard-8", "gpu", 2, pytest.approx(1.0), True),
        "N1-CORE": ("n1-standard-8", "cpu", 0, None, False),
        "N1-RAM": ("n1-standard-8", "cpu", 0, None, False),
        "N2-CORE": ("n2-standard-8", "cpu", 0, None, False)}
    assert con.execute("SELECT billed_gpu_hours, untracked_share FROM reconciliation"
                       ).fetchone() == (pytest.approx(2.0), pytest.approx(1.0))
    assert con.execute("SELECT sum(x_UsageHours) FROM billing_facts").fetchone()[0] == \
        pytest.approx(1.0)
    assert summary.unknown_instance_types == ["n1-standard-8"]
    con.close()
