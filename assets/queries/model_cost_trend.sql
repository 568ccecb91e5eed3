-- The `model_cost_trend` check (WARN, on cost_per_model_monthly): each model's cost this
-- month against the median of its costs in the 3 months before. A model's previous months
-- are those of the 3 that the warehouse holds (materialized: in billing_months, or with
-- cost_per_model_monthly rows) from the model's first month with a cost row on; in such a
-- month without a row for the model it spent nothing: a cost of 0, as a month with a $0 row
-- (skipping it judged two models of the same spend differently). Months before the model's
-- first are not its history, so a new model is not judged against zeros. With fewer than 2
-- previous months it is not judged (a new model has no trend yet). It fails when
--     cost > $max_growth × median(previous months' costs)
-- (median of 2 = their mean), read as cost − median > ($max_growth − 1) × |median|: the
-- same for a median ≥ 0, and for a negative one (credits above the model's spend) a growth
-- of the net spend, where −6 > 1.5 × −5 flagged a model whose cost fell. It exceeds when the
-- left side minus the right, to 10 decimal places (CUR's own precision for amounts), is
-- above 1e-12 of the figures' size (the larger of |cost|, |median| and $max_growth ×
-- |median|): figures equal within the doubles' precision are equal at any size, so a cost
-- exactly at the limit passes. 16.05 − 10.70 read 5.350000000000001 > 0.5 × 10.70, and
-- 12,995,000 − 11,300,000 = 1,695,000 > 0.15 × 11,300,000 = 1694999.999999999, in doubles:
-- both failed (at $1M and more a double's spacing passes 1e-10, so 10 decimals alone told
-- such figures apart). A cent above is still above up to $1e9. Untracked and unallocated
-- cost has no model and is left out.
-- A month is held only against earlier months billed in its own currency (`billing_months`,
-- one a month, SPEC §5; USD when a month has no row there): a month billed in JPY after two
-- in EUR was held against a median of euros read as yen. Held months in another currency are
-- left out of the previous months (`other_currency_months` names them): with fewer than 2 of
-- its own currency left the model is not judged.
-- Parameters: $month, $max_growth.
WITH per_month AS (
    SELECT month, model, fsum(cost) AS cost
    FROM cost_per_model_monthly
    WHERE model IS NOT NULL
      AND month BETWEEN CAST(CAST($month AS DATE) - INTERVAL 3 MONTH AS DATE) AND $month
    GROUP BY month, model
),
this_currency AS (
    SELECT coalesce((SELECT currency FROM month_currencies() WHERE month = $month), 'USD')
               AS currency
),
held AS (
    -- the months of the window before this one that the warehouse holds, with their currency
    SELECT h.month, coalesce(mc.currency, 'USD') AS currency
    FROM (SELECT DISTINCT month
          FROM (SELECT month FROM billing_months
                UNION ALL SELECT month FROM cost_per_model_monthly)
          WHERE month >= CAST(CAST($month AS DATE) - INTERVAL 3 MONTH AS DATE)
            AND month < $month) AS h
    LEFT JOIN month_currencies() AS mc ON mc.month = h.month
),
first_month AS (
    -- each model judged this month, and its first month with a cost row (any month)
    SELECT model, min(month) AS first_month
    FROM cost_per_model_monthly
    WHERE model IN (SELECT model FROM per_month WHERE month = $month)
    GROUP BY model
),
previous AS (
    SELECT f.model, h.month, h.currency = t.currency AS same_currency, h.currency,
           coalesce(p.cost, 0) AS cost
    FROM first_month AS f
    JOIN held AS h ON h.month >= f.first_month
    CROSS JOIN this_currency AS t
    LEFT JOIN per_month AS p ON p.model = f.model AND p.month = h.month
),
history AS (
    SELECT
        model,
        median(cost) FILTER (WHERE same_currency)                        AS previous_median,
        count(*) FILTER (WHERE same_currency)                            AS previous_months,
        list(strftime(month, '%Y-%m') ORDER BY month) FILTER (WHERE same_currency) AS months,
        list(strftime(month, '%Y-%m') ORDER BY month) FILTER (WHERE NOT same_currency)
                                                                         AS other_months,
        list(DISTINCT currency ORDER BY currency) FILTER (WHERE NOT same_currency)
                                                                         AS other_currencies
    FROM previous
    GROUP BY model
)
SELECT
    c.model,
    c.cost,
    h.previous_median,
    coalesce(h.previous_months, 0)                           AS previous_months,
    coalesce(h.months, [])                                   AS months,
    coalesce(h.other_months, [])                             AS other_currency_months,
    coalesce(h.other_currencies, [])                         AS other_currencies,
    (SELECT currency FROM this_currency)                     AS currency,
    coalesce(h.previous_months, 0) >= 2                      AS judged,
    coalesce(h.previous_months >= 2
             AND over_limit(c.cost - h.previous_median
                            - ($max_growth - 1) * abs(h.previous_median),
                            greatest(abs(c.cost),
                                     greatest($max_growth, 1) * abs(h.previous_median))),
             false)                                                  AS exceeds
FROM per_month AS c
LEFT JOIN history AS h ON h.model = c.model
WHERE c.month = $month
ORDER BY exceeds DESC, c.cost DESC, c.model
