-- The untracked resources to chase, largest first: untracked cost per resource, ordered by
-- cost, then GPU-hours, then resource id, so that every reader names the same resources in
-- the same order. One list for the reconciliation check's metadata (and so its alert) and
-- the demo's reconciliation notes ($component 'gpu': the GPU lines the reconciliation
-- counts), and for the report's list of every untracked cost ($component NULL).
-- Read on read-only connections (report, demo): plain SQL, no macros.
-- Parameters: $month; $component ('gpu', …, or NULL for every component); $top (rows).
WITH untracked AS (
    -- untracked_usage already holds the untracked rows per resource × day × component × kind
    -- (joining every untracked attribution row back to its line again cost ~0.7 s at 5M lines)
    SELECT resource_id, day, component, kind, hours, accelerator_hours, cost
    FROM untracked_usage
    WHERE month = $month
      AND ($component IS NULL OR component = $component)
),
ranked AS (
    -- the top resources by their sums alone: the lists below are built for them only (for
    -- every resource they took most of the query at 100k resources)
    SELECT
        resource_id,
        fsum(accelerator_hours) AS gpu_hours,
        fsum(hours)             AS hours,
        fsum(cost)              AS cost
    FROM untracked
    GROUP BY resource_id
    ORDER BY cost DESC, gpu_hours DESC NULLS LAST, resource_id NULLS LAST
    LIMIT $top
),
by_resource AS (
    SELECT
        r.resource_id,
        string_agg(DISTINCT u.kind, ', ' ORDER BY u.kind)           AS kinds,
        string_agg(DISTINCT u.component, ', ' ORDER BY u.component) AS components,
        count(DISTINCT u.day)                                       AS days,
        any_value(r.gpu_hours)                                      AS gpu_hours,
        any_value(r.hours)                                          AS hours,
        any_value(r.cost)                                           AS cost
    FROM ranked AS r
    JOIN untracked AS u ON u.resource_id IS NOT DISTINCT FROM r.resource_id
    GROUP BY r.resource_id
),
instance_types AS (
    -- the resource's instance type from any of its lines of the month
    SELECT ResourceId AS resource_id, min(x_InstanceType) AS instance_type
    FROM billing_facts
    WHERE month = $month AND ResourceId IN (SELECT resource_id FROM ranked)
    GROUP BY ResourceId
)
SELECT r.*, t.instance_type
FROM by_resource AS r
LEFT JOIN instance_types AS t USING (resource_id)
ORDER BY r.cost DESC, r.gpu_hours DESC NULLS LAST, r.resource_id NULLS LAST
