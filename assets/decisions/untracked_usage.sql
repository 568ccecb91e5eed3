-- Untracked usage: the cost nobody's run claimed, as a list to chase.
--
-- Every billed line (or the part of it) that no tracker run could claim was recorded by the
-- attribution step with purpose_class 'untracked' and a kind:
--   no_run        - a resource no run listed or tagged (a VM somebody forgot, a wrong id)
--   idle_capacity - a resource runs used only partly (the rest of the hour / the other GPUs)
--   shared        - NAT gateways, endpoints, lines without a resource id: no run can name them
-- We bring back the billing line to know WHICH resource and WHICH day, so the list can be
-- handed to the owning team ("instance i-0abc cost 412 on 2024-03-07 and no run used it").
-- Days are UTC calendar days of the charge period's start.
WITH untracked AS MATERIALIZED (
    -- materialized: the join then knows how few rows these are, and hashes them rather than
    -- the month's lines (which it did in a run that had just re-attributed the month: the
    -- rows deleted and written again in one transaction double the table's estimate)
    SELECT month, line_key, component, kind, hours, accelerator_hours, cost
    FROM attribution_rows
    WHERE month = $month AND purpose_class = 'untracked'
)
SELECT
    a.month,
    b.ResourceId                                AS resource_id,
    CAST(b.ChargePeriodStart AS DATE)           AS day,
    a.component,
    -- attribution always labels its untracked rows; 'no_run' is the safe reading if not
    coalesce(a.kind, 'no_run')                  AS kind,
    fsum(a.hours)                                AS hours,
    fsum(a.accelerator_hours)                    AS accelerator_hours,
    fsum(a.cost)                                 AS cost
FROM untracked AS a
JOIN (SELECT month, ResourceId, ChargePeriodStart,
             key_hash(x_SourceLine) AS line_key
      FROM billing_facts WHERE month = $month) AS b
  ON b.month = a.month
 AND b.line_key = a.line_key
GROUP BY a.month, b.ResourceId, CAST(b.ChargePeriodStart AS DATE), a.component,
         coalesce(a.kind, 'no_run')
