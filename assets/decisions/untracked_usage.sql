-- Untracked usage: the cost nobody's run claimed, as a list to chase.
--
-- Every billed line (or the part of it) that no tracker run could claim was recorded by the
-- attribution step with purpose_class 'untracked' and a kind:
--   no_run        - a resource no run listed or tagged (a VM somebody forgot, a wrong id)
--   idle_capacity - a resource runs used only partly (the rest of the hour / the other GPUs)
--   shared        - NAT gateways, endpoints, lines without a resource id: no run can name them
-- The billing line says WHICH resource and WHICH day, so the list can be handed to the owning
-- team ("instance i-0abc cost 412 on 2024-03-07 and no run used it"): the month's rows summed
-- per run and line group (attribution_by_run.sql) carry both. Days are UTC calendar days of
-- the charge period's start.
SELECT
    month,
    resource_id,
    day,
    component,
    -- attribution always labels its untracked rows; 'no_run' is the safe reading if not
    coalesce(kind, 'no_run')                    AS kind,
    fsum(hours)                                 AS hours,
    fsum(accelerator_hours)                     AS accelerator_hours,
    fsum(cost)                                  AS cost
FROM attribution_by_run
WHERE month = $month
  AND purpose_class = 'untracked'
  AND line_billed   -- rows of a line billing_facts holds
GROUP BY month, resource_id, day, component, coalesce(kind, 'no_run')
