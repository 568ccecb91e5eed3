-- Each delivery of the month against the one before it of the same source (by first
-- sighting): which it replaced and how much it changed the month's EffectiveCost (AWS
-- restates a month during and after it). Parameters: $month.
UPDATE billing_deliveries AS d
SET previous_execution_id = p.previous_id,
    change_effective_cost = d.total_effective_cost - p.previous_total
FROM (SELECT source, execution_id,
             lag(execution_id) OVER w AS previous_id,
             lag(total_effective_cost) OVER w AS previous_total
      FROM billing_deliveries WHERE month = $month
      WINDOW w AS (PARTITION BY source ORDER BY first_seen, execution_id)) AS p
WHERE d.month = $month AND d.source = p.source
  AND d.execution_id = p.execution_id
