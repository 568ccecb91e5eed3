-- Egress: what pulling data across regions cost, per run and dataset.
--
-- A run reads its dataset from another region when its region differs from the dataset's:
-- the region of the dataset in the config's `datasets`, else the run's own `dataset_region`,
-- compared whatever their case and surrounding blanks (macros.sql `region_key`: GCS's
-- `US-EAST1` is Compute's `us-east1`); the rows keep the regions as written.
-- Such a run's network cost this month is here: the cross-region reads billed on the
-- dataset's bucket (attribution rule bucket_transfer, SPEC §6 rule 5) and any other network
-- line the run claimed (rule compute, e.g. its instance's inter-region transfer). A run with
-- no region or no known dataset region is not counted (nothing says it crossed a region).
--
-- Transfer billed on a configured dataset's bucket that no run claimed (untracked) is a
-- cross-region pull too: it is a row of its own with run_id NULL, so the table adds up to
-- everything co-locating compute with data could save. Its dataset is named when only one
-- configured dataset lives in that bucket (matched as the attribution matches it: macros.sql
-- `claim_key`).
--
-- Parameters: $month. Temp table: config_datasets(name, bucket, region).
WITH tr AS (
    SELECT * FROM month_runs($month)  -- one row per run (macros.sql)
),
runs AS (
    SELECT
        r.run_id, key_hash(r.run_id) AS run_hash,  -- as attribution_rows names the run
        r.model, r.dataset, r.region AS run_region,
        d.bucket                              AS dataset_bucket,
        coalesce(d.region, r.dataset_region)  AS dataset_region
    FROM tr AS r
    LEFT JOIN config_datasets AS d ON d.name = r.dataset
),
bucket_datasets AS (
    -- by the bucket as the attribution matches it with a line's resource (macros.sql
    -- `claim_key`: an Azure storage account by its id in any case)
    SELECT
        claim_key(bucket)                                         AS bucket_key,
        min(bucket)                                               AS bucket,
        CASE WHEN count(*) = 1 THEN min(name) END                 AS dataset,
        CASE WHEN count(DISTINCT region_key(region)) = 1 THEN min(region) END
            AS dataset_region
    FROM config_datasets
    GROUP BY claim_key(bucket)
),
network_lines AS (
    -- the month's network lines only: the join's hash table holds these, not every line
    SELECT key_hash(x_SourceLine) AS line_key, ResourceId, ConsumedQuantity,
           ConsumedUnit
    FROM billing_facts
    WHERE month = $month AND x_CostComponent = 'network'
),
network AS (
    SELECT
        a.run_hash, a.purpose_class, a.rule, a.cost, l.ResourceId,
        a.share * l.ConsumedQuantity * gigabytes_per_unit(l.ConsumedUnit)        AS gb
    FROM attribution_rows AS a
    JOIN network_lines AS l ON l.line_key = a.line_key
    WHERE a.month = $month AND a.component = 'network'
),
sums AS (
    -- summed per run (or untracked bucket) and purpose class before the runs' attributes are
    -- joined: those are one row per run, so the groups are the output's, and the join and
    -- the grouping see a row per run rather than a row per (line, run)
    SELECT
        run_hash, purpose_class,
        CASE WHEN run_hash IS NULL THEN ResourceId END                   AS bucket,
        CASE WHEN run_hash IS NULL THEN rule = 'bucket_transfer' END     AS bucket_transfer,
        count(*)                                                         AS lines,
        fsum(gb)                                                         AS gigabytes,
        coalesce(fsum(cost) FILTER (WHERE rule = 'bucket_transfer'), 0)  AS transfer_cost,
        coalesce(fsum(cost) FILTER (WHERE rule <> 'bucket_transfer'), 0) AS other_network_cost,
        fsum(cost)                                                       AS cost
    FROM network  -- (no filter here: DuckDB would then hash the rows, not the lines)
    GROUP BY ALL
)
SELECT
    CAST($month AS DATE) AS month, r.run_id, r.model, s.purpose_class, r.dataset,
    r.dataset_bucket, r.dataset_region, r.run_region,
    s.lines,  -- a row per (line, run)
    s.gigabytes, s.transfer_cost, s.other_network_cost, s.cost
FROM sums AS s
JOIN runs AS r ON r.run_hash = s.run_hash
WHERE r.run_region IS NOT NULL AND r.dataset_region IS NOT NULL
  AND region_key(r.run_region) <> region_key(r.dataset_region)
UNION ALL
SELECT
    CAST($month AS DATE), NULL, NULL, s.purpose_class, bd.dataset, bd.bucket,
    bd.dataset_region, NULL, s.lines, s.gigabytes, s.transfer_cost, s.other_network_cost,
    s.cost
FROM sums AS s
JOIN bucket_datasets AS bd ON bd.bucket_key = claim_key(s.bucket)
WHERE s.run_hash IS NULL AND s.bucket_transfer
