-- The period report's months: each month's whole bill (tax, credits and fees included),
-- amortized (EffectiveCost) and as invoiced (BilledCost), summed as DECIMAL so the figures
-- are exact to the cent, with the month's currency (one per month, SPEC §5). A month's row
-- is the one written with its lines (`billing_months`, billing.py writes it with this
-- query); a month without one (a warehouse written before the table) is summed from its
-- lines. Parameters: $first, $last (first days of the first and last month). A month without
-- billing lines has no row: the caller names it as missing.
WITH written AS (
    SELECT month, lines, effective_cost, billed_cost, currencies, currency
    FROM billing_months
    WHERE month BETWEEN $first AND $last
)
SELECT * FROM written
UNION ALL
SELECT
    month,
    count(*)                                         AS lines,
    sum(CAST(EffectiveCost AS DECIMAL(38, 10)))      AS effective_cost,
    sum(CAST(BilledCost AS DECIMAL(38, 10)))         AS billed_cost,
    count(DISTINCT BillingCurrency)                  AS currencies,
    coalesce(min(BillingCurrency), 'USD')            AS currency
FROM billing_facts
WHERE month BETWEEN $first AND $last
  AND month NOT IN (SELECT month FROM written)
GROUP BY month
ORDER BY month
