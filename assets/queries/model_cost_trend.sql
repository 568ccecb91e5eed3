-- The `model_cost_trend` check (WARN, on cost_per_model_monthly): each model's cost this
-- month against the median of its costs in the 3 months before. A model's previous months
-- are those of the 3 in which the warehouse holds cost for it; with fewer than 2 of them it
-- is not judged (a new model has no trend yet). It fails when
--     cost > $max_growth × median(previous months' costs)
-- (median of 2 = their mean). Untracked and unallocated cost has no model and is left out.
-- Parameters: $month, $max_growth.
WITH per_month AS (
    SELECT month, model, fsum(cost) AS cost
    FROM cost_per_model_monthly
    WHERE model IS NOT NULL
      AND month BETWEEN CAST(CAST($month AS DATE) - INTERVAL 3 MONTH AS DATE) AND $month
    GROUP BY month, model
),
history AS (
    SELECT
        model,
        median(cost)                                          AS previous_median,
        count(*)                                              AS previous_months,
        list(strftime(month, '%Y-%m') ORDER BY month)         AS months
    FROM per_month
    WHERE month < $month
    GROUP BY model
)
SELECT
    c.model,
    c.cost,
    h.previous_median,
    coalesce(h.previous_months, 0)                           AS previous_months,
    coalesce(h.months, [])                                   AS months,
    coalesce(h.previous_months, 0) >= 2                      AS judged,
    coalesce(h.previous_months >= 2
             AND c.cost > $max_growth * h.previous_median, false) AS exceeds
FROM per_month AS c
LEFT JOIN history AS h ON h.model = c.model
WHERE c.month = $month
ORDER BY exceeds DESC, c.cost DESC, c.model
