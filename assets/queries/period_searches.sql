-- Every search of each model in launch order, as the last month of the period sees it
-- (search_trend: cost to date, improvement, cost per unit of improvement, saturation),
-- with what each search cost inside the period. `stale`: the cost to date as the last month
-- computed it differs from the sum of every month's own part (a month before it was
-- materialized again after it, restated: the last month read its old attribution).
-- `currency`: what the search's cost to date and cost per unit are in (search_trend: the
-- currency of the months it was billed in, which may be other than the period's; NULL when
-- it was billed in none or in more than one); `cost_in_period` is in the period's.
-- Parameters: $first, $last.
WITH in_period AS (
    SELECT
        search_id,
        coalesce(fsum(cost_this_month) FILTER (WHERE month >= $first), 0) AS cost_in_period,
        fsum(cost_this_month)                                              AS summed
    FROM search_trend
    WHERE month <= $last
    GROUP BY search_id
)
SELECT
    t.model,
    t.metric_name,
    t.search_id,
    t.search_start,
    t.search_order,
    t.runs,
    t.best_metric,
    t.improvement,
    t.cost,
    t.currency,
    t.cost_per_improvement,
    t.previous_search_id,
    t.previous_cost_per_improvement,
    t.saturating,
    coalesce(p.cost_in_period, 0) AS cost_in_period,
    coalesce(abs(t.cost - p.summed) > 1e-6 * greatest(1.0, abs(t.cost)), false) AS stale
FROM search_trend AS t
LEFT JOIN in_period AS p ON p.search_id = t.search_id
WHERE t.month = $last
ORDER BY t.model NULLS LAST, t.search_order, t.search_id
