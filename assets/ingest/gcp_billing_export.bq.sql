-- BigQuery (GoogleSQL), sent by cost_pipeline/sources/gcp_billing.py: one month of the GCP
-- detailed billing export (gcp_billing_export_resource_v1_*), reduced inside BigQuery to
-- one row per resource × hour × SKU (× cost type × run label × invoice month; a row naming no
-- resource also × project × labels) carrying the cost, the usage
-- and the usage-discount credits, plus one row per other credit type of that key. Only
-- these reduced rows leave BigQuery; assets/billing_facts_gcp.sql normalizes them.
-- An hour's slices invoiced in two months (a late slice on the next month's invoice) stay two
-- rows: each is billed on its own invoice.
--
-- Rows arrive late (export_time can be days after the usage): the month is selected by
-- usage_start_time, never by export time or partition. A row without usage_start_time is
-- in no month: those invoiced in the month are read to be counted (the reader refuses them).
-- Parameters: @month_start, @month_end (TIMESTAMP), @invoice_month (STRING, `YYYYMM`),
-- @run_tag (STRING: the label naming a run), @usage_discount_types (ARRAY<STRING>: credit
-- types folded into EffectiveCost).
-- {export_table} is the table identifier, validated against a strict pattern before use.
-- {list_cost} is `cost_at_list` when the table has that column, else `cost` (the cost before
-- any credit: the usage at the account's price without sustained/committed use discounts;
-- billing_facts_gcp.sql drops either on Spot/Preemptible SKUs, whose cost is the spot price
-- and whose cost_at_list is the list price of that spot SKU, not the on-demand one).
WITH month_rows AS (
    SELECT
        -- an empty name is no name, as NULL is (the normalization reads both as no resource)
        NULLIF(TRIM(resource.global_name), '') AS global_name,
        project.id AS project_id,
        resource.name AS resource_name,
        TIMESTAMP_TRUNC(usage_start_time, HOUR) AS hour_start,
        usage_end_time,
        sku.id AS sku_id,
        sku.description AS sku_description,
        service.description AS service_description,
        IFNULL(location.region, location.location) AS region,
        usage.amount AS usage_amount,
        usage.unit AS usage_unit,
        usage.amount_in_pricing_units AS pricing_amount,
        usage.pricing_unit AS pricing_unit,
        IFNULL(cost_type, 'regular') AS cost_type,
        invoice.month AS invoice_month,
        currency,
        cost,
        {list_cost} AS cost_listed,
        credits,
        -- a row whose usage ends before it starts (counted, refused by the reader)
        usage_end_time < usage_start_time AS reversed_period,
        -- the first entry of the run's label: a key the row names twice keeps its first value,
        -- as the normalization keeps each label's first entry
        (SELECT l.value FROM UNNEST(labels) AS l WITH OFFSET AS o WHERE l.key = @run_tag
          ORDER BY o LIMIT 1) AS run_label,
        TO_JSON_STRING(labels) AS labels_json,
        (SELECT s.value FROM UNNEST(system_labels) AS s
          WHERE s.key = 'compute.googleapis.com/machine_spec' LIMIT 1) AS machine_spec,
        (SELECT s.value FROM UNNEST(system_labels) AS s
          WHERE s.key = 'compute.googleapis.com/cores' LIMIT 1) AS cores,
        -- a TPU slice's accelerator type (`v5litepod-8`, `v4-32`): a system label, else a label
        IFNULL((SELECT s.value FROM UNNEST(system_labels) AS s
                 WHERE ENDS_WITH(s.key, 'accelerator_type') OR ENDS_WITH(s.key, 'accelerator-type')
                 LIMIT 1),
               (SELECT l.value FROM UNNEST(labels) AS l
                 WHERE ENDS_WITH(l.key, 'accelerator_type') OR ENDS_WITH(l.key, 'accelerator-type')
                 LIMIT 1)) AS accelerator_type
    FROM `{export_table}`
    WHERE (usage_start_time >= @month_start AND usage_start_time < @month_end)
       OR (usage_start_time IS NULL AND invoice.month = @invoice_month)
),
amounts AS (
    -- the export row itself: its cost with its usage discounts folded in
    SELECT
        global_name, project_id, resource_name, hour_start, usage_end_time, sku_id,
        sku_description, service_description, region, usage_unit, pricing_unit, cost_type,
        invoice_month, currency, run_label, labels_json, machine_spec, cores, accelerator_type,
        CAST(NULL AS STRING) AS credit_type,
        cost AS amount,
        IFNULL((SELECT SUM(c.amount) FROM UNNEST(credits) AS c
                 WHERE c.type IN UNNEST(@usage_discount_types)), 0) AS usage_discounts,
        IFNULL((SELECT SUM(c.amount) FROM UNNEST(credits) AS c
                 WHERE c.type LIKE 'COMMITTED_USAGE_DISCOUNT%'), 0) AS commitment_discounts,
        cost_listed AS list_amount,
        usage_amount,
        pricing_amount,
        1 AS export_rows,
        IF(reversed_period, 1, 0) AS reversed_periods,
        IF(hour_start IS NULL, 1, 0) AS undated_rows,
        IF(cost IS NULL, 1, 0) AS empty_costs,
        IF(currency IS NULL, 1, 0) AS empty_currencies,
        IFNULL((SELECT SUM(IF(c.amount IS NULL, 1, 0)) FROM UNNEST(credits) AS c
                 WHERE c.type IN UNNEST(@usage_discount_types)), 0) AS empty_credits
    FROM month_rows
    UNION ALL
    -- every other credit (promotions, free tier, reseller margin …): a row of its own
    SELECT
        m.global_name, m.project_id, m.resource_name, m.hour_start, m.usage_end_time, m.sku_id,
        m.sku_description, m.service_description, m.region, m.usage_unit, m.pricing_unit,
        m.cost_type, m.invoice_month, m.currency, m.run_label, m.labels_json, m.machine_spec,
        m.cores, m.accelerator_type,
        IFNULL(c.type, 'UNSPECIFIED') AS credit_type,
        c.amount AS amount,
        0 AS usage_discounts,
        0 AS commitment_discounts,
        0 AS list_amount,
        0 AS usage_amount,
        0 AS pricing_amount,
        0 AS export_rows,
        0 AS reversed_periods,
        0 AS undated_rows,
        0 AS empty_costs,
        0 AS empty_currencies,
        IF(c.amount IS NULL, 1, 0) AS empty_credits
    FROM month_rows AS m
    CROSS JOIN UNNEST(m.credits) AS c
    WHERE c.type IS NULL OR c.type NOT IN UNNEST(@usage_discount_types)
)
SELECT
    global_name,
    shared_project,
    shared_labels,
    hour_start,
    sku_id,
    cost_type,
    run_label,
    credit_type,
    invoice_month,
    MAX(usage_end_time) AS usage_end,
    SUM(amount) AS amount,
    SUM(usage_discounts) AS usage_discounts,
    SUM(commitment_discounts) AS commitment_discounts,
    SUM(list_amount) AS list_amount,
    SUM(usage_amount) AS usage_amount,
    SUM(pricing_amount) AS pricing_amount,
    SUM(export_rows) AS export_rows,
    -- what the reader refuses, counted here where the export rows are: SUM skips an empty
    -- cost or credit amount, a key's rows may differ in currency (MIN and MAX), and a row
    -- without a start time belongs to no hour
    SUM(reversed_periods) AS reversed_periods,
    SUM(undated_rows) AS undated_rows,
    SUM(empty_costs) AS empty_costs,
    SUM(empty_credits) AS empty_credits,
    SUM(empty_currencies) AS empty_currencies,
    MIN(currency) AS least_currency,
    -- the greatest of each, not ANY_VALUE's pick: the same input gives the same row, also
    -- where the key's rows differ (a label changed within the hour)
    MAX(resource_name) AS resource_name,
    MAX(sku_description) AS sku_description,
    MAX(service_description) AS service_description,
    MAX(region) AS region,
    MAX(usage_unit) AS usage_unit,
    MAX(pricing_unit) AS pricing_unit,
    MAX(currency) AS currency,
    MAX(labels_json) AS labels_json,
    MAX(machine_spec) AS machine_spec,
    MAX(cores) AS cores,
    MAX(accelerator_type) AS accelerator_type
FROM (
    -- rows naming no resource (BigQuery analysis, support, some network SKUs) are kept apart
    -- per project and per label set: merged, one project's cost took another's labels
    SELECT *,
        IF(global_name IS NULL, project_id, NULL) AS shared_project,
        IF(global_name IS NULL, labels_json, NULL) AS shared_labels
    FROM amounts
)
GROUP BY global_name, shared_project, shared_labels, hour_start, sku_id, cost_type, run_label,
         credit_type, invoice_month
