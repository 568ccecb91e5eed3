-- Every run's cost over all the months the warehouse holds: what the `cost.*` tags of an
-- MLflow run say (SPEC §12; ingest/sources/mlflow_tags.py formats and writes them).
-- Σ exact: each month's figure cast to DECIMAL first, as the reports sum (five months of
-- $0.011 are 0.055 → 0.06; the doubles' Σ 0.05499999999999999 gave 0.05); with
-- the currencies its months are billed in (`billing_months`, one a month, SPEC §5; a month
-- without its bill counts as USD, as the reports do), comma-separated: amounts of months in
-- two currencies do not add up, and the writer leaves them out.
WITH month_currency AS (
    SELECT m.month, coalesce(b.currency, 'USD') AS currency
    FROM (SELECT DISTINCT month FROM run_costs) AS m
    LEFT JOIN month_currencies() AS b USING (month)
)
SELECT
    run_id,
    sum(CAST(cost AS DECIMAL(38, 10)))              AS total_usd,
    sum(CAST(gpu_cost AS DECIMAL(38, 10)))          AS gpu_usd,
    sum(CAST(cpu_cost AS DECIMAL(38, 10)))          AS cpu_usd,
    sum(CAST(storage_cost AS DECIMAL(38, 10)))      AS storage_usd,
    sum(CAST(network_cost AS DECIMAL(38, 10)))      AS network_usd,
    sum(CAST(other_cost AS DECIMAL(38, 10)))        AS other_usd,
    sum(CAST(accelerator_hours AS DECIMAL(38, 10))) AS gpu_hours,
    string_agg(DISTINCT strftime(month, '%Y-%m'), ',' ORDER BY strftime(month, '%Y-%m'))
                                                    AS months,
    string_agg(DISTINCT currency, ',' ORDER BY currency) AS currencies
FROM run_costs
JOIN month_currency USING (month)
GROUP BY run_id
ORDER BY run_id
