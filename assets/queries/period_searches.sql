-- Every search of each model in launch order, as the last month of the period sees it
-- (search_trend: cost to date, improvement, cost per unit of improvement, saturation),
-- with what each search cost inside the period. `stale`: the cost to date as the last month
-- computed it differs from the sum of every month's own part (a month before it was
-- materialized again after it, restated: the last month read its old attribution).
-- `currency`: what the search's cost to date and cost per unit are in: the currency of the
-- months up to the last one its runs were billed in (its runs as the last month's tracker
-- snapshot names them, their per-run sums in attribution_runs, each month's currency from
-- `billing_months`, USD when a month names none: search_trend's own rule), which may be other
-- than the period's; NULL when it was billed in none or in more than one, told apart by
-- `currencies` (how many: 0, 1, or more). Read here, not from search_trend's `currency`: a
-- warehouse written before that column lacks it (a report adds no column), and its rows
-- written before it hold NULL there. `cost_in_period` is in the period's currency.
-- No macros: the reports read through a connection that has none (macros.sql
-- `month_currencies` is spelled out). Parameters: $first, $last.
WITH in_period AS (
    SELECT
        search_id,
        coalesce(fsum(cost_this_month) FILTER (WHERE month >= $first), 0) AS cost_in_period,
        fsum(cost_this_month)                                              AS summed
    FROM search_trend
    WHERE month <= $last
    GROUP BY search_id
),
month_currencies AS (
    SELECT month, min(upper(trim(currency))) AS currency FROM billing_months GROUP BY month
),
billed_in AS (
    SELECT
        tr.search_id,
        count(DISTINCT coalesce(mc.currency, 'USD')) AS currencies,
        min(coalesce(mc.currency, 'USD'))            AS currency
    FROM attribution_runs AS a
    JOIN tracker_runs AS tr
      ON tr.run_id = a.run_id AND tr.month = $last AND tr.search_id IS NOT NULL
    LEFT JOIN month_currencies AS mc ON mc.month = a.month
    WHERE a.month <= $last
    GROUP BY tr.search_id
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
    CASE WHEN b.currencies = 1 THEN b.currency END AS currency,
    coalesce(b.currencies, 0) AS currencies,
    t.cost_per_improvement,
    t.previous_search_id,
    t.previous_cost_per_improvement,
    t.saturating,
    coalesce(p.cost_in_period, 0) AS cost_in_period,
    coalesce(abs(t.cost - p.summed) > 1e-6 * greatest(1.0, abs(t.cost)), false) AS stale
FROM search_trend AS t
LEFT JOIN in_period AS p ON p.search_id = t.search_id
LEFT JOIN billed_in AS b ON b.search_id = t.search_id
WHERE t.month = $last
ORDER BY t.model NULLS LAST, t.search_order, t.search_id
