-- Showback: the month's whole bill by team, purpose class and component.
--
-- The team of a cost is the run's `team` (tracker column) when the cost belongs to a run that
-- names one; else the billing line's team tag (`team`, CUR 2.0's `user_team`, FOCUS-style
-- `user:team`); else NULL. So untracked and unallocated cost lands on a team only when the
-- resource itself is tagged. Every attribution row counts once: the rows add up to the
-- month's EffectiveCost.
WITH runs AS (
    SELECT run_id, min(nullif(trim(team), '')) AS team
    FROM tracker_runs
    WHERE month = $month
    GROUP BY run_id
),
lines AS (
    SELECT
        hash(x_SourceLine) AS line_key,
        nullif(trim(coalesce(Tags['team'], Tags['user_team'], Tags['user:team'])), '')
            AS tag_team
    FROM billing_facts
    WHERE month = $month
      -- only tagged lines: the join's hash table holds these, not every line
      AND nullif(trim(coalesce(Tags['team'], Tags['user_team'], Tags['user:team'])), '')
          IS NOT NULL
)
SELECT
    a.month,
    coalesce(r.team, l.tag_team)          AS team,
    a.purpose_class,
    a.component,
    fsum(a.cost)                           AS cost,
    coalesce(fsum(a.hours), 0)             AS hours,
    coalesce(fsum(a.accelerator_hours), 0) AS accelerator_hours,
    count(DISTINCT a.run_id)              AS runs
FROM attribution_rows AS a
LEFT JOIN runs  AS r ON r.run_id = a.run_id
LEFT JOIN lines AS l ON l.line_key = a.line_key
WHERE a.month = $month
GROUP BY a.month, coalesce(r.team, l.tag_team), a.purpose_class, a.component
