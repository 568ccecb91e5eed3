-- The bill as lines (the demo's printout): a period's cost, GPU-hours, CPU-hours and runs by
-- the decision each cost belongs to — production vs search, preprocessing, checkpoint
-- storage, cross-region pulls, untracked, unallocated. Largest first.
--
-- "cross-region dataset pulls" is what the `egress` table counts for the month: the network
-- rows of each run it names (the transfer rule 5 gave it on its dataset's bucket and its
-- other network lines), so the line, the egress table and the lever "co-locate compute &
-- data" agree. A month whose egress was not computed (no row, no record of a write) has the
-- line hold the transfer rule 5 gave runs (attribution rule bucket_transfer). Transfer no
-- run claimed stays untracked.
-- Parameters: $first, $last (the period's first and last month).
WITH egress_months AS (
    -- the months whose egress table was written, also with no row
    SELECT DISTINCT month FROM egress WHERE month BETWEEN $first AND $last
    UNION
    SELECT month FROM decision_basis
    WHERE table_name = 'egress' AND month BETWEEN $first AND $last
    UNION
    SELECT month FROM materializations
    WHERE asset = 'egress' AND month BETWEEN $first AND $last
),
egress_runs AS (
    -- as attribution_rows names the run (macros.sql key_hash, spelt out: a report's
    -- connection has no macros)
    SELECT DISTINCT month, hash(run_id, reverse(run_id)) AS run_hash
    FROM egress
    WHERE run_id IS NOT NULL AND month BETWEEN $first AND $last
),
a AS (
    SELECT a.*, l.x_ResourceKind AS resource_kind,
           CASE WHEN a.component <> 'network' OR a.run_hash IS NULL THEN false
                WHEN m.month IS NOT NULL THEN e.run_hash IS NOT NULL
                ELSE a.rule = 'bucket_transfer' END AS cross_region
    FROM attribution_rows a
    JOIN (SELECT month, hash(x_SourceLine, reverse(x_SourceLine)) AS line_key, x_ResourceKind
          FROM billing_facts
          WHERE month BETWEEN $first AND $last) l USING (month, line_key)
    LEFT JOIN egress_months m ON m.month = a.month
    LEFT JOIN egress_runs e ON e.month = a.month AND e.run_hash = a.run_hash
    WHERE a.month BETWEEN $first AND $last
)
SELECT
    CASE
        WHEN purpose_class = 'unallocated'
            THEN 'unallocated (tax, credits, fees, unused commitment)'
        WHEN purpose_class = 'untracked' THEN 'untracked'
        WHEN component = 'storage' AND resource_kind = 'bucket' THEN 'checkpoint & artifact storage'
        WHEN cross_region THEN 'cross-region dataset pulls'
        WHEN purpose_class = 'production' THEN 'production training'
        WHEN purpose_class = 'search' THEN 'hyperparameter search'
        WHEN purpose_class = 'preprocessing' THEN 'preprocessing'
        ELSE 'other runs (eval, ad hoc)'
    END AS line,
    coalesce(fsum(accelerator_hours) FILTER (WHERE component = 'gpu'), 0) AS gpu_hours,
    coalesce(fsum(hours) FILTER (WHERE component = 'cpu'), 0) AS cpu_hours,
    count(DISTINCT run_hash) AS runs,  -- macros.sql key_hash(run_id)
    fsum(cost) AS cost
FROM a GROUP BY 1 ORDER BY cost DESC, line
