-- Search trend: every search of every model, in the order they were launched, with what each
-- one cost in all and what it bought - so an ML lead sees when searching has saturated.
--
-- A model's first searches buy big gains cheaply; later ones buy less and less for the same
-- spend. A search is `saturating` when it bought nothing (improvement <= 0) or when each unit
-- of improvement cost more than it did in the model's previous search that had a price.
--
-- Definitions (the same as search_costs, one row per search instead of per active search):
--   trials        - the search's runs that are not sweep controllers (parents of runs)
--   best_metric   - the trials' best value of the search's metric (config metric_goal)
--   previous_best - the model's best result on that metric before the search started:
--                   production runs and runs of other searches finished by then
--   improvement   - best_metric over previous_best, positive = better
--   cost          - the search's attributed cost (all runs, controllers' storage included)
--                   summed over every month of the warehouse up to and including this one,
--                   so a search that spans months is priced whole. It reads the attribution
--                   already materialized for earlier months: a month not materialized yet
--                   counts nothing. cost_this_month is this month's part.
--   cost_per_improvement - cost / improvement when improvement > 0 and cost > 0: a search
--                   whose cost to date is 0 or a credit (refunds above its charges) paid
--                   nothing for its gain, and has no price per unit (NULL, not $0 or −$1,000)
--   currency      - the currency of the months the search was billed in (`billing_months`,
--                   one a month, SPEC §5; USD when a month names none); NULL when it was
--                   billed in more than one (the amounts do not add up: no cost per unit) or
--                   in no month
--   previous_cost_per_improvement - the cost per improvement of the model's most recent
--                   earlier search (same metric) billed in the same currency that had one;
--                   earlier searches without an improvement to divide by, or without a cost
--                   above 0, are skipped: the saturation is judged against a positive price
--                   only, and in one currency (¥33,353 a unit is not dearer than $3,000): a
--                   search with no earlier one in its currency is not saturating on price
-- Rows: every search whose first run started before this month's end, active or not, so
-- the whole history of each model is in every month.
WITH search_runs AS (
    SELECT * FROM search_runs($month)
),
searches AS (
    -- model, metric, first start and trials of each search (assets/macros.sql)
    SELECT search_id, model, metric_name, search_start, runs
    FROM search_identity($month)
    WHERE search_start < $month_end
),
spend AS (
    -- every materialized month up to this one; each month's attribution is that month's bill
    SELECT
        sr.search_id,
        fsum(a.cost)                                        AS cost,
        coalesce(fsum(a.accelerator_hours), 0)              AS accelerator_hours,
        coalesce(fsum(a.cost) FILTER (WHERE a.month = $month), 0) AS cost_this_month,
        CASE WHEN count(DISTINCT coalesce(bm.currency, 'USD')) = 1
             THEN min(coalesce(bm.currency, 'USD')) END     AS currency
    FROM attribution_runs AS a
    JOIN search_runs AS sr ON sr.run_id = a.run_id
    LEFT JOIN month_currencies() AS bm ON bm.month = a.month
    WHERE a.month <= $month
    GROUP BY sr.search_id
),
scored AS (
    SELECT
        s.*,
        b.best_metric,
        bl.previous_best,
        metric_improvement($metric_goal, b.best_metric, bl.previous_best) AS improvement,
        coalesce(sp.cost, 0)                      AS cost,
        coalesce(sp.accelerator_hours, 0)         AS accelerator_hours,
        coalesce(sp.cost_this_month, 0)           AS cost_this_month,
        sp.currency
    FROM searches AS s
    LEFT JOIN search_best($month, $metric_goal)          AS b  ON b.search_id  = s.search_id
    LEFT JOIN search_previous_best($month, $metric_goal) AS bl ON bl.search_id = s.search_id
    LEFT JOIN spend    AS sp ON sp.search_id = s.search_id
),
unit_cost AS (
    SELECT
        *,
        CASE WHEN improvement > 0 AND cost > 0 AND currency IS NOT NULL
             THEN cost / improvement END          AS cost_per_improvement,
        row_number() OVER (PARTITION BY model ORDER BY search_start, search_id) AS search_order
    FROM scored
),
trend AS (
    SELECT
        *,
        -- the model's previous search (on the same metric, billed in the same currency)
        -- that had a unit cost
        lag(CASE WHEN cost_per_improvement IS NOT NULL THEN search_id END IGNORE NULLS)
            OVER w AS previous_search_id,
        lag(cost_per_improvement IGNORE NULLS) OVER w AS previous_cost_per_improvement
    FROM unit_cost
    WINDOW w AS (PARTITION BY model, metric_name, currency ORDER BY search_start, search_id)
)
SELECT
    CAST($month AS DATE) AS month,
    model,
    metric_name,
    search_id,
    search_start,
    search_order,
    runs,
    best_metric,
    previous_best,
    improvement,
    accelerator_hours,
    cost,
    cost_this_month,
    currency,
    cost_per_improvement,
    previous_search_id,
    previous_cost_per_improvement,
    coalesce(improvement <= 0, false)
        OR coalesce(cost_per_improvement > previous_cost_per_improvement, false) AS saturating
FROM trend
