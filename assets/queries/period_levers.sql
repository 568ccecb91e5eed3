-- The levers summed over the period, ranked like cost_levers ranks a month: by dollars to the
-- currency's smallest unit ($digits: the cent, a yen, a fils), largest first, ties in the mission's order (SPEC §12: bound the search, retrain on
-- measured decay, cache preprocessing, delete dead checkpoints, co-locate compute & data,
-- chase untracked usage, checkpoint before going preemptible; cost_levers.sql
-- `mission_order`, spelled out here: the read-only queries have no macros); "use a cheaper
-- card" always last. The last month's ranks are no tie-break: they order the last month's
-- dollars, not the period's. Each lever's dollars per month and its latest month's evidence
-- come along. A lever's period dollars are the sum of its months' dollars, each floored at 0
-- as cost_levers floors it (a month whose figure is a credit saves nothing; it does not cancel
-- another month's saving) — a month written before that floor reads floored too.
-- Parameters: $first, $last, $digits (report/money.py minor_digits of the period's currency).
WITH levers AS (
    -- a month written before the lever took SPEC §12's name reads under that name
    SELECT * REPLACE (CASE lever WHEN 'co-locate compute with data'
                                 THEN 'co-locate compute & data' ELSE lever END AS lever,
                      CASE WHEN dollars > 0 THEN dollars ELSE 0.0 END AS dollars)
    FROM cost_levers
    WHERE month BETWEEN $first AND $last
),
summed AS (
    SELECT
        lever,
        sum(CAST(dollars AS DECIMAL(38, 10)))                          AS dollars,
        map(list(month ORDER BY month), list(dollars ORDER BY month))  AS by_month,
        arg_max(evidence, month)                                       AS evidence,
        arg_max(what_it_costs_to_pull, month)                          AS what_it_costs_to_pull,
        strftime(max(month), '%Y-%m')                                  AS evidence_month
    FROM levers
    GROUP BY lever
)
SELECT
    CAST(row_number() OVER (
        ORDER BY (lever = 'use a cheaper card'), round(dollars, $digits) DESC,
                 coalesce(list_position(['bound the search', 'retrain on measured decay',
                                         'cache preprocessing', 'delete dead checkpoints',
                                         'co-locate compute & data', 'chase untracked usage',
                                         'checkpoint before going preemptible'], lever), 8),
                 lever) AS INTEGER) AS rank,
    lever, dollars, by_month, evidence, what_it_costs_to_pull, evidence_month
FROM summed
ORDER BY rank
