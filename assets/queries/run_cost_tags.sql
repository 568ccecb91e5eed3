-- Every run's cost over all the months the warehouse holds: what the `cost.*` tags of an
-- MLflow run say (SPEC §12; ingest/sources/mlflow_tags.py formats and writes them).
-- Σ in month order (fsum: compensated), so the same rows always give the same cents.
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
                                           AS months
FROM run_costs
GROUP BY run_id
ORDER BY run_id
