-- What retention_violations and storage_by_run_status are computed from (macros.sql
-- `checkpoint_objects`), as one text: every listed object of the month, the S3 Inventory
-- reports read (an empty one empties its bucket), the bill's storage lines (a bucket's price
-- per byte), and of each run only what classes it (live, production, dead): its status at
-- the month's end (macros.sql `status_at_month_end`: a run that ended after the
-- month's end was RUNNING then, so an end moved across the month's end changes it) — not its
-- times otherwise, nor its cost. Sums of row hashes: the order rows are read in does not
-- matter. Each text is hashed with its reversed text too (warehouse.py `row_hash`): DuckDB's
-- hash of a text alone is equal for texts such as `sweep-10/trial-30` and
-- `sweep-17/trial-40`. decision_basis keeps it beside the rows they wrote. Parameters:
-- $month, $month_end.
SELECT concat_ws(' ',
    (SELECT count(*) || ':' || coalesce(sum(hash(i, reverse(i.source), reverse(i.bucket),
                                                 reverse(i.key), reverse(i.prefix),
                                                 reverse(i.run_id), reverse(i.checkpoint))), 0)
     FROM checkpoint_inventory AS i WHERE month = $month),
    (SELECT count(*) || ':' || coalesce(sum(hash(s, reverse(s.source), reverse(s.bucket))), 0)
     FROM checkpoint_snapshots AS s WHERE month = $month),
    (SELECT count(*) || ':' || coalesce(sum(hash(ResourceId, reverse(ResourceId),
                                                 EffectiveCost)), 0)
     FROM billing_facts WHERE month = $month AND x_CostComponent = 'storage'),
    (SELECT count(*) || ':' || coalesce(sum(hash(run_id, reverse(run_id), status,
                                                 status_at_month_end(status, start_time,
                                                                     end_time, deleted,
                                                                     $month_end),
                                                 purpose, keep, deleted)), 0)
     FROM tracker_runs WHERE month = $month)
) AS inputs
