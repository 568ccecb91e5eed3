-- The levers summed over the period, ranked like cost_levers ranks a month: by dollars,
-- largest first, ties in the mission's order (SPEC §12); "use a cheaper card" always last.
-- Each lever's dollars per month and its latest month's evidence come along.
-- Parameters: $first, $last.
WITH mission(lever, mission_order) AS (
    VALUES ('bound the search', 1), ('retrain on measured decay', 2),
           ('cache preprocessing', 3), ('delete dead checkpoints', 4),
           ('co-locate compute with data', 5), ('chase untracked usage', 6),
           ('checkpoint before going preemptible', 7), ('use a cheaper card', 8)
),
summed AS (
    SELECT
        lever,
        sum(CAST(dollars AS DECIMAL(38, 10)))                  AS dollars,
        map(list(month ORDER BY month), list(dollars ORDER BY month)) AS by_month,
        arg_max(evidence, month)                               AS evidence,
        arg_max(what_it_costs_to_pull, month)                  AS what_it_costs_to_pull,
        strftime(max(month), '%Y-%m')                          AS evidence_month
    FROM cost_levers
    WHERE month BETWEEN $first AND $last
    GROUP BY lever
)
SELECT
    CAST(row_number() OVER (ORDER BY (s.lever = 'use a cheaper card'), s.dollars DESC,
                                     coalesce(m.mission_order, 99), s.lever) AS INTEGER) AS rank,
    s.*
FROM summed AS s
LEFT JOIN mission AS m ON m.lever = s.lever
ORDER BY rank
