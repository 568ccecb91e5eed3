-- The searches of the month that break the approval rule (SPEC §12, check
-- `searches_within_estimate`): active in the month with no recorded estimate
-- (`cost-pipeline estimate ... --approve --search-id S`), or whose cost so far exceeds
-- $tolerance x the estimate. Over means the cost minus that limit, to 10 decimal places
-- (CUR's own precision for amounts), exceeds 1e-12 of the larger of the two: figures equal
-- within the doubles' precision are equal at any size, so a cost exactly at the tolerance
-- is within it. 1.1 × 1.13 reads 1.2429999999999999 and 1.15 × 11,300,000 reads
-- 12994999.999999998 in doubles: a cost of 1.243 or of 12,995,000 was over (at $1M and more
-- a double's spacing passes 1e-10, so 10 decimals alone told such figures apart). A cent
-- over is still over up to $1e9 (1e-12 of it is a tenth of a cent).
-- Beside them, reason `other_currency`: a search whose latest recorded estimate is in
-- another currency than its spend (search_costs leaves its estimate and overrun NULL: the
-- amounts do not compare). It breaks no rule (it was approved) and cannot be held to its
-- estimate: the check names it apart, with the estimate's currency, and does not fail it.
-- Parameters: $month, $tolerance.
WITH approval AS (
    -- the latest recording of each search, as search_costs reads it (macros.sql)
    SELECT search_id, upper(trim(currency)) AS currency
    FROM latest_approvals()
)
SELECT
    s.search_id,
    s.model,
    CASE WHEN s.estimated_cost IS NOT NULL THEN 'over_estimate'
         WHEN a.currency IS NULL THEN 'no_estimate'
         ELSE 'other_currency' END                        AS reason,
    a.currency                                            AS estimate_currency,
    s.estimated_cost,
    s.cumulative_cost,
    s.overrun
FROM search_costs AS s
LEFT JOIN approval AS a ON a.search_id = s.search_id
WHERE s.month = $month
  AND (s.estimated_cost IS NULL
       OR over_limit(s.cumulative_cost - $tolerance * s.estimated_cost,
                     greatest(abs(s.cumulative_cost), abs($tolerance * s.estimated_cost))))
ORDER BY reason, s.overrun DESC NULLS LAST, s.search_id
