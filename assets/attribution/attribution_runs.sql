-- The month's attribution summed per run | untracked | unallocated × purpose class ×
-- component × rule × kind, once, after the month's rows are written (`attribution.sql`).
-- The decisions that sum a run's cost or hours (run_costs, search_costs, search_trend,
-- search_shape, cost_per_model_monthly, retrain_cadence, gpu_utilization,
-- preprocessing_waste, preemption, cost_levers) read these rows instead of scanning and
-- joining every attribution row. No line attribute is a key: a key per line would leave
-- nearly a group per row.
-- Summed per run_hash, then named by the run's run_id (macros.sql `run_hashes`); a re-run
-- that attributed again only some lines sums only the (run, rule) pairs with rows on them
-- (macros.sql `in_summary_scope`; a rule is part of every group). Parameters: $month.
WITH sums AS (
    SELECT
        month, run_hash, purpose_class, component, rule, kind,
        fsum(cost)              AS cost,
        sum(CAST(cost AS DECIMAL(38, 10))) AS cost_exact,
        fsum(hours)             AS hours,
        fsum(accelerator_hours) AS accelerator_hours,
        count(*)                AS rows
    FROM attribution_rows
    WHERE month = $month AND in_summary_scope(run_hash, rule)
    GROUP BY ALL
)
SELECT s.month, r.run_id, s.purpose_class, s.component, s.rule, s.kind,
       s.cost, s.hours, s.accelerator_hours, s.rows, s.cost_exact
FROM sums AS s
LEFT JOIN run_hashes($month) AS r ON r.run_hash = s.run_hash
