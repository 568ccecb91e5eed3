-- The tracker against the bill, per month (SPEC §7): how many of the GPU-hours the bill
-- shows were used by recorded runs, and how much of the cost the runs account for.
-- Parameters: $month, $month_start, $month_end, $max_untracked_share.
WITH
-- Every line of the month has attribution rows (run, untracked or unallocated rows),
-- and a row carries its line's component, so the sums below need no join back to the lines
-- except for the instance type of untracked GPU rows.
lines AS NOT MATERIALIZED (
    SELECT key_hash(x_SourceLine) AS line_key, ResourceId, EffectiveCost, x_CostComponent,
           x_UsageHours,
           x_AcceleratorCount, x_InstanceType, x_InvoiceId,
           attribution_rule(ChargeCategory, CommitmentDiscountStatus, x_ResourceKind,
                            x_CostComponent) AS rule
    FROM billing_facts WHERE month = $month
),
att AS NOT MATERIALIZED (
    SELECT run_hash, purpose_class, component, cost, accelerator_hours, claimed_share, rule
    FROM attribution_rows WHERE month = $month
),
runs AS (SELECT * FROM tracker_runs WHERE month = $month),
gpu_lines AS NOT MATERIALIZED (
    -- GPU instance-usage lines: the hours the bill says accelerators ran
    SELECT * FROM lines WHERE x_CostComponent = 'gpu' AND x_UsageHours IS NOT NULL
),
gpu_rows AS NOT MATERIALIZED (
    -- the attribution rows of those lines (accelerator_hours is set exactly for them)
    SELECT * FROM att WHERE component = 'gpu' AND accelerator_hours IS NOT NULL
),
gpu_cost_rows AS NOT MATERIALIZED (
    -- every gpu-component usage row (negations included) for the cost shares
    SELECT * FROM att WHERE component = 'gpu' AND rule <> 'non_usage'
),
untracked_by_line AS (
    -- a line has at most one untracked row
    SELECT line_key, accelerator_hours AS untracked_hours, cost AS untracked_cost
    FROM attribution_rows
    WHERE month = $month AND purpose_class = 'untracked' AND component = 'gpu'
),
by_type AS (
    -- the month's figures per instance type: GPU-hours from the GPU instance-usage lines, the
    -- cost shares from every gpu-component usage line as the month's (a pod's split row is
    -- of its node's type, and a type's figures add up to the month's)
    SELECT
        l.x_InstanceType AS instance_type,
        coalesce(fsum(l.x_UsageHours * l.x_AcceleratorCount), 0) AS billed_gpu_hours,
        coalesce(fsum(u.untracked_hours), 0) AS untracked_gpu_hours,
        fsum(l.EffectiveCost) AS gpu_cost,
        coalesce(fsum(u.untracked_cost), 0) AS untracked_cost
    FROM lines l
    LEFT JOIN untracked_by_line u USING (line_key)
    WHERE l.x_CostComponent = 'gpu' AND l.rule <> 'non_usage'
    GROUP BY l.x_InstanceType
),
over_claimed AS (
    -- an over-claimed line's run rows carry shares summing to 1, so their accelerator-hours
    -- add up to the line's GPU-hours: (S − 1) × those is the line's excess
    SELECT coalesce(fsum((claimed_share - 1) * accelerator_hours), 0) AS hours
    FROM gpu_rows WHERE run_hash IS NOT NULL AND claimed_share > 1 + 1e-12
),
unbilled AS (
    -- resources a run lists that no line of the month shows: wrong ids, other accounts
    -- (macros.sql `unbilled_claims`, also the tracker_claims_billed check's list); a run
    -- listing one job by its name and its ARN counts it once
    SELECT coalesce(fsum(gpu_hours), 0) AS gpu_hours
    FROM (SELECT DISTINCT run_id, start_time, re, gpus, claim_key, gpu_hours
          FROM unbilled_claims($month, $month_start, $month_end))
),
totals AS (
    SELECT
        (SELECT coalesce(fsum(x_UsageHours * x_AcceleratorCount), 0) FROM gpu_lines) AS billed_gpu_hours,
        (SELECT coalesce(fsum(accelerator_hours), 0) FROM gpu_rows WHERE run_hash IS NOT NULL) AS tracked_gpu_hours,
        (SELECT coalesce(fsum(cost), 0) FROM gpu_cost_rows) AS gpu_cost,
        (SELECT coalesce(fsum(cost), 0) FROM gpu_cost_rows WHERE purpose_class = 'untracked') AS untracked_gpu_cost,
        (SELECT count(*) = 0 OR bool_or(x_InvoiceId IS NULL) FROM lines) AS provisional,
        (SELECT count(*) FROM runs WHERE status <> 'RUNNING' AND end_time IS NULL
            AND start_time < CAST($month_end AS TIMESTAMP)) AS runs_without_end,
        -- the bill and its split, as the cost_conserved check sums them (macros.sql)
        c.total_effective_cost, c.attributed_cost, c.untracked_cost, c.unallocated_cost
    FROM month_cost_totals($month) AS c
)
SELECT
    CAST($month AS DATE) AS month,
    billed_gpu_hours,
    tracked_gpu_hours,
    greatest(billed_gpu_hours - tracked_gpu_hours, 0) AS untracked_gpu_hours,
    CASE WHEN billed_gpu_hours > 0
         THEN greatest(billed_gpu_hours - tracked_gpu_hours, 0) / billed_gpu_hours ELSE 0 END
        AS untracked_share,
    CAST($max_untracked_share AS DOUBLE) AS threshold,
    CASE WHEN (CASE WHEN billed_gpu_hours > 0
                    THEN greatest(billed_gpu_hours - tracked_gpu_hours, 0) / billed_gpu_hours
                    ELSE 0 END) <= CAST($max_untracked_share AS DOUBLE) + 1e-12
         THEN 'pass' ELSE 'fail' END AS status,
    CASE WHEN gpu_cost <> 0 THEN untracked_gpu_cost / gpu_cost ELSE 0 END AS untracked_cost_share,
    coalesce((
        SELECT list(struct_pack(
            instance_type := instance_type,
            billed_gpu_hours := billed_gpu_hours,
            untracked_gpu_hours := untracked_gpu_hours,
            untracked_share := CASE WHEN billed_gpu_hours > 0 THEN untracked_gpu_hours / billed_gpu_hours ELSE 0 END,
            gpu_cost := gpu_cost,
            untracked_cost_share := CASE WHEN gpu_cost <> 0 THEN untracked_cost / gpu_cost ELSE 0 END
        ) ORDER BY instance_type) FROM by_type
    ), []) AS by_accelerator_type,
    CASE WHEN total_effective_cost <> 0 THEN attributed_cost / total_effective_cost ELSE 0 END AS coverage,
    (SELECT hours FROM over_claimed) AS over_claimed_gpu_hours,
    (SELECT gpu_hours FROM unbilled) AS unbilled_claim_gpu_hours,
    provisional,
    total_effective_cost,
    attributed_cost,
    untracked_cost,
    unallocated_cost,
    runs_without_end
FROM totals
