-- Every run's cost over all the months the warehouse holds: what the `cost.*` tags of an
-- MLflow run say (SPEC §12; ingest/sources/mlflow_tags.py formats and writes them).
-- Σ in month order (fsum: compensated), so the same rows always give the same cents; with
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
    fsum(cost ORDER BY month)              AS total_usd,
    fsum(gpu_cost ORDER BY month)          AS gpu_usd,
    fsum(cpu_cost ORDER BY month)          AS cpu_usd,
    fsum(storage_cost ORDER BY month)      AS storage_usd,
    fsum(network_cost ORDER BY month)      AS network_usd,
    fsum(other_cost ORDER BY month)        AS other_usd,
    fsum(accelerator_hours ORDER BY month) AS gpu_hours,
    string_agg(DISTINCT strftime(month, '%Y-%m'), ',' ORDER BY strftime(month, '%Y-%m'))
                                           AS months,
    string_agg(DISTINCT currency, ',' ORDER BY currency) AS currencies
FROM run_costs
JOIN month_currency USING (month)
GROUP BY run_id
ORDER BY run_id
