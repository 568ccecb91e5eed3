-- The searches of the month that break the approval rule (SPEC §12, check
-- `searches_within_estimate`): active in the month with no recorded estimate
-- (`cost-pipeline estimate ... --approve --search-id S`), or whose cost so far exceeds
-- $tolerance x the estimate. Over means the cost minus that limit, to 10 decimal places
-- (CUR's own precision for amounts), exceeds 1e-12 of the larger of the two: figures equal
-- within the doubles' precision are equal at any size, so a cost exactly at the tolerance
-- is within it. 1.1 × 1.13 reads 1.2429999999999999 and 1.15 × 11,300,000 reads
-- 12994999.999999998 in doubles: a cost of 1.243 or of 12,995,000 was over (at $1M and more
-- a double's spacing passes 1e-10, so 10 decimals alone told such figures apart). A cent
-- over is still over up to $1e9 (1e-12 of it is a tenth of a cent). Parameters: $month,
-- $tolerance.
SELECT
    search_id,
    model,
    CASE WHEN estimated_cost IS NULL THEN 'no_estimate' ELSE 'over_estimate' END AS reason,
    estimated_cost,
    cumulative_cost,
    overrun
FROM search_costs
WHERE month = $month
  AND (estimated_cost IS NULL
       OR over_limit(cumulative_cost - $tolerance * estimated_cost,
                     greatest(abs(cumulative_cost), abs($tolerance * estimated_cost))))
ORDER BY reason, overrun DESC NULLS LAST, search_id
