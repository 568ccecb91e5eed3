-- One delivery of a month's bill as seen by the reader (a source's manifest execution, or its
-- files): recorded when first seen, its last sighting and the month's total as read now
-- updated when seen again. Parameters: $month, $source, $execution_id, $location, $files,
-- $file_bytes, $seen_at, $total.
INSERT INTO billing_deliveries (month, source, execution_id, location, files,
    file_bytes, first_seen, last_seen, total_effective_cost)
VALUES ($month, $source, $execution_id, $location, $files, $file_bytes,
        $seen_at, $seen_at, $total)
ON CONFLICT (month, source, execution_id) DO UPDATE SET
    last_seen = excluded.last_seen,
    total_effective_cost = excluded.total_effective_cost
