-- The resources runs list that no billing line of the month shows (wrong ids, other
-- accounts), most GPU-hours first: the `tracker_claims_billed` check's list behind
-- `reconciliation.unbilled_claim_gpu_hours` (both read macros.sql `unbilled_claims`).
-- Parameters: $month, $month_start, $month_end.
SELECT
    resource_id,
    count(DISTINCT run_id)                          AS runs,
    list(DISTINCT run_id ORDER BY run_id)[1:5]      AS run_ids,
    fsum(gpu_hours)                                  AS gpu_hours
FROM unbilled_claims($month, $month_start, $month_end)  -- distinct per run and resource
GROUP BY resource_id
ORDER BY gpu_hours DESC, resource_id
