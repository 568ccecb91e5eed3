-- Each month's attributed cost by purpose class × component (the bill as lines, month by
-- month): the chart of cost by purpose class, what moved from the first month to the last,
-- and the 6-month strip of the monthly report. Summed as DECIMAL: exact to the cent, and the
-- same sum as every attribution row's cost cast to DECIMAL — read from the per-run sums
-- (attribution_runs.sql `cost_exact`), not from the rows: a few hundred thousand rows a month
-- where the rows are tens of millions, read again for every month of the period.
-- Parameters: $first, $last.
SELECT
    month,
    purpose_class,
    component,
    sum(cost_exact)                                                     AS cost,
    coalesce(fsum(accelerator_hours) FILTER (WHERE component = 'gpu'), 0) AS gpu_hours
FROM attribution_runs
WHERE month BETWEEN $first AND $last
GROUP BY month, purpose_class, component
ORDER BY month, purpose_class, component
