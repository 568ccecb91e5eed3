-- The searches of the month that break the approval rule (SPEC §12, check
-- `searches_within_estimate`): active in the month with no recorded estimate
-- (`cost-pipeline estimate ... --approve --search-id S`), or whose cost so far exceeds
-- $tolerance x the estimate. Parameters: $month, $tolerance.
SELECT
    search_id,
    model,
    CASE WHEN estimated_cost IS NULL THEN 'no_estimate' ELSE 'over_estimate' END AS reason,
    estimated_cost,
    cumulative_cost,
    overrun
FROM search_costs
WHERE month = $month
  AND (estimated_cost IS NULL OR cumulative_cost > $tolerance * estimated_cost)
ORDER BY reason, overrun DESC NULLS LAST, search_id
