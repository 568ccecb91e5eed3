-- Split cost allocation data (SPEC §3; billing_facts_cur2.sql describes the rule): after the
-- delivery's lines are inserted, each pod's split cost is moved out of its parent instance's
-- hour. Run only when a line of the delivery names a parent instance.
-- Reads the temp view `cur_raw` (the delivery) and the month's billing_facts rows that
-- billing_facts_cur2.sql inserted from it, where a pod's split row (x_ResourceKind
-- 'container') still holds its split cost as EffectiveCost.
-- Parameters: $month, $source.
--
-- For each parent instance and hour: split_cost = what its pods' split rows claim (an
-- identical duplicate row counts once), cost / billed / list = what the instance's usage rows
-- of that hour bill (each line once), moved = least(split_cost, cost) when cost > 0, else 0
-- (a pod whose parent row is absent from the export takes nothing: conservation first).
-- A pod row then costs its split cost × moved / split_cost, bills billed × moved / cost of its
-- share, and takes its parent's pricing, component and instance type; each of the parent's
-- rows keeps its cost × (1 − moved / cost) and is marked x_SplitParent. The parent hour's
-- pricing, of rows that may differ (0.75 h covered by a savings plan, 0.25 h on demand):
-- spot if any row is spot, else committed if any is, else on_demand.
UPDATE billing_facts AS b
SET
    EffectiveCost = CASE
        WHEN m.pod THEN
            CASE WHEN m.split_cost > 0 THEN b.EffectiveCost * m.moved / m.split_cost ELSE 0 END
        WHEN m.moved > 0 THEN b.EffectiveCost * (1 - m.moved / m.cost)
        ELSE b.EffectiveCost
    END,
    -- the invoice's share moves with the amortized one, and so does the price at list: a pod
    -- bills its fraction of what the instance's hour billed (its EffectiveCost still holds
    -- its split cost here)
    BilledCost = split_amount(m.pod, b.BilledCost, m.billed, b.EffectiveCost, m.split_cost,
                              m.moved, m.cost),
    ListCost = split_amount(m.pod, b.ListCost, m.list, b.EffectiveCost, m.split_cost,
                            m.moved, m.cost),
    -- a pod runs on its instance's pricing (spot node, savings plan …) and its cost is part
    -- of the instance's: same component (gpu on a GPU node), same instance type
    x_PricingCategory = CASE WHEN m.pod THEN coalesce(m.pricing, b.x_PricingCategory)
                             ELSE b.x_PricingCategory END,
    ServiceCategory = CASE WHEN m.pod THEN service_category(coalesce(m.component,
                                                                     b.x_CostComponent))
                           ELSE b.ServiceCategory END,
    x_CostComponent = CASE WHEN m.pod THEN coalesce(m.component, b.x_CostComponent)
                           ELSE b.x_CostComponent END,
    x_InstanceType = CASE WHEN m.pod THEN coalesce(m.instance_type, b.x_InstanceType)
                          ELSE b.x_InstanceType END,
    x_SplitParent = NOT m.pod
FROM (
    WITH pod_rows AS (
        -- the delivery's pod rows, each line once (narrow: cur_raw's columns): its parent hour
        -- and split cost, of a repeated line's rows the least (parent, s, e, split_cost) — a
        -- struct's min compares its fields in order; DISTINCT ON's sort cost 1 s more at 1.2M
        -- pod rows. A line is its id's hash here (one integer to group and join by; a month
        -- two of whose line ids share one is refused once the split is done, billing.py
        -- `_check_staged`)
        SELECT line, p.parent, p.s, p.e, p.split_cost
        FROM (
            SELECT line, min({'parent': parent, 's': s, 'e': e, 'split_cost': split_cost}) AS p
            FROM (
                SELECT
                    key_hash(cur_source_line($source, identity_line_item_id,
                                             identity_time_interval, line_item_usage_start_date,
                                             line_item_usage_end_date)) AS line,
                    trim(split_line_item_parent_resource_id) AS parent,
                    line_item_usage_start_date AS s, line_item_usage_end_date AS e,
                    greatest(coalesce(split_line_item_net_split_cost, split_line_item_split_cost,
                                      0), 0) AS split_cost
                FROM cur_raw
                WHERE nullif(trim(split_line_item_parent_resource_id), '') IS NOT NULL
                  AND line_item_line_item_type IN ('Usage', 'DiscountedUsage',
                                                   'SavingsPlanCoveredUsage', 'SavingsPlanNegation')
            )
            GROUP BY line
        )
    ),
    pod_hours AS (
        -- the pods' split costs per parent hour (each line once: an identical duplicate row
        -- counts once; ingest refuses a conflicting one)
        SELECT parent, s, e, fsum(split_cost) AS split_cost
        FROM pod_rows
        GROUP BY ALL
    ),
    parent_lines AS (
        -- the delivery's lines on a parent's resource in one of its pods' hours
        SELECT DISTINCT
            key_hash(cur_source_line($source, identity_line_item_id, identity_time_interval,
                                     line_item_usage_start_date, line_item_usage_end_date)) AS line
        FROM cur_raw
        SEMI JOIN pod_hours p
          ON p.parent = nullif(trim(line_item_resource_id), '')
         AND p.s = line_item_usage_start_date AND p.e = line_item_usage_end_date
    ),
    parent_rows AS (
        -- of those, the instance-usage rows (covered, negation, on-demand …), each line once
        SELECT key_hash(f.x_SourceLine) AS line, f.ResourceId AS parent,
               f.ChargePeriodStart AS s,
               f.ChargePeriodEnd AS e, f.EffectiveCost, f.BilledCost, f.ListCost,
               f.x_PricingCategory, f.x_CostComponent, f.x_InstanceType
        FROM billing_facts f
        SEMI JOIN parent_lines l ON l.line = key_hash(f.x_SourceLine)
        WHERE f.month = $month AND f.x_InstanceUsage AND f.x_ResourceKind <> 'container'
        QUALIFY row_number() OVER (PARTITION BY key_hash(f.x_SourceLine)
                                   ORDER BY f.x_File, f.x_Row) = 1
    ),
    split_hours AS (
        SELECT
            p.parent, p.s, p.e, p.split_cost, h.cost, h.billed, h.list, h.pricing, h.component,
            h.instance_type,
            CASE WHEN h.cost > 0 THEN least(p.split_cost, h.cost) ELSE 0 END AS moved
        FROM pod_hours p
        LEFT JOIN (
            SELECT parent, s, e, fsum(EffectiveCost) AS cost, fsum(BilledCost) AS billed,
                   fsum(ListCost) AS list,
                   -- the hour's pricing: spot if any of its usage is spot, else committed if
                   -- a savings plan or reservation covers any of it, else on demand (a
                   -- partly covered hour is committed, not whichever name sorts last)
                   CASE WHEN bool_or(x_PricingCategory = 'spot') THEN 'spot'
                        WHEN bool_or(x_PricingCategory = 'committed') THEN 'committed'
                        WHEN bool_or(x_PricingCategory = 'on_demand') THEN 'on_demand'
                   END AS pricing,
                   max(x_CostComponent) AS component, max(x_InstanceType) AS instance_type
            FROM parent_rows GROUP BY ALL
        ) h USING (parent, s, e)
    )
    SELECT r.line, true AS pod, h.* EXCLUDE (parent, s, e)
    FROM pod_rows r
    JOIN split_hours h USING (parent, s, e)
    UNION ALL
    SELECT r.line, false AS pod, h.* EXCLUDE (parent, s, e)
    FROM (SELECT DISTINCT line, parent, s, e FROM parent_rows) r
    JOIN split_hours h USING (parent, s, e)
) AS m
WHERE b.month = $month AND key_hash(b.x_SourceLine) = m.line
  AND (b.x_ResourceKind = 'container') = m.pod
