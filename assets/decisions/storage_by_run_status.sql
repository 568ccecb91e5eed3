-- Checkpoint storage by the state of the run that wrote it, at the month's end.
--
--   live       - the run was RUNNING at the month's end (its checkpoints are needed to
--                resume): one that ended after the month's end was RUNNING then
--   production - a FINISHED production run, or one explicitly marked keep=true
--   dead       - every other run the tracker knows: FAILED, KILLED, deleted in the tracker
--                (whatever its status at the month's end), or a FINISHED experiment nobody
--                asked to keep
--   orphan     - a run folder whose run the tracker does not know at all
-- Dead and orphan bytes are the storage that a retention policy would free. Only objects in
-- run folders under a checkpoint prefix count; datasets and other data are not checkpoints.
-- Cost is each bucket's storage bill this month spread evenly over every byte listed in it.
-- The objects, their run's state and their cost are macros.sql's `checkpoint_objects`, the
-- same that retention_violations judges.
SELECT
    CAST($month AS DATE)                            AS month,
    run_class                                       AS run_status,
    count(*)                                        AS objects,
    sum(size)                                       AS bytes,
    fsum(monthly_cost)                               AS cost
FROM checkpoint_objects($month, $month_end)
GROUP BY run_class
