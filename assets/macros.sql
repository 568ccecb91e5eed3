-- The macros the SQL files share, defined on the connection with the schema
-- (`ensure_schema`), so that attribution, reconciliation and the checks agree.

-- how attribution treats a billing line (SPEC §6): a run's claim, bucket storage or
-- transfer, or no usage at all
CREATE OR REPLACE TEMP MACRO attribution_rule(charge_category, commitment_status,
                                              resource_kind, component) AS
    CASE
        WHEN charge_category <> 'Usage' OR commitment_status = 'Unused' THEN 'non_usage'
        WHEN resource_kind = 'bucket' AND component = 'storage' THEN 'bucket_storage'
        WHEN resource_kind = 'bucket' AND component = 'network' THEN 'bucket_transfer'
        ELSE 'compute'
    END;

-- the key a resource is claimed by, the same on the bill's side and the run's: a SageMaker
-- training job's ARN counts as the job's name, lowercased as SageMaker writes it in ARNs
CREATE OR REPLACE TEMP MACRO claim_key(resource_id) AS
    CASE WHEN resource_id LIKE 'arn:%:sagemaker:%:training-job/%'
         THEN lower(split_part(resource_id, ':training-job/', 2))
         ELSE resource_id END;

-- rule 1: a run's share of a compute line before over-claimed lines are scaled down
CREATE OR REPLACE TEMP MACRO compute_share(s, e, g, d, rs, re, gpus) AS
    least(1.0, (epoch(least(e, re) - greatest(s, rs)) / 3600.0) / d)
      * CASE WHEN gpus IS NOT NULL AND g > 0 THEN least(gpus, g)::DOUBLE / g ELSE 1.0 END;

-- Table macros: blocks several SQL files read the same way. Parameters are named apart from
-- the columns (a macro parameter would shadow a column of the same name).

-- one row per run of a month's tracker snapshot: a run two tracker sources (or one source
-- twice) report is read from the first source by name, then by its earliest start, so a
-- dollar is never counted twice
CREATE OR REPLACE TEMP MACRO month_runs(for_month) AS TABLE
    SELECT *
    FROM tracker_runs
    WHERE month = for_month
    QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY source NULLS LAST, start_time) = 1;

-- the runs that claim compute and transfer (SPEC §6): RUNNING or ended, not a sweep parent;
-- `rs`/`re` their claim's start and end, a RUNNING run running until the month's end
CREATE OR REPLACE TEMP MACRO claimant_runs(for_month, end_of_month) AS TABLE
    SELECT r.*, r.start_time AS rs,
           CASE WHEN r.status = 'RUNNING' THEN CAST(end_of_month AS TIMESTAMP)
                ELSE r.end_time END AS re
    FROM tracker_runs AS r
    WHERE r.month = for_month
      AND (r.status = 'RUNNING' OR r.end_time IS NOT NULL)
      AND NOT EXISTS (SELECT 1 FROM tracker_runs AS child
                      WHERE child.month = for_month AND child.parent_run_id = r.run_id);

-- the resources a claimant lists that no billing line of the month shows (wrong ids, other
-- accounts), with the GPU-hours the run spent on them in the month (its GPUs, else 1):
-- `reconciliation.unbilled_claim_gpu_hours` and the `tracker_claims_billed` check
CREATE OR REPLACE TEMP MACRO unbilled_claims(for_month, start_of_month, end_of_month) AS TABLE
    SELECT DISTINCT
        c.run_id, c.start_time, c.re, c.gpus, c.listed AS resource_id,
        claim_key(c.listed) AS claim_key,
        epoch(least(c.re, CAST(end_of_month AS TIMESTAMP))
              - greatest(c.start_time, CAST(start_of_month AS TIMESTAMP))) / 3600.0
            * coalesce(nullif(c.gpus, 0), 1) AS gpu_hours
    FROM (SELECT *, unnest(resource_ids) AS listed
          FROM claimant_runs(for_month, end_of_month)) AS c
    WHERE c.start_time < CAST(end_of_month AS TIMESTAMP)
      AND c.re > CAST(start_of_month AS TIMESTAMP)
      -- matched as the attribution matches them
      AND claim_key(c.listed) NOT IN (SELECT claim_key(ResourceId) FROM billing_facts
                                      WHERE month = for_month AND ResourceId IS NOT NULL);

-- the buckets as they stood at the month's end: a bucket with daily inventories by its last
-- snapshot of the month, else its one undated listing without what was written after the
-- month ended
CREATE OR REPLACE TEMP MACRO month_end_snapshot(for_month, end_of_month) AS TABLE
    WITH inv AS (
        SELECT * FROM checkpoint_inventory WHERE month = for_month
    ),
    latest_dated AS (
        SELECT bucket, max(snapshot_date) AS last_snapshot
        FROM inv
        WHERE snapshot_date IS NOT NULL
        GROUP BY bucket
    )
    SELECT i.*
    FROM inv AS i
    LEFT JOIN latest_dated AS d ON d.bucket = i.bucket
    WHERE (d.last_snapshot IS NOT NULL AND i.snapshot_date = d.last_snapshot)
       OR (d.last_snapshot IS NULL AND i.snapshot_date IS NULL
           AND i.last_modified < end_of_month);

-- the checkpoint objects the retention policy governs, at the month's end: objects in a run
-- folder under a checkpoint prefix (datasets and other data are not checkpoints), with the
-- state of the run that wrote them and what they cost to keep for the month (the bucket's
-- storage bill spread evenly over every byte listed in it)
--   live       - the run is still RUNNING (its checkpoints are needed to resume)
--   production - a FINISHED production run, or one explicitly marked keep=true
--   dead       - every other run the tracker knows: FAILED, KILLED, deleted in the tracker,
--                or a FINISHED experiment nobody asked to keep
--   orphan     - a run folder whose run the tracker does not know at all
CREATE OR REPLACE TEMP MACRO checkpoint_objects(for_month, end_of_month) AS TABLE
    WITH snapshot AS (
        SELECT * FROM month_end_snapshot(for_month, end_of_month)
    ),
    price AS (
        SELECT
            l.bucket,
            CASE WHEN l.listed_bytes > 0
                 THEN coalesce(c.storage_cost, 0) / l.listed_bytes
                 ELSE 0 END AS cost_per_byte
        FROM (SELECT bucket, sum(size) AS listed_bytes FROM snapshot GROUP BY bucket) AS l
        LEFT JOIN (SELECT ResourceId AS bucket, sum(EffectiveCost) AS storage_cost
                   FROM billing_facts
                   WHERE month = for_month AND x_CostComponent = 'storage'
                   GROUP BY ResourceId) AS c
          ON c.bucket = l.bucket
    )
    SELECT
        o.bucket, o.key, o.size, o.last_modified, o.run_id, o.checkpoint,
        coalesce(o.checkpoint, o.key) AS checkpoint_name,
        r.status, r.purpose,
        CASE
            WHEN r.run_id IS NULL THEN 'orphan'
            WHEN r.status = 'RUNNING' AND NOT r.deleted THEN 'live'
            WHEN r.status = 'FINISHED' AND NOT r.deleted
                 AND (r.purpose = 'production' OR r.keep) THEN 'production'
            ELSE 'dead'
        END AS run_class,
        o.size * coalesce(p.cost_per_byte, 0) AS monthly_cost
    FROM snapshot AS o
    LEFT JOIN month_runs(for_month) AS r ON r.run_id = o.run_id
    LEFT JOIN price AS p ON p.bucket = o.bucket
    WHERE o.prefix IS NOT NULL
      AND o.run_id IS NOT NULL;
