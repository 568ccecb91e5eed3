"""Write small AWS Data Exports CUR 2.0 deliveries for tests: real column names and types
(timestamps `timestamp[ms, tz=UTC]`, costs double, `product` / `resource_tags`
map<string,string>), the `data/BILLING_PERIOD=YYYY-MM/` layout and the month's manifest."""

from __future__ import annotations

import csv
import gzip
import io
import itertools
import json
import logging
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from cost_pipeline.config import parse_config
from cost_pipeline.ingest.billing import build_billing_facts

EXPORT = "ml-cur"
S3_EXPORT = f"s3://billing-bucket/exports/cur/{EXPORT}"
HOUR = timedelta(hours=1)
T0 = datetime(2026, 7, 1, tzinfo=UTC)  # the test month: July 2026
LOG = logging.getLogger("test")

_TS = pa.timestamp("ms", tz="UTC")
_MAP = pa.map_(pa.string(), pa.string())
_F, _S = pa.float64(), pa.string()
COLUMNS: dict[str, pa.DataType] = {
    "bill_billing_period_start_date": _TS, "bill_billing_period_end_date": _TS,
    "bill_invoice_id": _S, "bill_payer_account_id": _S,
    "identity_line_item_id": _S, "identity_time_interval": _S,
    "line_item_availability_zone": _S, "line_item_currency_code": _S,
    "line_item_line_item_description": _S, "line_item_line_item_type": _S,
    "line_item_net_unblended_cost": _F, "line_item_operation": _S, "line_item_tax_type": _S,
    "line_item_product_code": _S, "line_item_resource_id": _S,
    "line_item_unblended_cost": _F, "line_item_usage_account_id": _S,
    "line_item_usage_amount": _F, "line_item_usage_end_date": _TS,
    "line_item_usage_start_date": _TS, "line_item_usage_type": _S,
    "pricing_unit": _S, "product": _MAP, "product_instance_type": _S,
    "product_product_family": _S, "product_region_code": _S, "product_servicecode": _S,
    "product_sku": _S,
    "reservation_effective_cost": _F, "reservation_net_effective_cost": _F,
    "reservation_net_unused_amortized_upfront_fee_for_billing_period": _F,
    "reservation_net_unused_recurring_fee": _F, "reservation_reservation_a_r_n": _S,
    "reservation_unused_amortized_upfront_fee_for_billing_period": _F,
    "reservation_unused_recurring_fee": _F, "resource_tags": _MAP,
    "savings_plan_net_savings_plan_effective_cost": _F,
    "savings_plan_savings_plan_a_r_n": _S, "savings_plan_savings_plan_effective_cost": _F,
    "savings_plan_total_commitment_to_date": _F, "savings_plan_used_commitment": _F,
}
# added by INCLUDE_SPLIT_COST_ALLOCATION_DATA (EKS pods, ECS tasks): pass as `extra=`
SPLIT_COLUMNS: dict[str, pa.DataType] = {
    "split_line_item_actual_usage": _F, "split_line_item_net_split_cost": _F,
    "split_line_item_net_unused_cost": _F, "split_line_item_parent_resource_id": _S,
    "split_line_item_public_on_demand_split_cost": _F,
    "split_line_item_public_on_demand_unused_cost": _F, "split_line_item_reserved_usage": _F,
    "split_line_item_split_cost": _F, "split_line_item_split_usage": _F,
    "split_line_item_split_usage_ratio": _F, "split_line_item_unused_cost": _F,
}
_ids = itertools.count(1)


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def line(cost: float = 1.0, *, start: datetime = T0, hours: float = 1.0, net: Any = "same",
         **cols: Any) -> dict[str, Any]:
    """One CUR 2.0 row: by default an on-demand EC2 m5.large hour in us-east-1.
    `net="same"` copies `cost` into line_item_net_unblended_cost; pass a number or None."""
    end = start + timedelta(hours=hours)
    row = dict.fromkeys(COLUMNS)
    row.update(
        bill_billing_period_start_date=T0, bill_billing_period_end_date=datetime(
            2026, 8, 1, tzinfo=UTC), bill_payer_account_id="999988887777",
        identity_line_item_id=f"line{next(_ids):05d}",
        identity_time_interval=f"{_stamp(start)}/{_stamp(end)}",
        line_item_availability_zone="us-east-1a", line_item_currency_code="USD",
        line_item_line_item_type="Usage", line_item_product_code="AmazonEC2",
        line_item_resource_id="i-0aaa", line_item_unblended_cost=cost,
        line_item_net_unblended_cost=cost if net == "same" else net,
        line_item_usage_account_id="111122223333", line_item_usage_amount=hours,
        line_item_usage_start_date=start, line_item_usage_end_date=end,
        line_item_usage_type="BoxUsage:m5.large", line_item_operation="RunInstances",
        pricing_unit="Hrs", product={"product_name": "Amazon Elastic Compute Cloud"},
        product_instance_type=None, product_product_family="Compute Instance",
        product_region_code="us-east-1", product_servicecode="AmazonEC2", product_sku="SKU1",
        resource_tags={},
    )
    row.update(cols)
    return row


def write_parquet(path: Path, rows: list[dict], *, drop: tuple[str, ...] = (),
                  types: dict[str, pa.DataType] | None = None,
                  extra: dict[str, pa.DataType] | None = None) -> Path:
    """`rows` as one parquet file with the CUR 2.0 schema (minus `drop`, `types` overriding,
    plus the `extra` columns)."""
    fields = [pa.field(name, (types or {}).get(name, kind))
              for name, kind in {**COLUMNS, **(extra or {})}.items() if name not in drop]
    schema = pa.schema(fields)
    data = {f.name: [_convert(r.get(f.name), f.type) for r in rows] for f in fields}
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(data, schema=schema), path, compression="snappy")
    return path


def _convert(value: Any, kind: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_map(kind) and isinstance(value, dict):
        return list(value.items())
    if pa.types.is_string(kind) and not isinstance(value, str):
        return str(value)
    return value


def binary_strings(table: pa.Table) -> pa.Table:
    """`table` with its string columns as plain binary: strings written without their UTF8
    annotation, as Impala and older Hive write them."""
    return pa.table({name: column.cast(pa.binary()) if pa.types.is_string(column.type)
                     else column for name, column in zip(table.column_names, table.columns,
                                                         strict=True)})


def write_maps_as(path: Path, rows: list[dict], shape: str, **kw: Any) -> Path:
    """`rows` as `write_parquet` writes them, with the map columns `product` and
    `resource_tags` held another way: `struct` (as pandas writes a column of dicts: one
    field per key any row has, NULL where a row lacks it), `pairs` (as pandas writes a map
    it read: lists of two strings), `entries` (as polars writes a map it read: lists of
    {key, value} structs), `records` (a BigQuery repeated record exported: lists of structs
    holding more than key and value) or `text` (a JSON object)."""
    types: dict[str, pa.DataType] = {}
    rows = [dict(r) for r in rows]
    entry = pa.struct([("key", pa.string()), ("value", pa.string())])
    if shape == "records":
        entry = pa.struct([("inherited", pa.bool_()), ("key", pa.string()),
                           ("value", pa.string())])
    for column in ("product", "resource_tags"):
        if shape == "struct":
            keys = list(dict.fromkeys(k for r in rows for k in (r.get(column) or {})))
            types[column] = pa.struct([(k, pa.string()) for k in keys])
            for r in rows:
                if r.get(column) is not None:
                    r[column] = {k: r[column].get(k) for k in keys}
        elif shape in ("pairs", "entries", "records"):
            types[column] = pa.list_(pa.list_(pa.string()) if shape == "pairs" else entry)
            for r in rows:
                if r.get(column) is not None:
                    r[column] = [[k, v] if shape == "pairs" else
                                 {"key": k, "value": v, "inherited": False}
                                 for k, v in r[column].items()]
        else:
            types[column] = pa.string()
            for r in rows:
                if r.get(column) is not None:
                    r[column] = json.dumps(r[column])
    return write_parquet(path, rows, types=types, **kw)


def csv_bytes(rows: list[dict], *, drop: tuple[str, ...] = (),
              extra: dict[str, pa.DataType] | None = None, delimiter: str = ",",
              names: list[str] | None = None) -> bytes:
    """`rows` as an export in file format TEXT_OR_CSV writes them: a header of the CUR 2.0
    columns (minus `drop`, plus `extra`; or `names`), timestamps as ISO 8601 instants
    (`2026-07-01T00:00:00Z`), maps as JSON objects, an empty field for NULL."""
    if names is None:
        names = [name for name in {**COLUMNS, **(extra or {})} if name not in drop]
    out = io.StringIO()
    # records end in CRLF, so that a value holding either character alone is quoted
    writer = csv.writer(out, delimiter=delimiter, lineterminator="\r\n")
    writer.writerow(names)
    for row in rows:
        writer.writerow([_csv_field(row.get(name)) for name in names])
    return out.getvalue().encode("utf-8")


def _csv_field(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, list):  # a map as pyarrow reads it: (key, value) pairs
        value = dict(value)
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)  # a float's shortest round-trip text


def write_compressed(path: Path, data: bytes, compression: str) -> Path:
    """`data` at `path` + `.csv.gz`, `.csv.zip` (one CSV inside) or `.csv`."""
    suffix = {"gzip": ".csv.gz", "zip": ".csv.zip"}.get(compression, ".csv")
    out = path.with_name(path.name + suffix)
    out.parent.mkdir(parents=True, exist_ok=True)
    if compression == "gzip":
        out.write_bytes(gzip.compress(data))
    elif compression == "zip":
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr(f"{path.name}.csv", data)
    else:
        out.write_bytes(data)
    return out


def export_as_csv(export: Path, out: Path, compression: str = "gzip") -> Path:
    """A copy of the parquet export `export` at `out` as the same export in file format
    TEXT_OR_CSV would deliver it: each data file as CSV (`csv_bytes`), each manifest listing
    the CSV files instead."""
    for manifest in export.glob("metadata/**/*Manifest.json"):
        doc = json.loads(manifest.read_text(encoding="utf-8"))
        doc["dataFiles"] = [uri.removesuffix(".snappy.parquet").removesuffix(".parquet")
                            + {"gzip": ".csv.gz", "zip": ".csv.zip"}.get(compression, ".csv")
                            for uri in doc["dataFiles"]]
        copy = out / manifest.relative_to(export)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(json.dumps(doc), encoding="utf-8")
    for data in export.glob("data/**/*.parquet"):
        table = pq.read_table(data)
        stem = data.name.removesuffix(".snappy.parquet").removesuffix(".parquet")
        write_compressed(out / data.parent.relative_to(export) / stem,
                         csv_bytes(table.to_pylist(), names=table.column_names), compression)
    return out


def write_csv_export(root: Path, files: dict[str, list[dict]], *, manifest: bool = True,
                     compression: str = "gzip", **csv_kw: Any) -> Path:
    """`write_export` for an export in file format TEXT_OR_CSV: each file's rows as CSV
    (`csv_bytes`), gzipped (`name.csv.gz`), zipped (`name.csv.zip`, one CSV inside) or
    plain (`name.csv`) as `compression` says; `files` names them without suffix."""
    export = root / EXPORT
    uris = []
    for name, rows in files.items():
        path = write_compressed(month_dir(export) / name, csv_bytes(rows, **csv_kw),
                                compression)
        uris.append(f"{S3_EXPORT}/data/BILLING_PERIOD=2026-07/{path.name}")
    if manifest:
        write_manifest(export, uris)
    return export


def month_dir(export: Path, kind: str = "data", month: str = "2026-07") -> Path:
    return export / kind / f"BILLING_PERIOD={month}"


def write_export(root: Path, files: dict[str, list[dict]], *, manifest: bool = True,
                 month: str = "2026-07", table_config: dict | None = None,
                 **parquet_kw: Any) -> Path:
    """An export folder `<root>/ml-cur` with `files` (name → rows) in the month's data folder
    and, with `manifest`, the month's manifest listing exactly those files."""
    export = root / EXPORT
    uris = []
    for name, rows in files.items():
        write_parquet(month_dir(export, month=month) / name, rows, **parquet_kw)
        uris.append(f"{S3_EXPORT}/data/BILLING_PERIOD={month}/{name}")
    if manifest:
        write_manifest(export, uris, month=month, table_config=table_config)
    return export


def write_mixed_tag_export(root: Path) -> Path:
    """A month whose export changed its tag column mid-month: `a.parquet` holds
    resource_tags, `b.parquet` CUR 2.0's `tags` column instead (whose other keys' sources
    are an account's tag and a cost category), `c.parquet` both (the same resource tags
    twice). Lines `a1`, `b1`, `c1` carry run r1's tag, `a2`, `b2`, `c2` none of their own
    (`c2`'s `tags` column holds a cost category: `{}` were it read)."""
    tags = pa.map_(pa.string(), pa.string())
    export = root / EXPORT
    data = month_dir(export)
    write_parquet(data / "a.parquet", [
        line(1.0, identity_line_item_id="a1", line_item_resource_id="i-0a",
             resource_tags={"user:run_id": "r1", "user:team": "vision"}),
        line(2.0, identity_line_item_id="a2", line_item_resource_id="i-0d", resource_tags=None),
    ])
    write_parquet(data / "b.parquet", [
        line(4.0, identity_line_item_id="b1", line_item_resource_id="i-0b",
             tags={"resourceTags/user:run_id": "r1", "resourceTags/user:team": "vision",
                   "accountTag/team": "finance"}),
        line(8.0, identity_line_item_id="b2", line_item_resource_id="i-0e",
             tags={"costCategory/project": "research"}),
    ], drop=("resource_tags",), extra={"tags": tags})
    write_parquet(data / "c.parquet", [
        line(16.0, identity_line_item_id="c1", line_item_resource_id="i-0c",
             resource_tags={"user:run_id": "r1"}, tags={"resourceTags/user:run_id": "r1"}),
        line(32.0, identity_line_item_id="c2", line_item_resource_id="i-0f",
             resource_tags=None, tags={"costCategory/project": "research"}),
    ], extra={"tags": tags})
    write_manifest(export, [f"{S3_EXPORT}/data/BILLING_PERIOD=2026-07/{name}"
                            for name in ("a.parquet", "b.parquet", "c.parquet")])
    return export


MIXED_TAGS = {"a1": {"user:run_id": "r1", "user:team": "vision"}, "a2": None,
              "b1": {"user:run_id": "r1", "user:team": "vision"}, "b2": {},
              "c1": {"user:run_id": "r1"}, "c2": None}


def write_manifest(export: Path, uris: list[str], *, month: str = "2026-07",
                   table_config: dict | None = None) -> Path:
    meta = month_dir(export, "metadata", month)
    meta.mkdir(parents=True, exist_ok=True)
    doc = {
        "executionId": f"exec-{next(_ids)}", "exportName": EXPORT, "billingPeriod": month,
        "tableConfigurations": {"COST_AND_USAGE_REPORT": {
            "TIME_GRANULARITY": "HOURLY", "INCLUDE_RESOURCES": "TRUE", **(table_config or {})}},
        "dataFiles": uris,
    }
    path = meta / f"{EXPORT}-Manifest.json"
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return path


def config(base: Path, export: Path | None = None, **extra: Any):
    data = {"billing": [{"kind": "aws_cur2", "path": str(export)}] if export else [], **extra}
    return parse_config(data, base)


def build(con: duckdb.DuckDBPyConnection, cfg, month=None):
    from datetime import date

    return build_billing_facts(con, cfg, month or date(2026, 7, 1), LOG)


def facts(con: duckdb.DuckDBPyConnection, month: str = "2026-07-01") -> dict[str, dict]:
    """billing_facts of the month keyed by the line id (the middle of x_SourceLine)."""
    cur = con.execute("SELECT * FROM billing_facts WHERE month = ? ORDER BY x_SourceLine",
                      [month])
    names = [d[0] for d in cur.description]
    out = {}
    for values in cur.fetchall():
        row = dict(zip(names, values, strict=True))
        out[row["x_SourceLine"].split(":")[1]] = row
    return out
