-- Each month's attributed cost by purpose class × component (the bill as lines, month by
-- month): the chart of cost by purpose class, what moved from the first month to the last,
-- and the 6-month strip of the monthly report. Summed as DECIMAL: exact to the cent.
-- Parameters: $first, $last.
SELECT
    month,
    purpose_class,
    component,
    sum(CAST(cost AS DECIMAL(38, 10)))                                  AS cost,
    coalesce(fsum(accelerator_hours) FILTER (WHERE component = 'gpu'), 0) AS gpu_hours
FROM attribution_rows
WHERE month BETWEEN $first AND $last
GROUP BY month, purpose_class, component
ORDER BY month, purpose_class, component
