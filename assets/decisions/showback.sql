-- Showback: the month's whole bill by team, purpose class and component.
--
-- The team of a cost is the run's `team` (tracker column) when the cost belongs to a run that
-- names one; else the billing line's team tag (`team`, CUR 2.0's `user_team`, FOCUS-style
-- `user:team`); else NULL. So untracked and unallocated cost lands on a team only when the
-- resource itself is tagged. Every attribution row counts once: the rows add up to the
-- month's EffectiveCost.
--
-- How, without grouping every attribution row: a run naming a team takes it for all of its
-- cost, its per-run sums (attribution_runs) as they are. Only the rows of team-tagged lines
-- that take their team from the line — those of no run (untracked, unallocated) or of a
-- run naming none — are read one by one; the rest of such a run's (or untracked /
-- unallocated) cost is its per-run sum less those rows, and its team the run's (none).
WITH runs AS (
    SELECT run_id, min(nullif(trim(team), '')) AS team
    FROM tracker_runs
    WHERE month = $month
    GROUP BY run_id
),
teamed AS (
    -- the runs whose every row takes the run's team: their rows are not read one by one
    SELECT key_hash(run_id) AS run_hash FROM runs WHERE team IS NOT NULL
),
line_tags AS MATERIALIZED (
    -- every tagged line's team tag, looked up once: a filter on the lookup would be pushed
    -- into the scan and the lookup evaluated twice (0.84 -> 0.74 s at 2M, every line tagged)
    SELECT
        key_hash(x_SourceLine) AS line_key,
        nullif(trim(user_tag(Tags, 'team')), '') AS tag_team
    FROM billing_facts
    WHERE month = $month
      -- the NULL test first: most lines carry no tags, and the map lookups cost 5× more
      AND Tags IS NOT NULL
),
tagged_lines AS (
    SELECT line_key, tag_team FROM line_tags WHERE tag_team IS NOT NULL
),
on_tagged_by_hash AS (
    -- the rows of tagged lines of no run or of a run naming no team, by run | untracked |
    -- unallocated, group and line team
    SELECT
        a.run_hash, a.purpose_class, a.component, t.tag_team,
        fsum(a.cost) AS cost, fsum(a.hours) AS hours,
        fsum(a.accelerator_hours) AS accelerator_hours, count(*) AS rows
    FROM attribution_rows AS a
    JOIN tagged_lines AS t ON t.line_key = a.line_key
    WHERE a.month = $month
      AND (a.run_hash IS NULL OR a.run_hash NOT IN (SELECT run_hash FROM teamed))
    GROUP BY ALL
),
on_tagged AS (
    -- each run named by its run_id, as attribution_runs names it
    SELECT h.run_id, t.* EXCLUDE (run_hash)
    FROM on_tagged_by_hash AS t
    LEFT JOIN run_hashes($month) AS h ON h.run_hash = t.run_hash
),
on_tagged_sums AS (
    SELECT run_id, purpose_class, component, fsum(cost) AS cost, fsum(hours) AS hours,
           fsum(accelerator_hours) AS accelerator_hours, sum(rows) AS rows
    FROM on_tagged
    GROUP BY ALL
),
all_sums AS (
    SELECT run_id, purpose_class, component, fsum(cost) AS cost, fsum(hours) AS hours,
           fsum(accelerator_hours) AS accelerator_hours, sum(rows) AS rows
    FROM attribution_runs
    WHERE month = $month
    GROUP BY ALL
),
untagged AS (
    -- the rows of untagged lines: all of the group's rows less those of tagged lines
    SELECT
        s.run_id, s.purpose_class, s.component,
        CASE WHEN t.rows IS NULL THEN s.cost ELSE s.cost - t.cost END AS cost,
        CASE WHEN t.rows IS NULL THEN s.hours ELSE s.hours - coalesce(t.hours, 0) END AS hours,
        CASE WHEN t.rows IS NULL THEN s.accelerator_hours
             ELSE s.accelerator_hours - coalesce(t.accelerator_hours, 0) END
            AS accelerator_hours
    FROM all_sums AS s
    LEFT JOIN on_tagged_sums AS t
      ON t.run_id IS NOT DISTINCT FROM s.run_id
     AND t.purpose_class = s.purpose_class AND t.component = s.component
    WHERE s.rows > coalesce(t.rows, 0)
),
pieces AS (
    SELECT r.team, u.purpose_class, u.component, u.run_id, u.cost, u.hours,
           u.accelerator_hours
    FROM untagged AS u
    LEFT JOIN runs AS r ON r.run_id = u.run_id
    UNION ALL
    SELECT coalesce(r.team, t.tag_team), t.purpose_class, t.component, t.run_id, t.cost,
           t.hours, t.accelerator_hours
    FROM on_tagged AS t
    LEFT JOIN runs AS r ON r.run_id = t.run_id
)
SELECT
    CAST($month AS DATE)                 AS month,
    team,
    purpose_class,
    component,
    fsum(cost)                           AS cost,
    coalesce(fsum(hours), 0)             AS hours,
    coalesce(fsum(accelerator_hours), 0) AS accelerator_hours,
    count(DISTINCT run_id)               AS runs
FROM pieces
GROUP BY team, purpose_class, component
