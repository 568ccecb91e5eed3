-- The searches of the month that break the approval rule (SPEC §12, check
-- `searches_within_estimate`): active in the month with no recorded estimate
-- (`cost-pipeline estimate ... --approve --search-id S`), or whose cost so far exceeds
-- $tolerance x the estimate, both compared to 10 decimal places (CUR's own precision for
-- amounts): a cost exactly at the tolerance is within it, where 1.1 × 1.13 read
-- 1.2429999999999999 in doubles and a cost of 1.243 was over. Parameters: $month, $tolerance.
SELECT
    search_id,
    model,
    CASE WHEN estimated_cost IS NULL THEN 'no_estimate' ELSE 'over_estimate' END AS reason,
    estimated_cost,
    cumulative_cost,
    overrun
FROM search_costs
WHERE month = $month
  AND (estimated_cost IS NULL OR round(cumulative_cost, 10) > round($tolerance * estimated_cost, 10))
ORDER BY reason, overrun DESC NULLS LAST, search_id
