-- Untracked share of billed GPU-hours per month against the month's threshold
-- (reconciliation), with the month's statement's GPU-hours (tracked, untracked, billed: the
-- period page writes them with one number of decimals, as the month's own page; billed −
-- untracked is not the tracked hours when runs claim more than the bill shows). Parameters:
-- $first, $last.
SELECT
    month,
    untracked_share,
    threshold,
    status,
    billed_gpu_hours,
    tracked_gpu_hours,
    untracked_gpu_hours,
    untracked_cost,
    provisional
FROM reconciliation
WHERE month BETWEEN $first AND $last
ORDER BY month
