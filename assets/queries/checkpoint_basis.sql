-- What retention_violations and storage_by_run_status are computed from (macros.sql
-- `checkpoint_objects`), as one text: every listed object of the month, the S3 Inventory
-- reports read (an empty one empties its bucket), the bill's storage lines (a bucket's price
-- per byte), and of each run only what classes it (live, production, dead) — not its times
-- or its cost. Sums of row hashes: the order rows are read in does not matter.
-- decision_basis keeps it beside the rows they wrote. Parameters: $month.
SELECT concat_ws(' ',
    (SELECT count(*) || ':' || coalesce(sum(hash(i)), 0)
     FROM checkpoint_inventory AS i WHERE month = $month),
    (SELECT count(*) || ':' || coalesce(sum(hash(s)), 0)
     FROM checkpoint_snapshots AS s WHERE month = $month),
    (SELECT count(*) || ':' || coalesce(sum(hash(ResourceId, EffectiveCost)), 0)
     FROM billing_facts WHERE month = $month AND x_CostComponent = 'storage'),
    (SELECT count(*) || ':' || coalesce(sum(hash(run_id, status, purpose, keep, deleted)), 0)
     FROM tracker_runs WHERE month = $month)
) AS inputs
