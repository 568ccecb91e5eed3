"""Writing hand-made rows straight into the warehouse tables, for tests of the SQL."""

from __future__ import annotations

from datetime import date

import duckdb

from cost_pipeline.warehouse import ensure_schema, summarize_month

BILLING_DEFAULTS = {
    "ProviderName": "AWS", "ServiceName": "test", "ServiceCategory": "Compute",
    "ChargeClass": None, "RegionId": "us-east-1", "SkuId": None, "ConsumedQuantity": None,
    "ConsumedUnit": None, "BillingCurrency": "USD", "CommitmentDiscountStatus": None,
    "Tags": None, "x_AcceleratorCount": 0, "x_UsageHours": None, "x_InstanceUsage": False,
    "x_InstanceType": None, "x_ResourceKind": "other", "x_LineItemType": "Usage",
    "x_InvoiceId": None, "ResourceId": None, "BillingPeriodStart": None,
}
RUN_DEFAULTS = {
    "source": "test", "experiment": None, "model": None, "purpose": None, "search_id": None,
    "seed": None, "config_id": None, "end_time": None, "resource_ids": [], "gpus": None,
    "region": None, "dataset": None, "dataset_region": None, "input_hash": None,
    "transform_version": None, "metric_name": None, "metric_value": None, "keep": False,
    "deleted": False, "parent_run_id": None, "team": None,
}
INVENTORY_DEFAULTS = {"source": "test", "snapshot_date": None, "prefix": None, "run_id": None,
                      "checkpoint": None, "last_modified": None}


def insert(con: duckdb.DuckDBPyConnection, table: str, month: date, rows: list[dict],
           defaults: dict) -> None:
    ensure_schema(con)
    if table == "attribution":  # a view: its rows are stored keyed by key_hash(x_SourceLine)
        for row in rows:
            _insert_attribution(con, {**defaults, **row, "month": month})
        summarize_month(con, month)  # and summed per run, as the attribution step does
        return
    columns = [c for (c,) in con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
        "ORDER BY ordinal_position", [table]).fetchall()]
    # rows naming the same columns (and each a Tags map, or none) go in one multi-row
    # INSERT (a statement costs ~3 ms, whatever its rows), in their order within it
    batches: dict[tuple, list[list]] = {}
    for row in rows:
        full = {**defaults, **row, "month": month}
        if "BilledCost" in columns and "BilledCost" not in row:
            full["BilledCost"] = full.get("EffectiveCost", 0.0)
        if table == "billing_facts" and full.get("Tags") is not None:
            tags = full["Tags"]
            full["Tags"] = {"key": list(tags.keys()), "value": list(tags.values())}
        names = tuple(c for c in columns if c in full)
        tagged = "Tags" in names and full["Tags"] is not None
        values: list = []
        for c in names:
            if c == "Tags" and tagged:
                values += [full[c]["key"], full[c]["value"]]
            else:
                values.append(full[c])
        batches.setdefault((names, tagged), []).append(values)
    for key, batch in batches.items():
        _insert_rows(con, table, key, batch)


def _insert_rows(con: duckdb.DuckDBPyConnection, table: str, key: tuple,
                 batch: list[list]) -> None:
    names, tagged = key
    one = "(" + ", ".join("MAP(?::VARCHAR[], ?::VARCHAR[])" if c == "Tags" and tagged else "?"
                          for c in names) + ")"
    con.execute(f"INSERT INTO {table} ({', '.join(names)}) VALUES "
                + ", ".join(one for _ in batch), [v for values in batch for v in values])


def _insert_attribution(con: duckdb.DuckDBPyConnection, row: dict) -> None:
    names = [c for c in row if c not in ("x_SourceLine", "run_id")]
    con.execute(
        f"INSERT INTO attribution_rows ({', '.join(names)}, line_key, run_hash) "
        f"VALUES ({', '.join('?' for _ in names)}, key_hash(?), run_hash_of(?::VARCHAR))",
        [row[c] for c in names] + [row["x_SourceLine"], row.get("run_id")])


def insert_lines(con, month, lines):
    insert(con, "billing_facts", month, lines, BILLING_DEFAULTS)


def insert_runs(con, month, runs):
    insert(con, "tracker_runs", month, runs, RUN_DEFAULTS)


def insert_inventory(con, month, objects):
    insert(con, "checkpoint_inventory", month, objects, INVENTORY_DEFAULTS)


def insert_listing(con, month, listing):
    """`listing`'s objects, and its entries whose `key` is None as dated reports that listed
    no object (`checkpoint_snapshots` rows: that day's snapshot of the bucket is empty)."""
    insert_inventory(con, month, [o for o in listing if o.get("key") is not None])
    for report in listing:
        if report.get("key") is None:
            con.execute("INSERT INTO checkpoint_snapshots VALUES (?, 'test', ?, ?)",
                        [month, report["bucket"], report["snapshot_date"]])
