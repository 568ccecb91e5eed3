-- The levers summed over the period, ranked like cost_levers ranks a month: by dollars,
-- largest first; "use a cheaper card" always last. Ties go by the lever's rank in the last
-- month (which orders a month's ties in the mission's order, SPEC §12), then by name.
-- Each lever's dollars per month and its latest month's evidence come along.
-- Parameters: $first, $last.
WITH summed AS (
    SELECT
        lever,
        sum(CAST(dollars AS DECIMAL(38, 10)))                          AS dollars,
        map(list(month ORDER BY month), list(dollars ORDER BY month))  AS by_month,
        arg_max(rank, month)                                           AS last_rank,
        arg_max(evidence, month)                                       AS evidence,
        arg_max(what_it_costs_to_pull, month)                          AS what_it_costs_to_pull,
        strftime(max(month), '%Y-%m')                                  AS evidence_month
    FROM cost_levers
    WHERE month BETWEEN $first AND $last
    GROUP BY lever
)
SELECT
    CAST(row_number() OVER (ORDER BY (lever = 'use a cheaper card'), dollars DESC,
                                     last_rank, lever) AS INTEGER) AS rank,
    lever, dollars, by_month, evidence, what_it_costs_to_pull, evidence_month
FROM summed
ORDER BY rank
