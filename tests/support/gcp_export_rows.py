"""A small GCP detailed billing export (`gcp_billing_export_resource_v1_*`): the real
schema's nested and repeated fields, and hand-made rows for September 2026.

What the rows hold (costs before credits):
- VM_A, an a2-highgpu-8g (8 × A100), 10:00–11:00 on 09-10: GPU line exported in two slices
  (8 GPU-hours, 24.00, sustained-use credits −4.80, a promotion −2.00), core 3.00 (SUD
  −0.60), RAM 0.50, internet egress 1.20. 11:00–12:00: it ran half the hour (4 GPU-hours),
  each SKU exported in four slices. 09-30 23:00 arrives late (exported in October).
- VM_B, an n2-standard-8 that ran 30 minutes (label run_id=r-prep-1), CUD credit −0.05.
- VM_C, an n1-standard-8 with 2 T4 attached (no GPU count in its machine type); VM_D, a
  Spot g2-standard-48 (4 × L4, from the built-in table) that ran 30 minutes.
- Every row's `cost_at_list` is 1.25 × its cost.
- The bucket ml-checkpoints (a day of Standard storage, free-tier credit −0.10), a balanced
  persistent disk, a tax line; and two rows outside September (an October hour and an August
  hour exported in September) that must not be read.
"""

from __future__ import annotations

from google.cloud import bigquery as bq

DATASET = "billing"
TABLE = "gcp_billing_export_resource_v1_0A1B2C_3D4E5F_6A7B8C"
VM_A = "//compute.googleapis.com/projects/ml-train/zones/us-central1-a/instances/4815162342"
VM_B = "//compute.googleapis.com/projects/ml-train/zones/us-central1-b/instances/1123581321"
VM_C = "//compute.googleapis.com/projects/ml-train/zones/us-central1-c/instances/2718281828"
VM_D = "//compute.googleapis.com/projects/ml-train/zones/us-central1-a/instances/3141592653"
DISK = "//compute.googleapis.com/projects/ml-train/zones/us-central1-a/disks/data-1"
BUCKET = "ml-checkpoints"
GIB = 2**30
LIST_MARKUP = 1.25   # cost_at_list ÷ cost: the account's negotiated price is 20 % off list


def _kv(name: str) -> bq.SchemaField:
    return bq.SchemaField(name, "RECORD", mode="REPEATED", fields=[
        bq.SchemaField("key", "STRING"), bq.SchemaField("value", "STRING")])


def _record(name: str, *fields: tuple[str, str]) -> bq.SchemaField:
    return bq.SchemaField(name, "RECORD", fields=[bq.SchemaField(n, t) for n, t in fields])


SCHEMA = [
    bq.SchemaField("billing_account_id", "STRING"),
    _record("service", ("id", "STRING"), ("description", "STRING")),
    _record("sku", ("id", "STRING"), ("description", "STRING")),
    bq.SchemaField("usage_start_time", "TIMESTAMP"),
    bq.SchemaField("usage_end_time", "TIMESTAMP"),
    bq.SchemaField("project", "RECORD", fields=[
        bq.SchemaField("id", "STRING"), bq.SchemaField("number", "STRING"),
        bq.SchemaField("name", "STRING"), _kv("labels")]),
    _kv("labels"),
    _kv("system_labels"),
    _record("location", ("location", "STRING"), ("country", "STRING"), ("region", "STRING"),
            ("zone", "STRING")),
    _record("resource", ("name", "STRING"), ("global_name", "STRING")),
    bq.SchemaField("export_time", "TIMESTAMP"),
    bq.SchemaField("cost", "FLOAT"),
    bq.SchemaField("currency", "STRING"),
    bq.SchemaField("currency_conversion_rate", "FLOAT"),
    _record("usage", ("amount", "FLOAT"), ("unit", "STRING"),
            ("amount_in_pricing_units", "FLOAT"), ("pricing_unit", "STRING")),
    bq.SchemaField("credits", "RECORD", mode="REPEATED", fields=[
        bq.SchemaField(n, t) for n, t in (("name", "STRING"), ("amount", "FLOAT"),
                                          ("full_name", "STRING"), ("id", "STRING"),
                                          ("type", "STRING"))]),
    _record("invoice", ("month", "STRING")),
    bq.SchemaField("cost_type", "STRING"),
    bq.SchemaField("cost_at_list", "FLOAT"),
]

COMPUTE = {"id": "6F81-5844-456A", "description": "Compute Engine"}
STORAGE = {"id": "95FF-2EF5-5EA1", "description": "Cloud Storage"}
GPU_A100 = {"id": "039F-D0DA-4055", "description": "Nvidia Tesla A100 GPU running in Americas"}
CORE_A2 = {"id": "2E27-4F75-95CD", "description": "A2 Instance Core running in Americas"}
RAM_A2 = {"id": "6E2A-DCD9-87ED", "description": "A2 Instance Ram running in Americas"}
EGRESS = {"id": "9DE9-9092-B3BC",
          "description": "Network Internet Egress from Americas to Americas"}
CORE_N2 = {"id": "BB77-5FDA-69D9", "description": "N2 Instance Core running in Americas"}
RAM_N2 = {"id": "5B01-D157-A097", "description": "N2 Instance Ram running in Americas"}
CORE_N1 = {"id": "2E27-4F75-95CE",
           "description": "N1 Predefined Instance Core running in Americas"}
GPU_T4 = {"id": "A1B2-C3D4-0T40", "description": "Nvidia Tesla T4 GPU running in Americas"}
GPU_L4 = {"id": "A1B2-C3D4-0L40",
          "description": "Nvidia L4 GPU attached to Spot Preemptible VMs running in Americas"}
CORE_G2 = {"id": "A1B2-C3D4-0G20",
           "description": "Spot Preemptible G2 Instance Core running in Americas"}
GCS_STD = {"id": "E5F0-6A5D-7BAD", "description": "Standard Storage US Regional"}
PD_BAL = {"id": "7C2D-9E1A-BALD", "description": "Balanced PD Capacity"}


def _credit(kind: str, amount: float) -> dict:
    return {"name": kind.replace("_", " ").title(), "amount": amount, "type": kind,
            "id": f"{kind.lower()}-1", "full_name": kind.replace("_", " ").title()}


def _row(sku: dict, start: str, end: str, cost: float, *, resource: str | None = None,
         name: str | None = None, service: dict = COMPUTE, amount: float = 0.0,
         unit: str = "seconds", pricing: float = 0.0, pricing_unit: str = "hour",
         credits: tuple = (), labels: dict | None = None, spec: dict | None = None,
         exported: str | None = None, invoice: str = "202609",
         cost_type: str = "regular") -> dict:
    return {
        "billing_account_id": "0A1B2C-3D4E5F-6A7B8C",
        "service": service, "sku": sku,
        "usage_start_time": start, "usage_end_time": end,
        "project": {"id": "ml-train", "number": "123456789012", "name": "ml-train",
                    "labels": [{"key": "env", "value": "prod"}]},
        "labels": [{"key": k, "value": v} for k, v in (labels or {}).items()],
        "system_labels": [{"key": f"compute.googleapis.com/{k}", "value": v}
                          for k, v in (spec or {}).items()],
        "location": {"location": "us-central1", "country": "US", "region": "us-central1",
                     "zone": "us-central1-a"},
        "resource": {"name": name or (resource or "").rsplit("/", 1)[-1] or None,
                     "global_name": resource},
        "export_time": exported or end,
        "cost": cost, "currency": "USD", "currency_conversion_rate": 1.0,
        "usage": {"amount": amount, "unit": unit, "amount_in_pricing_units": pricing,
                  "pricing_unit": pricing_unit},
        "credits": list(credits),
        "invoice": {"month": invoice},
        "cost_type": cost_type,
        "cost_at_list": cost * LIST_MARKUP,
    }


A2 = {"machine_spec": "a2-highgpu-8g", "cores": "96", "memory": "696320"}
N2 = {"machine_spec": "n2-standard-8", "cores": "8", "memory": "32768"}
N1 = {"machine_spec": "n1-standard-8", "cores": "8", "memory": "30720"}
G2 = {"machine_spec": "g2-standard-48", "cores": "48", "memory": "196608"}
TEAM = {"team": "ml-platform"}


def _vm_a_hour(start: str, end: str, fraction: float, slices: int,
               exported: str | None = None) -> list[dict]:
    """VM_A's GPU, core and RAM lines of one hour in which it ran `fraction` of the hour,
    each SKU exported in `slices` rows."""
    rows = []
    for sku, per_unit, units, cost in ((GPU_A100, 8, 8, 24.0), (CORE_A2, 96, 96, 3.0),
                                       (RAM_A2, 680 * GIB, 680, 0.5)):
        for _ in range(slices):
            part = fraction / slices
            rows.append(_row(sku, start, end, cost * part, resource=VM_A, name="trainer-a100",
                             amount=per_unit * 3600 * part, pricing=units * part,
                             unit="byte-seconds" if sku is RAM_A2 else "seconds",
                             pricing_unit="gibibyte hour" if sku is RAM_A2 else "hour",
                             labels=TEAM, spec=A2, exported=exported))
    return rows


def export_rows() -> list[dict]:
    h1, h1_end = "2026-09-10T10:00:00Z", "2026-09-10T11:00:00Z"
    vm_a = dict(resource=VM_A, name="trainer-a100", labels=TEAM, spec=A2)
    rows = [
        # 10:00 hour: the GPU line arrives in two slices; credits ride on the rows
        _row(GPU_A100, h1, h1_end, 13.5, amount=16200, pricing=4.5,
             credits=(_credit("SUSTAINED_USAGE_DISCOUNT", -2.7),),
             exported="2026-09-10T14:00:00Z", **vm_a),
        _row(GPU_A100, h1, h1_end, 10.5, amount=12600, pricing=3.5,
             credits=(_credit("SUSTAINED_USAGE_DISCOUNT", -2.1), _credit("PROMOTION", -2.0)),
             exported="2026-09-11T02:00:00Z", **vm_a),
        _row(CORE_A2, h1, h1_end, 3.0, amount=96 * 3600, pricing=96,
             credits=(_credit("SUSTAINED_USAGE_DISCOUNT", -0.6),), **vm_a),
        _row(RAM_A2, h1, h1_end, 0.5, amount=680 * GIB * 3600, unit="byte-seconds",
             pricing=680, pricing_unit="gibibyte hour", **vm_a),
        _row(EGRESS, h1, h1_end, 1.2, amount=10 * GIB, unit="bytes", pricing=10,
             pricing_unit="gibibyte", **vm_a),
        *_vm_a_hour("2026-09-10T11:00:00Z", "2026-09-10T12:00:00Z", 0.5, slices=4),
        # late: the month's last hour, exported on October 1st
        *_vm_a_hour("2026-09-30T23:00:00Z", "2026-10-01T00:00:00Z", 1.0, slices=1,
                    exported="2026-10-01T06:00:00Z")[:2],
        # a plain VM that ran 30 minutes, tagged with the run
        _row(CORE_N2, "2026-09-12T08:00:00Z", "2026-09-12T09:00:00Z", 0.16, resource=VM_B,
             amount=8 * 1800, pricing=4, labels={"run_id": "r-prep-1"}, spec=N2,
             credits=(_credit("COMMITTED_USAGE_DISCOUNT", -0.05),)),
        _row(RAM_N2, "2026-09-12T08:00:00Z", "2026-09-12T09:00:00Z", 0.04, resource=VM_B,
             amount=32 * GIB * 1800, unit="byte-seconds", pricing=16,
             pricing_unit="gibibyte hour", labels={"run_id": "r-prep-1"}, spec=N2),
        # N1 + 2 attached T4: G from GPU-hours ÷ VM-hours (core-hours ÷ cores)
        _row(GPU_T4, "2026-09-20T05:00:00Z", "2026-09-20T06:00:00Z", 0.7, resource=VM_C,
             amount=2 * 3600, pricing=2, spec=N1),
        _row(CORE_N1, "2026-09-20T05:00:00Z", "2026-09-20T06:00:00Z", 0.3, resource=VM_C,
             amount=8 * 3600, pricing=8, spec=N1),
        # G2 with 4 L4 (built-in table), 30 minutes
        _row(GPU_L4, "2026-09-21T07:00:00Z", "2026-09-21T08:00:00Z", 1.4, resource=VM_D,
             amount=4 * 1800, pricing=2, spec=G2),
        _row(CORE_G2, "2026-09-21T07:00:00Z", "2026-09-21T08:00:00Z", 0.6, resource=VM_D,
             amount=48 * 1800, pricing=24, spec=G2),
        # a day of bucket storage with a free-tier credit
        _row(GCS_STD, "2026-09-15T00:00:00Z", "2026-09-16T00:00:00Z", 2.0, service=STORAGE,
             resource=f"//storage.googleapis.com/projects/_/buckets/{BUCKET}", name=BUCKET,
             amount=2000 * GIB * 86400, unit="byte-seconds", pricing=2000 / 30,
             pricing_unit="gibibyte month", credits=(_credit("FREE_TIER", -0.1),)),
        _row(PD_BAL, h1, h1_end, 0.05, resource=DISK, amount=500 * GIB * 3600,
             unit="byte-seconds", pricing=500 / 730, pricing_unit="gibibyte month"),
        _row({"id": None, "description": None}, "2026-09-30T00:00:00Z",
             "2026-10-01T00:00:00Z", 3.5, cost_type="tax"),
    ]
    outside = [
        # usage of October (exported in October) and of August (exported in September)
        _row(GPU_A100, "2026-10-01T00:00:00Z", "2026-10-01T01:00:00Z", 24.0, amount=28800,
             pricing=8, exported="2026-10-01T04:00:00Z", invoice="202610", **vm_a),
        _row(GPU_A100, "2026-08-31T23:00:00Z", "2026-09-01T00:00:00Z", 24.0, amount=28800,
             pricing=8, exported="2026-09-01T03:00:00Z", invoice="202608", **vm_a),
    ]
    return rows + outside


def in_september(row: dict) -> bool:
    return row["usage_start_time"].startswith("2026-09")
