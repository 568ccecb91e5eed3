"""The attribution as a team would write it by hand in pandas: read the files into
DataFrames, merge runs × lines on the resource, keep the overlapping pairs, compute the
shares, group by purpose class. The same rules and subset as `bench/reference.py`.

    python bench/pandas_impl.py DATA_DIR      # prints {"totals": {class: cost}, ...} as JSON

The merges run a chunk of lines at a time (about PAIRS_PER_CHUNK candidate pairs each):
merging on the resource alone pairs every line with every run that ever used its resource
(~runs × 744 candidate rows per resource kind, ~220M rows at 100k runs with the transfer
lines: tens of GB at once), which is what a team ends up doing after the first MemoryError.
"""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import unquote_plus

import impl_cli
import numpy as np
import pandas as pd
from reference import MONTH_END, month_inputs

PAIRS_PER_CHUNK = 4_000_000
HOUR = pd.Timedelta(hours=1)
USAGE_TYPES = ["Usage", "DiscountedUsage", "SavingsPlanCoveredUsage", "SavingsPlanNegation",
               "Refund"]
ACCELERATORS = {"p4d.24xlarge": 8, "p5.48xlarge": 8, "g5.12xlarge": 4, "g5.xlarge": 1}
CUR_COLUMNS = ["line_item_line_item_type", "line_item_usage_start_date",
               "line_item_usage_end_date", "line_item_resource_id", "line_item_unblended_cost",
               "line_item_net_unblended_cost", "line_item_usage_amount", "line_item_usage_type",
               "line_item_product_code", "product_instance_type", "product_product_family"]


def read_lines(inputs: dict) -> pd.DataFrame:
    cur = pd.concat([pd.read_parquet(f, columns=CUR_COLUMNS) for f in inputs["cur_files"]],
                    ignore_index=True)
    cur = cur.rename(columns={"line_item_usage_start_date": "s", "line_item_usage_end_date": "e",
                              "line_item_resource_id": "rid"})
    for column in ("s", "e"):  # zoned timestamps (AWS's typing) as UTC wall-clock times
        if isinstance(cur[column].dtype, pd.DatetimeTZDtype):
            cur[column] = cur[column].dt.tz_convert(None)
    for column in ("line_item_unblended_cost", "line_item_net_unblended_cost",
                   "line_item_usage_amount"):
        if not pd.api.types.is_numeric_dtype(cur[column]):  # `generate.py --amounts text`
            cur[column] = pd.to_numeric(cur[column])
    cur["c"] = cur.line_item_net_unblended_cost.fillna(cur.line_item_unblended_cost).fillna(0)
    usage_type = cur.line_item_usage_type.fillna("")
    box = usage_type.str.contains(r"(?:^|-)(?:BoxUsage|SpotUsage|HostUsage)(?::|$)")
    cur["hours"] = cur.line_item_usage_amount.where(box)
    itype = cur.product_instance_type.fillna(usage_type.str.split(":").str[1]).fillna("")
    gpu = box & itype.str.match(r"^(?:p|g|gr|trn|inf|dl)\d")
    cur["g"] = np.where(gpu, itype.map(ACCELERATORS).fillna(1), 0)
    buckets = set(inputs["dataset_buckets"])
    bucket = (cur.line_item_product_code == "AmazonS3") | cur.rid.isin(buckets)
    transfer = (usage_type.str.contains(r"DataTransfer|-Out-Bytes|-In-Bytes")
                | (cur.product_product_family == "Data Transfer"))
    usage = cur.line_item_line_item_type.isin(USAGE_TYPES)
    cur["rule"] = np.select(
        [~usage, bucket & transfer, bucket],
        ["non_usage", "bucket_transfer", "bucket_storage"], default="compute")
    return cur


def read_runs(inputs: dict) -> pd.DataFrame:
    runs = pd.read_parquet(inputs["runs_file"])
    runs["re"] = runs.end_time.where(runs.status != "RUNNING", pd.Timestamp(MONTH_END))
    runs["rs"] = runs.start_time
    runs["cls"] = np.select(
        [(runs.purpose == "search") | runs.search_id.notna(), runs.purpose == "production",
         runs.purpose == "preprocess"], ["search", "production", "preprocessing"],
        default="other")
    return runs


def chunked_merge(lines: pd.DataFrame, runs: pd.DataFrame, on: tuple[str, str]) -> pd.DataFrame:
    """lines × runs on a key, keeping the pairs whose periods overlap, chunk by chunk: as
    many lines per chunk as keep one merge near PAIRS_PER_CHUNK rows."""
    fan_out = int(runs[on[1]].value_counts().max()) if len(runs) else 1
    step = max(1, PAIRS_PER_CHUNK // fan_out)
    kept = []
    for start in range(0, len(lines), step):
        pairs = lines.iloc[start:start + step].merge(runs, left_on=on[0], right_on=on[1])
        kept.append(pairs[(pairs.rs < pairs.e) & (pairs.re > pairs.s)])
    return pd.concat(kept, ignore_index=True) if kept else pd.DataFrame()


def compute_claims(cur: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    lines = cur[(cur.rule == "compute") & cur.rid.notna()].copy()
    summed = lines.groupby(["rid", "s", "e"]).hours.transform("sum")
    lines["d"] = summed.where(summed > 0, (lines.e - lines.s) / HOUR)
    lines["k"] = lines.index
    claimants = runs[runs.re.notna()].explode("resource_ids")
    claimants = claimants[["run_id", "rs", "re", "gpus", "cls", "resource_ids"]].drop_duplicates(
        ["run_id", "resource_ids"])
    pairs = chunked_merge(lines[["k", "rid", "s", "e", "d", "g"]], claimants,
                          ("rid", "resource_ids"))
    overlap = (np.minimum(pairs.e, pairs.re) - np.maximum(pairs.s, pairs.rs)) / HOUR
    gpus = pairs.gpus.astype("float64")
    factor = np.where(gpus.notna() & (pairs.g > 0), np.minimum(gpus, pairs.g) / pairs.g, 1.0)
    pairs["share"] = np.minimum(1.0, overlap / pairs.d) * factor
    return pairs[["k", "cls", "share"]]


def listed_objects(inputs: dict) -> pd.DataFrame:
    """bucket, key, size and snapshot day ("" for a plain listing, its month-end objects)."""
    frames = []
    for file, day in zip(inputs["inventory_files"], inputs["inventory_dates"], strict=True):
        if day is None:
            objects = pd.read_csv(file, parse_dates=["last_modified"])
            objects = objects[objects.last_modified.dt.tz_localize(None)
                              < pd.Timestamp(MONTH_END)]
        else:  # a daily S3 Inventory report's data file: headerless, keys URL-encoded
            objects = pd.read_csv(file, header=None, usecols=[0, 1, 2],
                                  names=["bucket", "key", "size"])
            objects["key"] = objects.key.map(unquote_plus)
        frames.append(objects[["bucket", "key", "size"]].assign(day=day or ""))
    return pd.concat(frames, ignore_index=True)


def storage_claims(cur: pd.DataFrame, runs: pd.DataFrame, inputs: dict) -> pd.DataFrame:
    objects = listed_objects(inputs)
    prefix = inputs["prefix"]
    parts = objects.key.str[len(prefix):].str.split("/")
    inside = objects.key.str.startswith(prefix) & (parts.str.len() >= 2)
    objects["run_id"] = parts.str[0].where(inside)
    bucket_bytes = objects.groupby(["bucket", "day"], as_index=False)["size"].sum()
    class_bytes = (objects.merge(runs[["run_id", "cls"]], on="run_id")
                   .groupby(["bucket", "day", "cls"], as_index=False)["size"].sum())
    # the snapshots: the objects' days, and those of reports listing no object
    snapshots = pd.concat([bucket_bytes[["bucket", "day"]], pd.DataFrame(
        {"bucket": inputs["snapshot_buckets"], "day": inputs["snapshot_days"]})])
    lines = cur[cur.rule == "bucket_storage"][["rid", "s"]].reset_index(names="k")
    # a line reads its day's snapshot, else the bucket's latest (the month-end listing)
    latest = snapshots.groupby("bucket")["day"].max()
    same_day = lines.s.dt.strftime("%Y-%m-%d")
    dated = pd.MultiIndex.from_frame(snapshots)
    lines["day"] = same_day.where(pd.MultiIndex.from_arrays([lines.rid, same_day]).isin(dated),
                                  lines.rid.map(latest))
    shares = (lines.merge(class_bytes, left_on=["rid", "day"], right_on=["bucket", "day"])
              .merge(bucket_bytes.rename(columns={"size": "total"}), on=["bucket", "day"]))
    shares = shares[shares.total > 0]
    shares["share"] = shares["size"] / shares.total
    return shares[["k", "cls", "share"]]


def transfer_claims(cur: pd.DataFrame, runs: pd.DataFrame, inputs: dict) -> pd.DataFrame:
    datasets = pd.DataFrame({"name": inputs["dataset_names"], "bucket": inputs["dataset_buckets"],
                             "ds_region": inputs["dataset_regions"]})
    lines = cur[cur.rule == "bucket_transfer"][["rid", "s", "e"]].reset_index(names="k")
    lines = lines.merge(datasets, left_on="rid", right_on="bucket")
    readers = runs[runs.re.notna()][["run_id", "rs", "re", "cls", "dataset", "region"]]
    pairs = chunked_merge(lines, readers, ("name", "dataset"))
    # regions compared whatever their case and surrounding blanks, as macros.sql region_key
    blanks = " \t\n\v\f\r"
    pairs = pairs[pairs.region.notna()]
    pairs = pairs[pairs.region.astype(str).str.strip(blanks).str.lower()
                  != pairs.ds_region.astype(str).str.strip(blanks).str.lower()]
    if pairs.empty:
        return pd.DataFrame(columns=["k", "cls", "share"])
    pairs["overlap"] = (np.minimum(pairs.e, pairs.re) - np.maximum(pairs.s, pairs.rs)) / HOUR
    per_class = pairs.groupby(["k", "cls"], as_index=False).overlap.sum()
    per_class["share"] = per_class.overlap / per_class.groupby("k").overlap.transform("sum")
    return per_class[["k", "cls", "share"]]


def run(data: Path) -> dict:
    inputs = month_inputs(data)
    t0 = time.perf_counter()
    cur, runs = read_lines(inputs), read_runs(inputs)
    claims = pd.concat([compute_claims(cur, runs), storage_claims(cur, runs, inputs),
                        transfer_claims(cur, runs, inputs)], ignore_index=True)
    claimed = claims.groupby("k").share.sum()
    claims["cost"] = (claims.k.map(cur.c) * claims.share
                      / claims.k.map(claimed).clip(lower=1.0))
    totals = claims.groupby("cls").cost.sum().to_dict()
    usage = cur[cur.rule != "non_usage"]
    kept = 1 - usage.index.to_series().map(claimed).fillna(0).clip(upper=1.0)
    totals["untracked"] = float((usage.c * kept).sum())
    totals["unallocated"] = float(cur.c[cur.rule == "non_usage"].sum())
    return {"totals": {k: float(v) for k, v in totals.items()},
            "seconds": round(time.perf_counter() - t0, 3), "claims": len(claims)}


if __name__ == "__main__":
    impl_cli.main(run, __doc__)
