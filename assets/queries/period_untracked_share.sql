-- Untracked share of billed GPU-hours per month against the month's threshold
-- (reconciliation). Parameters: $first, $last.
SELECT
    month,
    untracked_share,
    threshold,
    status,
    billed_gpu_hours,
    untracked_gpu_hours,
    untracked_cost,
    provisional
FROM reconciliation
WHERE month BETWEEN $first AND $last
ORDER BY month
