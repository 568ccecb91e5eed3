-- Cost per model per month over the period, split production / search / the rest
-- (cost_per_model_monthly; model NULL = untracked and unallocated cost, no run, no model).
-- Parameters: $first, $last.
SELECT
    month,
    model,
    sum(CAST(cost AS DECIMAL(38, 10)))                                        AS cost,
    coalesce(sum(CAST(cost AS DECIMAL(38, 10)))
             FILTER (WHERE purpose_class = 'production'), 0)                  AS production,
    coalesce(sum(CAST(cost AS DECIMAL(38, 10)))
             FILTER (WHERE purpose_class = 'search'), 0)                      AS search,
    coalesce(fsum(accelerator_hours), 0)                                       AS gpu_hours
FROM cost_per_model_monthly
WHERE month BETWEEN $first AND $last
GROUP BY month, model
ORDER BY model NULLS LAST, month
