-- Cost per model for the report: the month's cost and GPU-hours of each model, split by
-- purpose class (production vs search is the headline); cost that belongs to no run
-- (untracked, unallocated) is `unattributed` on the row without a model, last.
-- Parameters: $month.
SELECT
    model,
    fsum(cost)                                                               AS cost,
    coalesce(fsum(cost) FILTER (WHERE purpose_class = 'production'), 0)      AS production,
    coalesce(fsum(cost) FILTER (WHERE purpose_class = 'search'), 0)          AS search,
    coalesce(fsum(cost) FILTER (WHERE purpose_class = 'preprocessing'), 0)   AS preprocessing,
    coalesce(fsum(cost) FILTER (WHERE purpose_class = 'other'), 0)           AS other,
    coalesce(fsum(cost) FILTER (WHERE purpose_class NOT IN
        ('production', 'search', 'preprocessing', 'other')), 0)             AS unattributed,
    fsum(accelerator_hours)                                                  AS gpu_hours
FROM cost_per_model_monthly
WHERE month = $month
GROUP BY model
ORDER BY model IS NULL, cost DESC, model
