-- Checkpoint storage by the state of the run that wrote it, per month: what dead runs'
-- checkpoints cost month after month (storage_by_run_status). Parameters: $first, $last.
SELECT month, run_status, objects, bytes, cost
FROM storage_by_run_status
WHERE month BETWEEN $first AND $last
ORDER BY month, run_status
