-- GCP detailed billing export → billing_facts (FOCUS column names, SPEC §5).
-- Reads the temp view `gcp_raw` (a stream, read once): the month already reduced inside
-- BigQuery by assets/gcp_billing_export.bq.sql to resource × hour × SKU (× cost type × run
-- label × invoice month) rows, with `credit_type` NULL for the cost row and set on the
-- other-credit rows;
-- and the temp table `accelerator_counts(instance_type, accelerators)` (machine types such
-- as g2-standard-48 live there; `…-8g` machine types also count by their suffix; an N1 VM's
-- count is found under its type with the attached GPU, `n1-standard-8 + nvidia-tesla-t4`).
-- Parameters: $month, $month_start, $source, $known_buckets, $export_table.
--
-- Usage hours and d (SPEC §6): a VM's hour is billed as several SKU lines (GPU, core, RAM,
-- egress …) of the same resource and period. Exactly one kind of line carries the VM-hours
-- as x_UsageHours: the GPU lines of an accelerator VM (GPU-hours ÷ G), else the core line of
-- a plain VM (vCPU-hours ÷ its cores), or a shared-core VM's instance line (g1-small's "Small
-- Instance with 1 VCPU running in …", f1-micro's "Micro Instance with burstable CPU …": the
-- VM's own seconds, no core SKU). All other lines of that resource-hour carry none, so
-- d = the hours the VM ran in that hour, and a run covering the whole hour gets share 1 on
-- every line of it, and GPU-hours are counted once.
--
-- x_InstanceType: the machine type, on every line of the VM-hour. A machine type that counts
-- no GPU of its own (N1 takes T4, V100, P100 … attached) names the VM's GPU too, as GCP spells
-- accelerator types: `n1-standard-8 + nvidia-tesla-t4` (the GPU alone without a machine
-- type), so that VMs of one machine type with different GPUs are different types. That name
-- is the key `accelerators:` takes for such a VM's GPU count (the machine type alone counts
-- no GPU: it would make the machine type's plain VMs accelerator VMs).
--
-- TPUs are accelerator lines like GPUs: a TPU SKU (its description names a TPU; usage in
-- chip-seconds over the slice) is a `gpu` line whose G is the chips of the slice, from its
-- accelerator type (a label `…accelerator_type`, or a GKE `ct…-<N>t` machine type): v5e
-- (`v5litepod-N`, `v5e-N`) and v6e (`v6e-N`) count chips, so N chips; v2, v3, v4 and v5p
-- (`v4-32`) count TensorCores, two per chip, so N ÷ 2 chips (v4-32 → 16). Without one, G =
-- chip-hours ÷ the hours of the period (a lower bound, reported as unknown).
-- x_UsageHours = chip-hours ÷ G: hours per chip, so x_UsageHours × G = the chip-hours billed.
--
-- List price (SPEC §12): ListCost = the export's `cost_at_list`; credit rows 0. An export
-- without that column states no list price: its cost before credits is taken for usage at
-- the account's price (sources/gcp_billing.py). A Spot or Preemptible
-- SKU has no on-demand price in the export either way: its cost is the spot price, and its
-- `cost_at_list` the list price of that spot SKU. NULL, as CUR without
-- pricing_public_on_demand_cost, so that preemption never compares spot with spot.
-- x_PricingCategory: usage of a Spot or
-- Preemptible SKU → spot; usage with committed use discount credits → committed; other usage
-- → on_demand; credits, tax, adjustments and commitment purchases → other.
WITH raw AS (
    SELECT
        *,
        -- numbered in the order of their key (gcp_billing.KEY): BigQuery returns them in any
        -- order, and the same month must give the same lines
        row_number() OVER (ORDER BY global_name, shared_project, shared_labels, hour_start,
                                    sku_id, cost_type, run_label, credit_type, invoice_month)
          AS x_Row,
        -- the earliest invoice month of the key's slices (a key invoiced in one month, as
        -- nearly all are, has only that one)
        min(coalesce(invoice_month, 'none')) OVER (
            PARTITION BY global_name, shared_project, shared_labels, hour_start, sku_id,
                         cost_type, run_label, credit_type) AS first_invoice_month,
        utc_wall_clock(hour_start) AS s,
        CASE WHEN utc_wall_clock(usage_end) > utc_wall_clock(hour_start)
             THEN utc_wall_clock(usage_end)
             ELSE utc_wall_clock(hour_start) + INTERVAL 1 HOUR END AS e,
        nullif(trim(global_name), '') AS resource,
        coalesce(sku_description, '') AS sku_text,
        coalesce(service_description, '') AS service_text,
        -- GPU-seconds over all the VM's GPUs ("Nvidia Tesla A100 GPU running in Americas",
        -- "Nvidia L4 GPU attached to Spot Preemptible VMs running in …")
        regexp_matches(coalesce(sku_description, ''), '(?i)\bgpu\b.*\brunning in\b')
          OR (regexp_matches(coalesce(sku_description, ''), '(?i)\btpu')
              AND NOT regexp_matches(coalesce(sku_description, ''),
                                     '(?i)(storage|egress|network|disk|\bip\b)'))
          AS gpu_text,
        coalesce(service_description, '') = 'Compute Engine'
          AND regexp_matches(coalesce(sku_description, ''),
                             '(?i)(\bcore\b|\bram\b|\binstance with\b).*\brunning in\b')
          AND NOT regexp_matches(coalesce(sku_description, ''), '(?i)\bgpu\b')
          AS vm_text,
        -- the usage itself (not a credit row of it, not tax or an adjustment, not a commitment's
        -- fee: "Commitment v1: Nvidia Tesla A100 GPU running in Americas for 1 Year" names a
        -- GPU running, yet is the purchase, its hours committed, not run)
        credit_type IS NULL AND cost_type = 'regular'
          AND NOT starts_with(coalesce(sku_description, ''), 'Commitment') AS usage_row,
        -- usage in hours: GCP meters VM SKUs in seconds (vCPU-, GPU- or byte-seconds)
        CASE WHEN usage_unit = 'seconds' THEN usage_amount / 3600.0
             WHEN pricing_unit = 'hour' THEN pricing_amount END AS unit_hours,
        TRY_CAST(cores AS DOUBLE) AS vm_cores,
        -- the GPU a GPU SKU names, as GCP spells accelerator types ("Nvidia Tesla T4 GPU
        -- running in …" → nvidia-tesla-t4, "Nvidia A100 80GB GPU …" → nvidia-a100-80gb)
        nullif(regexp_replace(lower(regexp_extract(
            coalesce(sku_description, ''), '(?i)^(?:(?:spot|preemptible)\s+)*(.*?)\s+gpu\b', 1)),
            '\s+', '-', 'g'), '') AS gpu_name
    FROM gcp_raw
),
usage_kind AS (
    SELECT
        *,
        usage_row AND gpu_text AS gpu_sku,
        usage_row AND vm_text AS vm_sku,
        usage_row AND vm_text AND regexp_matches(sku_text, '(?i)\bcore\b') AS core_sku,
        -- a shared-core VM's instance-seconds (g1-small, f1-micro): no core SKU bills it
        usage_row AND vm_text AND NOT regexp_matches(sku_text, '(?i)\bcore\b')
          AND regexp_matches(sku_text, '(?i)\binstance with\b') AS shared_core_sku
    FROM raw
),
-- materialized (read by vm_hours and component): `gcp_raw` is a stream that can be read once
machine AS MATERIALIZED (
    SELECT
        *,
        coalesce(machine_gpus,
                 -- a TPU slice: chips from its accelerator type (v4-32 → 16, v5litepod-8 → 8)
                 CASE WHEN regexp_matches(tpu_type, '^(v5litepod|v5e|v6e)-\d+$')
                      THEN TRY_CAST(regexp_extract(tpu_type, '-(\d+)$', 1) AS INTEGER)
                      WHEN regexp_matches(tpu_type, '^v[2-5]p?-\d+$')
                      THEN greatest(1, TRY_CAST(regexp_extract(tpu_type, '-(\d+)$', 1) AS INTEGER) // 2)
                 END) AS spec_gpus,
        -- the VM-hours a plain VM's line states: its core line's vCPU-hours ÷ its cores, a
        -- shared-core VM's instance-hours as they are
        CASE WHEN core_sku AND vm_cores > 0 THEN unit_hours / vm_cores
             WHEN shared_core_sku THEN unit_hours END AS vm_line_hours
    FROM (
        SELECT
            u.*,
            -- the GPUs the machine type itself counts (a2-highgpu-8g, g2-standard-48)
            coalesce(a.accelerators,
                     TRY_CAST(regexp_extract(machine_spec, '-(\d+)[gt]$', 1) AS INTEGER))
              AS machine_gpus
        FROM (SELECT *, lower(regexp_extract(coalesce(accelerator_type, ''), '([^/]*)$', 1)) AS tpu_type
              FROM usage_kind) u
        LEFT JOIN accelerator_counts a ON a.instance_type = u.machine_spec
    )
),
vm_hours AS (
    -- per resource-hour: GPU-hours of its GPU lines, VM-hours of its core (or shared-core
    -- instance) line, the GPU its GPU lines name
    SELECT
        resource, s,
        fsum(unit_hours) FILTER (WHERE gpu_sku) AS gpu_hours,
        fsum(vm_line_hours) AS core_vm_hours,
        min(gpu_name) FILTER (WHERE gpu_sku) AS attached_gpu,
        min(machine_spec) FILTER (WHERE gpu_sku) AS gpu_machine_spec,
        bool_or(gpu_sku) AS has_gpu_line,
        max(spec_gpus) AS spec_gpus,
        max(epoch(e - s)) / 3600.0 AS period_hours
    FROM machine
    WHERE resource IS NOT NULL
    GROUP BY resource, s
),
accelerated AS (
    SELECT
        resource, s, gpu_hours, core_vm_hours, attached_gpu,
        -- G: the machine type's count, else the count of the type an attached GPU names
        -- (`n1-standard-8 + nvidia-tesla-t4`, as x_InstanceType and the unknown-count warning
        -- name it: the key `accelerators:` takes for it), else GPU-hours ÷ VM-hours of the
        -- resource-hour, else GPU-hours ÷ the period (a lower bound: reported as unknown)
        CASE
            WHEN spec_gpus > 0 THEN spec_gpus
            WHEN attached_count > 0 THEN attached_count
            WHEN has_gpu_line AND core_vm_hours > 0 AND gpu_hours > 0
                THEN greatest(1, CAST(round(gpu_hours / core_vm_hours) AS INTEGER))
            WHEN has_gpu_line AND gpu_hours > 0 AND period_hours > 0
                THEN greatest(1, CAST(ceil(gpu_hours / period_hours - 1e-9) AS INTEGER))
            WHEN has_gpu_line THEN 1
        END AS accelerators,
        NOT coalesce(spec_gpus > 0, false) AND NOT coalesce(attached_count > 0, false)
          AND has_gpu_line
          AND NOT coalesce(core_vm_hours > 0 AND gpu_hours > 0, false) AS accelerators_guessed
    FROM (
        SELECT h.*, n.accelerators AS attached_count
        FROM vm_hours h
        -- only where the machine type counts no GPU of its own (its type names the GPU)
        LEFT JOIN accelerator_counts n
          ON NOT coalesce(h.spec_gpus > 0, false)
         AND n.instance_type = coalesce(h.gpu_machine_spec || ' + ', '') || h.attached_gpu
    )
),
component AS (
    SELECT
        m.*,
        v.accelerators,
        v.attached_gpu,
        coalesce(v.accelerators_guessed, false) AS accelerators_guessed,
        v.accelerators IS NOT NULL AS accelerator_vm,
        CASE
            -- credit rows take the component of the usage they came with
            WHEN gpu_text THEN 'gpu'
            WHEN vm_text AND v.accelerators IS NOT NULL THEN 'gpu'
            WHEN vm_text THEN 'cpu'
            WHEN service_text IN ('Networking', 'Cloud CDN', 'Network Connectivity')
              OR regexp_matches(sku_text, '(?i)(egress|ingress|download|data transfer|inter[- ]?(region|zone|continent)|interconnect|\bnat\b|load balanc|\bnetwork|\bcdn\b)')
                THEN 'network'
            WHEN service_text IN ('Cloud Storage', 'Filestore', 'Cloud Filestore')
              OR regexp_matches(sku_text, '(?i)(\bpd\b|hyperdisk|\bdisk|snapshot|\bstorage\b|\bimage\b)')
                THEN 'storage'
            ELSE 'other'
        END AS cost_component,
        -- a bucket's id is its name, as inventories and the datasets config name it
        CASE
            WHEN starts_with(coalesce(m.resource, ''), '//storage.googleapis.com/')
              OR (m.resource IS NOT NULL AND service_text = 'Cloud Storage')
                THEN coalesce(nullif(regexp_extract(m.resource, '/buckets/([^/]+)', 1), ''),
                              nullif(resource_name, ''), m.resource)
        END AS bucket
    FROM machine m
    LEFT JOIN accelerated v ON v.resource = m.resource AND v.s = m.s
),
priced AS (
    SELECT
        *,
        CASE
            WHEN NOT usage_row OR starts_with(sku_text, 'Commitment') THEN 'other'
            WHEN regexp_matches(sku_text, '(?i)\b(spot|preemptible)\b') THEN 'spot'
            WHEN commitment_discounts < 0 THEN 'committed'
            ELSE 'on_demand'
        END AS pricing_category
    FROM component
)
SELECT
    CAST($month AS DATE) AS month,
    -- the invoice the line's export rows are on (one invoice month per line)
    coalesce(try_strptime(invoice_month, '%Y%m'),
             CAST($month_start AS TIMESTAMP)) AS BillingPeriodStart,
    s AS ChargePeriodStart,
    e AS ChargePeriodEnd,
    'Google Cloud' AS ProviderName,
    service_description AS ServiceName,
    service_category(cost_component) AS ServiceCategory,
    CASE
        WHEN credit_type IS NOT NULL THEN 'Credit'
        WHEN cost_type = 'tax' THEN 'Tax'
        WHEN cost_type <> 'regular' THEN 'Adjustment'
        WHEN starts_with(sku_text, 'Commitment') THEN 'Purchase'
        ELSE 'Usage'
    END AS ChargeCategory,
    -- an adjustment invoiced after the month of the usage it corrects
    CASE WHEN cost_type = 'adjustment' AND invoice_month > strftime(s, '%Y%m')
         THEN 'Correction' END AS ChargeClass,
    coalesce(bucket, resource) AS ResourceId,
    region AS RegionId,
    sku_id AS SkuId,
    CASE WHEN credit_type IS NULL THEN pricing_amount END AS ConsumedQuantity,
    CASE WHEN credit_type IS NULL THEN pricing_unit END AS ConsumedUnit,
    -- usage discounts (sustained / committed use, negotiated) are part of the line's cost;
    -- the other credits are rows of their own, so the lines still sum to the invoice
    amount + usage_discounts AS BilledCost,
    amount + usage_discounts AS EffectiveCost,
    currency AS BillingCurrency,
    CAST(NULL AS VARCHAR) AS CommitmentDiscountStatus,
    CASE WHEN credit_type IS NOT NULL THEN 0
         WHEN pricing_category = 'spot' THEN NULL
         ELSE list_amount END AS ListCost,
    pricing_category AS x_PricingCategory,
    -- each label's first entry (a key the row names twice keeps its first value, as the run
    -- label is read)
    CASE WHEN labels_json IS NOT NULL THEN first_entries_map(
        from_json(labels_json, '[{"key": "VARCHAR", "value": "VARCHAR"}]'))
    END AS Tags,
    cost_component AS x_CostComponent,
    CASE WHEN cost_component = 'gpu' AND usage_row
         THEN coalesce(accelerators, 1) ELSE 0 END AS x_AcceleratorCount,
    CASE
        WHEN gpu_sku THEN unit_hours / coalesce(accelerators, 1)
        WHEN NOT accelerator_vm THEN vm_line_hours
    END AS x_UsageHours,
    coalesce(gpu_sku OR vm_sku, false) AS x_InstanceUsage,
    CASE WHEN (gpu_sku OR vm_sku) AND attached_gpu IS NOT NULL
              AND NOT coalesce(machine_gpus > 0, false)
             THEN coalesce(machine_spec || ' + ', '') || attached_gpu
         WHEN gpu_sku OR vm_sku THEN coalesce(machine_spec, nullif(tpu_type, ''),
                                              CASE WHEN gpu_sku THEN sku_description END)
    END AS x_InstanceType,
    CASE
        WHEN resource IS NULL OR regexp_matches(resource, '/(routers|forwardingRules)/')
            THEN 'shared'
        WHEN bucket IS NOT NULL OR list_contains($known_buckets, resource) THEN 'bucket'
        WHEN gpu_sku OR vm_sku OR contains(resource, '/instances/') THEN 'instance'
        WHEN contains(resource, '/disks/') THEN 'volume'
        ELSE 'other'
    END AS x_ResourceKind,
    coalesce(credit_type, cost_type) AS x_LineItemType,
    -- the export marks no final bill: GCP months stay provisional
    CAST(NULL AS VARCHAR) AS x_InvoiceId,
    false AS x_SplitParent,  -- split cost allocation is a CUR feature
    $source || ':' || coalesce(resource, '') || ':' || strftime(s, '%Y-%m-%dT%H:%M:%SZ')
        || ':' || coalesce(sku_id, '')
        -- a row naming no resource: its project and (a digest of) its labels
        || CASE WHEN shared_project IS NOT NULL THEN ':project=' || shared_project ELSE '' END
        || CASE WHEN coalesce(shared_labels, '[]') <> '[]'
                THEN ':labels=' || left(md5(shared_labels), 12) ELSE '' END
        || CASE WHEN cost_type <> 'regular' THEN ':' || cost_type ELSE '' END
        || CASE WHEN run_label IS NOT NULL THEN ':label=' || run_label ELSE '' END
        || CASE WHEN credit_type IS NOT NULL THEN ':credit=' || credit_type ELSE '' END
        -- a key whose slices are on two invoices (a late slice on the next month's) is a line
        -- per invoice month: the earliest keeps the plain id, so the line read before the
        -- late slice came keeps it, and a later one is suffixed. Only such a key: Google's
        -- invoice month follows Pacific time, so the first UTC hours of every month are on
        -- the previous month's invoice, and their lines keep their plain ids too
        || CASE WHEN coalesce(invoice_month, 'none') > first_invoice_month
                THEN ':invoice=' || coalesce(invoice_month, 'none') ELSE '' END
        AS x_SourceLine,
    $export_table AS x_File,
    x_Row,
    accelerators_guessed AND gpu_sku AS x_UnknownAcceleratorType
FROM priced
