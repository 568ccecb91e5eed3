-- Showback: the month's whole bill by team, purpose class and component.
--
-- The team of a cost is the run's `team` (tracker column) when the cost belongs to a run that
-- names one; else the billing line's team tag (`team`, CUR 2.0's `user_team`, FOCUS-style
-- `user:team`); else NULL. So untracked and unallocated cost lands on a team only when the
-- resource itself is tagged. Every attribution row counts once: the rows add up to the
-- month's EffectiveCost. The rows come summed per run and line group, the line's team tag
-- among the group's attributes (attribution_by_run.sql).
WITH runs AS (
    SELECT run_id, min(nullif(trim(team), '')) AS team
    FROM tracker_runs
    WHERE month = $month
    GROUP BY run_id
),
SELECT
    a.month,
    coalesce(r.team, a.tag_team)          AS team,
    a.purpose_class,
    a.component,
    fsum(a.cost)                           AS cost,
    coalesce(fsum(a.hours), 0)             AS hours,
    coalesce(fsum(a.accelerator_hours), 0) AS accelerator_hours,
    count(DISTINCT a.run_id)              AS runs
FROM attribution_by_run AS a
LEFT JOIN runs  AS r ON r.run_id = a.run_id
WHERE a.month = $month
GROUP BY a.month, coalesce(r.team, a.tag_team), a.purpose_class, a.component
