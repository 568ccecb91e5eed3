-- The period report's months: each month's whole bill (tax, credits and fees included),
-- amortized (EffectiveCost) and as invoiced (BilledCost), summed as DECIMAL so the figures
-- are exact to the cent, with the month's currency (one per month, SPEC §5).
-- Parameters: $first, $last (first days of the first and last month). A month without
-- billing lines has no row: the caller names it as missing.
SELECT
    month,
    count(*)                                         AS lines,
    sum(CAST(EffectiveCost AS DECIMAL(38, 10)))      AS effective_cost,
    sum(CAST(BilledCost AS DECIMAL(38, 10)))         AS billed_cost,
    count(DISTINCT BillingCurrency)                  AS currencies,
    coalesce(min(BillingCurrency), 'USD')            AS currency
FROM billing_facts
WHERE month BETWEEN $first AND $last
GROUP BY month
ORDER BY month
