-- The month's whole bill for the report's headline (tax, credits, fees included), amortized
-- and as invoiced. Money is summed as DECIMAL: exact sums of the doubles each line carries,
-- so the BilledCost → EffectiveCost bridge (report_bridge.sql) closes to the cent.
-- `charges_to`, the end of the latest charge, dates the page by its data, not by the clock.
-- Parameters: $month.
SELECT
    count(*)                                        AS lines,
    sum(CAST(EffectiveCost AS DECIMAL(38, 10)))     AS effective_cost,
    sum(CAST(BilledCost AS DECIMAL(38, 10)))        AS billed_cost,
    mode(BillingCurrency)                           AS currency,
    max(ChargePeriodEnd)                            AS charges_to
FROM billing_facts
WHERE month = $month
