-- The bill as lines (the demo's printout): a period's cost, GPU-hours, CPU-hours and runs by
-- the decision each cost belongs to — production vs search, preprocessing, checkpoint
-- storage, cross-region pulls, untracked, unallocated. Largest first.
-- Parameters: $first, $last (the period's first and last month).
WITH a AS (
    SELECT a.*, l.x_ResourceKind AS resource_kind
    FROM attribution_rows a
    JOIN (SELECT month, hash(x_SourceLine, reverse(x_SourceLine)) AS line_key, x_ResourceKind
          FROM billing_facts
          WHERE month BETWEEN $first AND $last) l USING (month, line_key)
    WHERE a.month BETWEEN $first AND $last
)
SELECT
    CASE
        WHEN purpose_class = 'unallocated'
            THEN 'unallocated (tax, credits, fees, unused commitment)'
        WHEN purpose_class = 'untracked' THEN 'untracked'
        WHEN component = 'storage' AND resource_kind = 'bucket' THEN 'checkpoint & artifact storage'
        WHEN component = 'network' AND resource_kind = 'bucket' THEN 'cross-region dataset pulls'
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
