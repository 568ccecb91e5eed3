-- Listed objects → checkpoint_inventory: which run and which checkpoint each object is.
-- An object under `<prefix><run_id>/` belongs to that run id (known to a tracker or not);
-- the checkpoint is the next path segment, or the object itself when it sits directly
-- under the run's folder. The same object listed by two sources is kept once.
WITH listed AS (
    SELECT *,
        starts_with(key, coalesce(source_prefix, '')) AS under_prefix,
        string_split(substr(key, length(source_prefix) + 1), '/') AS parts
    FROM listing_arrow
)
SELECT
    CAST($month AS DATE) AS month,
    source, bucket, key, size, last_modified, snapshot_date,
    CASE WHEN under_prefix THEN source_prefix END AS prefix,
    CASE WHEN under_prefix AND parts[1] <> '' THEN parts[1] END AS run_id,
    CASE WHEN under_prefix AND len(parts) >= 2 THEN parts[2] END AS checkpoint
FROM listed
QUALIFY row_number() OVER (PARTITION BY bucket, key, snapshot_date ORDER BY under_prefix DESC,
                                                                            source) = 1
