-- Listed objects → checkpoint_inventory: which run and which checkpoint each object is.
-- An object under `<prefix><run_id>/` belongs to that run id (known to a tracker or not);
-- the checkpoint is the next path segment, or the object itself when it sits directly
-- under the run's folder. An object under the prefix but outside any run folder (a loose
-- file such as `<prefix>README`) keeps its prefix and has no run id. `source_prefix` is
-- the configured prefix as `checkpoints.py` `run_prefix` reads it: one ending in a letter or
-- digit names a folder, so `checkpoints` is `checkpoints/` (and `checkpoints-old/…` is not
-- under it); one ending in `/` or any other character is the keys' start as written
-- (`ckpt-` makes `ckpt-r1/…` run `r1`). A `/` doubled after the prefix counts once:
-- `checkpoints//r1/…` (a prefix ending in `/` joined to `/r1`) is run `r1`.
-- The same object listed by two sources is kept once: `checkpoints.py` adds that step only
-- when the listing repeats an object (a hash count says; the step costs ~0.25 s at 1M
-- objects), keeping the copy under a prefix, then the first source's (then the newest, the
-- largest: an order with no ties). Copies within one source are identical by then: copies
-- differing in size or time were refused (`_refuse_differing_copies`, SPEC §11).
WITH listed AS (
    SELECT *,
        starts_with(key, coalesce(source_prefix, '')) AS under_prefix,
        string_split(
            regexp_replace(substr(key, length(coalesce(source_prefix, '')) + 1), '^/', ''),
            '/') AS parts
    FROM listing_arrow
)
SELECT
    CAST($month AS DATE) AS month,
    source, bucket, key, size, last_modified, snapshot_date,
    CASE WHEN under_prefix THEN coalesce(source_prefix, '') END AS prefix,
    CASE WHEN under_prefix AND len(parts) >= 2 THEN nullif(parts[1], '') END AS run_id,
    CASE WHEN under_prefix AND len(parts) >= 2 AND parts[1] <> ''
         THEN nullif(parts[2], '') END AS checkpoint
FROM listed
