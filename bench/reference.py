"""The reference: the month's attribution as one hand-written DuckDB statement, in memory,
straight from the generated files (CUR 2.0 parquet, runs parquet, inventory) — the
interval join of SPEC §6 and the aggregation per purpose class, nothing persisted.

    python bench/reference.py DATA_DIR        # prints {"totals": {class: cost}, ...} as JSON
    python bench/reference.py DATA_DIR --reconciliation   # {"reconciliation": {...}}, untimed

A faithful but minimal subset of `assets/attribution.sql`: compute claims by the runs'
listed resources (a range join on resource + overlapping periods), d from the usage hours,
the GPU factor, over-claimed shares scaled down, bucket storage split by the runs' listed
bytes (the month-end listing, or each day's snapshot when daily S3 Inventory reports list
the bucket: `generate.py --inventory daily`), cross-region transfer split by overlap,
non-usage lines unallocated, a savings plan's and reservations' lines at AWS's amortized
cost when the export carries their columns (`generate.py --commitments`), EKS pods' split
rows at their split cost, taken out of their node's hour (`generate.py --split`), and
SageMaker training jobs (`generate.py --sagemaker`: a job claimed by its name or ARN, its
hours per instance, G = instances × the type's accelerators). Left out because the
generated month has none of them: run tags on lines, sweep parents, the net commitment
columns, a pod whose node's row is absent or whose split exceeds it.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import impl_cli
import yaml

MONTH, MONTH_END = "2026-07", "2026-08-01"  # the generated month

# a line's cost: the net (else gross) unblended cost, or, in an export with commitment
# columns, AWS's amortized-cost rule (SPEC §5) on the gross ones the generator writes
PLAIN_COST = "coalesce(line_item_net_unblended_cost, line_item_unblended_cost, 0)"
AMORTIZED_COST = f"""CASE line_item_line_item_type
            WHEN 'SavingsPlanCoveredUsage' THEN savings_plan_savings_plan_effective_cost
            WHEN 'DiscountedUsage' THEN reservation_effective_cost
            WHEN 'SavingsPlanNegation' THEN 0
            WHEN 'SavingsPlanRecurringFee'
                THEN savings_plan_total_commitment_to_date - savings_plan_used_commitment
            WHEN 'RIFee' THEN coalesce(reservation_unused_recurring_fee, 0)
            ELSE {PLAIN_COST} END"""

_CTES = """
WITH
datasets AS (
    SELECT unnest($dataset_names) AS name, unnest($dataset_buckets) AS bucket,
           unnest($dataset_regions) AS region
),
raw AS (
    SELECT
        line_item_line_item_type AS line_type,
        -- UTC wall-clock times from naive or zoned columns alike (the instant's epoch)
        make_timestamp(epoch_us(line_item_usage_start_date)) AS s,
        make_timestamp(epoch_us(line_item_usage_end_date)) AS e,
        nullif(line_item_resource_id, '') AS rid,
        {cost} AS c,
        line_item_usage_type AS usage_type,
        line_item_product_code AS product,
        product_product_family AS family,
        -- a savings plan's negation mirrors its covered line without hours
        CASE WHEN regexp_matches(line_item_usage_type, '(^|-)(BoxUsage|SpotUsage|HostUsage)(:|$)')
                  AND line_item_line_item_type <> 'SavingsPlanNegation'
             THEN line_item_usage_amount END AS hours,
        coalesce(product_instance_type, split_part(line_item_usage_type, ':', 2))
            AS itype{raw_extra}
    FROM read_parquet($cur_files)
),{stages}
lines AS (
    SELECT
        row_number() OVER () AS k, s, e, rid, c, hours{line_extra},
        CASE WHEN hours IS NOT NULL
                  AND regexp_matches(coalesce(itype, ''), '^(p|g|gr|trn|inf|dl)\\d')
             THEN CASE itype WHEN 'p4d.24xlarge' THEN 8 WHEN 'p5.48xlarge' THEN 8
                             WHEN 'g5.12xlarge' THEN 4 WHEN 'g5.xlarge' THEN 1 ELSE 1 END
                  * {instances}
             ELSE 0 END AS g,
        CASE
            WHEN line_type NOT IN ('Usage', 'DiscountedUsage', 'SavingsPlanCoveredUsage',
                                   'SavingsPlanNegation', 'Refund') THEN 'non_usage'
            WHEN (product = 'AmazonS3' OR rid IN (SELECT bucket FROM datasets))
                 AND (regexp_matches(usage_type, '(DataTransfer|-Out-Bytes|-In-Bytes)')
                      OR family = 'Data Transfer') THEN 'bucket_transfer'
            WHEN product = 'AmazonS3' OR rid IN (SELECT bucket FROM datasets)
                THEN 'bucket_storage'
            ELSE 'compute'
        END AS rule
    FROM {costed}
),
all_runs AS (
    SELECT run_id, gpus, region, dataset, resource_ids, start_time AS rs,
        CASE WHEN status = 'RUNNING' THEN CAST($month_end AS TIMESTAMP) ELSE end_time END AS re,
        CASE WHEN purpose = 'search' OR search_id IS NOT NULL THEN 'search'
             WHEN purpose = 'production' THEN 'production'
             WHEN purpose = 'preprocess' THEN 'preprocessing' ELSE 'other' END AS cls
    FROM read_parquet($runs_file)
),
runs AS (SELECT * FROM all_runs WHERE re IS NOT NULL),
run_resources AS ({run_resources}),
periods AS (
    SELECT rid, s, e,
        CASE WHEN coalesce(sum(hours), 0) > 0 THEN sum(hours) ELSE epoch(e - s) / 3600.0 END AS d
    FROM lines WHERE rule = 'compute' AND rid IS NOT NULL
    GROUP BY rid, s, e
),
compute_shares AS (
    -- the interval join: a run claims a line of a resource it lists when their periods overlap
    SELECT l.k, rr.cls,
        least(1.0, epoch(least(l.e, rr.re) - greatest(l.s, rr.rs)) / 3600.0 / p.d)
          * CASE WHEN rr.gpus IS NOT NULL AND l.g > 0 THEN least(rr.gpus, l.g) / l.g
                 ELSE 1.0 END AS share
    FROM lines l
    JOIN run_resources rr ON rr.rid = l.rid AND rr.rs < l.e AND rr.re > l.s
    JOIN periods p ON p.rid = l.rid AND p.s = l.s AND p.e = l.e
    WHERE l.rule = 'compute'
),
inventory_reports AS (
    SELECT unnest($inventory_files) AS file, CAST(unnest($inventory_dates) AS DATE) AS day
),
objects AS (
    -- a daily report's objects are its day's snapshot; a plain listing's, those written
    -- before the month's end (day null)
    SELECT o.bucket, o.key, o.size, r.day
    FROM {inventory} o JOIN inventory_reports r ON r.file = o.filename
    WHERE r.day IS NOT NULL OR o.written < CAST($month_end AS TIMESTAMP)
),
snapshots AS (
    -- a bucket's dated snapshots: its objects' days, and the days of reports listing none
    SELECT DISTINCT bucket, day FROM objects
    UNION
    SELECT unnest(CAST($snapshot_buckets AS VARCHAR[])), unnest(CAST($snapshot_days AS DATE[]))
),
bucket_bytes AS (SELECT bucket, day, sum(size) AS bytes FROM objects GROUP BY ALL),
class_bytes AS (
    SELECT o.bucket, o.day, r.cls, sum(o.size) AS bytes
    FROM objects o
    JOIN all_runs r ON r.run_id = split_part(substr(o.key, length($prefix) + 1), '/', 1)
    WHERE starts_with(o.key, $prefix)
      AND length(string_split(substr(o.key, length($prefix) + 1), '/')) >= 2
    GROUP BY ALL
),
storage_days AS (
    -- a line reads its day's snapshot, else the bucket's latest (the month-end listing)
    SELECT l.k, l.rid, coalesce(same_day.day, latest.day) AS day
    FROM lines l
    LEFT JOIN snapshots same_day
      ON same_day.bucket = l.rid AND same_day.day = CAST(l.s AS DATE)
    LEFT JOIN (SELECT bucket, max(day) AS day FROM snapshots GROUP BY 1) latest
      ON latest.bucket = l.rid
    WHERE l.rule = 'bucket_storage'
),
storage_shares AS (
    SELECT sd.k, cb.cls, cb.bytes / bb.bytes AS share
    FROM storage_days sd
    JOIN bucket_bytes bb ON bb.bucket = sd.rid AND bb.day IS NOT DISTINCT FROM sd.day
    JOIN class_bytes cb ON cb.bucket = sd.rid AND cb.day IS NOT DISTINCT FROM sd.day
    WHERE bb.bytes > 0
),
transfer_overlaps AS (
    SELECT l.k, r.cls, epoch(least(l.e, r.re) - greatest(l.s, r.rs)) / 3600.0 AS overlap
    FROM lines l
    JOIN datasets ds ON ds.bucket = l.rid
    JOIN runs r ON r.dataset = ds.name AND r.rs < l.e AND r.re > l.s
     -- regions compared whatever their case and surrounding blanks, as macros.sql region_key
     AND lower(trim(r.region, ' ' || chr(9) || chr(10) || chr(11) || chr(12) || chr(13)))
         <> lower(trim(ds.region, ' ' || chr(9) || chr(10) || chr(11) || chr(12) || chr(13)))
    WHERE l.rule = 'bucket_transfer'
),
transfer_shares AS (
    SELECT k, cls, sum(overlap) / sum(sum(overlap)) OVER (PARTITION BY k) AS share
    FROM transfer_overlaps GROUP BY k, cls
),
claims AS (
    SELECT * FROM compute_shares
    UNION ALL SELECT * FROM storage_shares
    UNION ALL SELECT * FROM transfer_shares
),
claimed AS (SELECT k, sum(share) AS claimed FROM claims GROUP BY k)
"""

RUN_RESOURCES = "SELECT DISTINCT run_id, rs, re, gpus, cls, unnest(resource_ids) AS rid FROM runs"

# split cost allocation (SPEC §3): a pod's row (naming its node) costs its split cost, which
# its node's instance-usage line of the hour gives up; the pod is of its node's instance type
POD_COLUMNS = """,
        nullif(trim(split_line_item_parent_resource_id), '') AS parent,
        coalesce(split_line_item_net_split_cost, split_line_item_split_cost, 0) AS split_cost"""
SPLIT = """
pod_hours AS (
    SELECT parent, s, e, sum(split_cost) AS moved FROM raw WHERE parent IS NOT NULL GROUP BY ALL
),
split AS (
    SELECT r.* EXCLUDE (parent, split_cost) REPLACE (
        CASE WHEN r.parent IS NOT NULL THEN r.split_cost
             WHEN p.moved IS NOT NULL AND r.c > 0 THEN r.c - least(p.moved, r.c)
             ELSE r.c END AS c,
        coalesce(n.itype, r.itype) AS itype),
        n.itype IS NOT NULL AND regexp_matches(n.itype, '^(p|g|gr|trn|inf|dl)\\d') AS gpu_pod
    FROM raw r
    LEFT JOIN pod_hours p ON r.hours IS NOT NULL AND p.parent = r.rid AND p.s = r.s AND p.e = r.e
    LEFT JOIN (SELECT DISTINCT rid, s, e, itype FROM raw WHERE hours IS NOT NULL) n
      ON n.rid = r.parent AND n.s = r.s AND n.e = r.e
),"""

# SageMaker training (SPEC §3, §5): a job's line bills its instances' hours; its hours are
# per instance (the job's instances: the most instance-hours per hour any of its lines
# shows), its G the instances × the type's accelerators, and a run claims it by its name or
# its ARN (the ARN's name, lowercased)
CLAIM_KEY = """CASE WHEN {id} LIKE 'arn:%:sagemaker:%:training-job/%'
             THEN lower(split_part({id}, ':training-job/', 2)) ELSE {id} END"""
TRAIN_COLUMNS = """,
        line_item_usage_amount AS amount"""
TRAINED = """
job_instances AS (
    SELECT rid, usage_type, ceil(max(amount / (epoch(e - s) / 3600.0)) - 1e-9) AS n
    FROM {prev} WHERE product = 'AmazonSageMaker' AND e > s GROUP BY ALL
),
trained AS (
    SELECT r.* EXCLUDE (amount) REPLACE (
        CASE WHEN r.product = 'AmazonSageMaker' AND line_type <> 'SavingsPlanNegation'
                  AND regexp_matches(r.usage_type, '(^|-)Train(-Spot)?:')
             THEN r.amount / greatest(coalesce(j.n, 1), 1) ELSE r.hours END AS hours,
        regexp_replace(r.itype, '^ml\\.', '') AS itype,
        """ + CLAIM_KEY.format(id="r.rid") + """ AS rid),
        greatest(coalesce(j.n, 1), 1) AS instances
    FROM {prev} r
    LEFT JOIN job_instances j ON j.rid = r.rid AND j.usage_type = r.usage_type
),"""
TRAINED_RUN_RESOURCES = ("SELECT DISTINCT run_id, rs, re, gpus, cls, "
                         + CLAIM_KEY.format(id="rid") + " AS rid "
                         "FROM (SELECT *, unnest(resource_ids) AS rid FROM runs)")

# the month's cost per purpose class, untracked and unallocated
REFERENCE_SQL = _CTES.replace("{line_extra}", "") + """
SELECT cl.cls AS purpose_class, sum(l.c * cl.share / greatest(t.claimed, 1.0)) AS cost
FROM claims cl JOIN claimed t USING (k) JOIN lines l USING (k)
GROUP BY 1
UNION ALL
SELECT 'untracked', sum(l.c * (1 - least(coalesce(t.claimed, 0), 1.0)))
FROM lines l LEFT JOIN claimed t USING (k)
WHERE l.rule <> 'non_usage'
UNION ALL
SELECT 'unallocated', sum(c) FROM lines WHERE rule = 'non_usage'
"""


# the month's reconciliation (SPEC §7) from the same claims, untimed (bench/run.py compares it
# with the pipeline's `reconciliation` row): per GPU instance-usage line, its GPU-hours
# (usage hours × G) and S, the shares the runs claim of it. A run's final shares sum to
# min(S, 1): tracked = Σ GPU-hours × min(S, 1), the untracked cost c × (1 − min(S, 1)), an
# over-claimed line's excess (S − 1) × GPU-hours; in all (`all`) and per instance type
RECONCILIATION_SQL = _CTES.replace("{line_extra}", ", itype, gpu_pod") + """,
gpu_lines AS (
    -- (a pod's row on a GPU node: its cost, no GPU-hours, as its node's are billed once)
    SELECT l.itype, coalesce(l.hours * l.g, 0) AS gpu_hours, l.c, coalesce(t.claimed, 0) AS s
    FROM lines l LEFT JOIN claimed t USING (k)
    WHERE l.rule = 'compute' AND (l.g > 0 OR l.gpu_pod)
)
SELECT
    CASE WHEN grouping(itype) = 1 THEN 'all' ELSE itype END AS instance_type,
    sum(gpu_hours) AS billed_gpu_hours,
    sum(gpu_hours * least(s, 1.0)) AS tracked_gpu_hours,
    sum(gpu_hours * (1 - least(s, 1.0))) AS untracked_gpu_hours,
    sum(c) AS gpu_cost,
    sum(c * (1 - least(s, 1.0))) AS untracked_gpu_cost,
    sum(CASE WHEN s > 1 THEN (s - 1) * gpu_hours ELSE 0 END) AS over_claimed_gpu_hours
FROM gpu_lines
GROUP BY GROUPING SETS ((), (itype))
ORDER BY grouping(itype) DESC, itype
"""


def month_inputs(data: Path) -> dict:
    """The generated month's files and the config facts the attribution needs."""
    config = yaml.safe_load((data / "config.yaml").read_text(encoding="utf-8"))
    # the CUR's parquet files, whatever the pipeline reads (a `--bill focus` month's FOCUS
    # files, a `--cur-format csv` month's CSV ones)
    cur = sorted((data / "cur" / "bench-cur").glob("data/BILLING_PERIOD=*/**/*.parquet"))
    datasets = config.get("datasets") or {}
    checkpoints = config["checkpoints"][0]
    reports, snapshots = inventory_reports(data / checkpoints["path"])
    return {
        "cur_files": [str(p) for p in cur],
        "runs_file": str(data / config["tracker"][0]["path"]),
        "inventory_files": [file for file, _ in reports],
        "inventory_dates": [day for _, day in reports],
        "snapshot_buckets": [bucket for bucket, _ in snapshots],
        "snapshot_days": [day for _, day in snapshots],
        "prefix": checkpoints.get("prefix", ""),
        "dataset_names": list(datasets),
        "dataset_buckets": [d["bucket"] for d in datasets.values()],
        "dataset_regions": [d["region"] for d in datasets.values()],
    }


# the listing's objects: a plain CSV's, or a daily S3 Inventory's (headerless, quoted, keys
# URL-encoded, the schema `generate.py --inventory daily` writes)
PLAIN_INVENTORY = """(SELECT bucket, key, size, last_modified AS written, filename
      FROM read_csv($inventory_files, header = true, filename = true))"""
DAILY_INVENTORY = """(SELECT bucket, url_decode(key) AS key, size,
             CAST(rtrim(last_modified, 'Z') AS TIMESTAMP) AS written, filename
      FROM read_csv($inventory_files, header = false, filename = true, quote = '"',
                    columns = {'bucket': 'VARCHAR', 'key': 'VARCHAR', 'size': 'BIGINT',
                               'last_modified': 'VARCHAR', 'etag': 'VARCHAR',
                               'storage_class': 'VARCHAR'}))"""


def inventory_reader(inputs: dict) -> str:
    """The subquery reading the listing's objects (bucket, key, size, written, filename)."""
    return PLAIN_INVENTORY if inputs["inventory_dates"] == [None] else DAILY_INVENTORY


def inventory_reports(path: Path) -> tuple[list[tuple[str, str | None]], list[tuple[str, str]]]:
    """The listing's files holding a row and the snapshot day of each (a plain CSV's none,
    an S3 Inventory configuration folder's the month's reports', by their creation time),
    and every report's (source bucket, day): a report of no row is an empty snapshot."""
    if path.is_file():
        return [(str(path), None)], []
    reports, snapshots = [], []
    for manifest in sorted(path.glob("*/manifest.json")):
        doc = json.loads(manifest.read_text(encoding="utf-8"))
        day = datetime.fromtimestamp(int(doc["creationTimestamp"]) / 1000, UTC).date()
        if day.strftime("%Y-%m") == MONTH:
            snapshots.append((doc["sourceBucket"], day.isoformat()))
            for f in doc["files"]:
                file = path / "data" / f["key"].rsplit("/", 1)[-1]
                with gzip.open(file) as text:
                    if text.read(1):
                        reports.append((str(file), day.isoformat()))
    return reports, snapshots


# a CUR column holding an amount (a cost, a quantity, a commitment figure), by its name
AMOUNT_NAME = re.compile(r"_(cost|amount|fee|commitment|commitment_to_date|usage|ratio|"
                         r"fee_for_billing_period)$")


def for_export(con: duckdb.DuckDBPyConnection, sql: str, inputs: dict) -> str:
    """`sql` with the line's cost rule the export's columns call for, and the split pass when
    a line names a parent (an export selecting every column has the split columns, empty),
    the reader of the listing's files, and the CUR's amounts parsed where they are text."""
    cur_files = inputs["cur_files"]
    kinds = dict(row[:2] for row in con.execute("DESCRIBE SELECT * FROM read_parquet(?)",
                                                 [cur_files]).fetchall())
    columns = set(kinds)
    text = [c for c, kind in kinds.items() if kind == "VARCHAR" and AMOUNT_NAME.search(c)]
    if text:  # `generate.py --amounts text`
        sql = sql.replace("read_parquet($cur_files)", "(SELECT * REPLACE ({}) FROM "
                          "read_parquet($cur_files))".format(", ".join(
                              f"CAST(nullif(trim({c}), '') AS DOUBLE) AS {c}" for c in text)))
    split, trained = con.execute(
        "SELECT {}, count(*) FILTER (line_item_product_code = 'AmazonSageMaker') > 0 "
        "FROM read_parquet(?)".format(
            "count(nullif(trim(split_line_item_parent_resource_id), '')) > 0"
            if "split_line_item_parent_resource_id" in columns else "false"),
        [cur_files]).fetchone()
    # the lines pass through the stages the export needs: raw → split → trained → lines
    extra, stages, last = "", "", "raw"
    if split:
        extra, stages, last = extra + POD_COLUMNS, stages + SPLIT, "split"
    if trained:
        extra, stages = extra + TRAIN_COLUMNS, stages + TRAINED.replace("{prev}", last)
        last = "trained"
    return (sql.replace("{cost}", AMORTIZED_COST if "savings_plan_savings_plan_effective_cost"
                        in columns else PLAIN_COST).replace("{inventory}", inventory_reader(inputs))
            .replace("{raw_extra}", extra).replace("{stages}", stages)
            .replace("{costed}", last if split else f"(SELECT *, false AS gpu_pod FROM {last})")
            .replace("{instances}", "instances" if trained else "1")
            .replace("{run_resources}", TRAINED_RUN_RESOURCES if trained else RUN_RESOURCES))


def run(data: Path) -> dict:
    inputs = month_inputs(data)
    con = duckdb.connect()  # in memory, default settings: the reference is what DuckDB does
    con.execute("SET TimeZone = 'UTC'")
    sql = for_export(con, REFERENCE_SQL, inputs)
    t0 = time.perf_counter()
    rows = con.execute(sql, {**inputs, "month_end": MONTH_END}).fetchall()
    seconds = time.perf_counter() - t0
    return {"totals": {cls: float(cost or 0.0) for cls, cost in rows},
            "query_seconds": round(seconds, 3), "cur_files": len(inputs["cur_files"])}


def reconciliation(data: Path) -> dict:
    """The reconciliation's figures: the month's (`all`) and each accelerator type's."""
    inputs = month_inputs(data)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    cursor = con.execute(for_export(con, RECONCILIATION_SQL, inputs),
                         {**inputs, "month_end": MONTH_END})
    names = [d[0] for d in cursor.description][1:]
    return {"reconciliation": {kind: {n: float(v or 0.0) for n, v in zip(names, row, strict=True)}
                               for kind, *row in cursor.fetchall()}}


if __name__ == "__main__":
    if "--reconciliation" in sys.argv:
        sys.argv.remove("--reconciliation")
        impl_cli.main(reconciliation, __doc__)
    else:
        impl_cli.main(run, __doc__)
