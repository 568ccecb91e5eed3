-- BilledCost (the invoice) → EffectiveCost (amortized) for the report: one step per line item
-- type whose Σ(EffectiveCost − BilledCost) is not zero, largest first. Summed as DECIMAL like
-- report_headline.sql, so the headline's BilledCost + Σ steps = its EffectiveCost exactly.
-- Parameters: $month.
SELECT
    coalesce(x_LineItemType, ChargeCategory)        AS item_type,
    sum(CAST(EffectiveCost AS DECIMAL(38, 10))
        - CAST(BilledCost AS DECIMAL(38, 10)))      AS amount,
    count(*)                                        AS lines
FROM billing_facts
WHERE month = $month
GROUP BY 1
HAVING sum(CAST(EffectiveCost AS DECIMAL(38, 10)) - CAST(BilledCost AS DECIMAL(38, 10))) <> 0
ORDER BY abs(amount) DESC, item_type
