-- CUR 2.0 line items → billing_facts (FOCUS column names, SPEC §5).
-- Reads the temp view `cur_raw` (one delivery of one month, columns already typed) and the
-- temp table `accelerator_counts(instance_type, accelerators)`.
-- Parameters: $month, $month_start, $source, $has_net (the export carries the net columns),
-- $known_buckets (bucket names the config lists: checkpoint buckets and dataset buckets).
--
-- Split cost allocation data (EKS pods, ECS tasks on EC2; SPEC §3): AWS adds rows for each
-- pod and hour (a vCPU row and a memory row; resource = the pod,
-- `split_line_item_parent_resource_id` = its EC2 instance) whose `split_line_item_split_cost`
-- (+ `split_line_item_unused_cost`) re-divide the instance's amortized cost; the instance's
-- own rows still bill all of it. So a pod row becomes a line of its own costing its split
-- cost (net when present), and that amount is taken out of the parent instance's rows of the
-- same hour, which keep the rest: the unused capacity, marked x_SplitParent. This statement
-- inserts the lines as the export bills them, a pod row at its split cost;
-- billing_facts_cur2_split.sql then moves the split costs, for an export with split rows
-- only (a pass of the pods inside this statement read every line's normalized values
-- twice: 5.6 s more at 5M lines). The month's EffectiveCost and BilledCost are unchanged;
-- the pod rows' own line_item cost columns are never added (the instance's rows already
-- bill them).
-- Hours: pods carry no x_UsageHours (their usage is vCPU- or GB-hours, not instance hours)
-- and no accelerator count (their split cost is already their share of the instance, so a
-- run's `gpus` must not shrink it again); the parent rows keep the instance's hours, so d
-- (SPEC §6) and the billed GPU-hours count the instance once. A run listing a pod shares
-- the pod's row by its overlap with the hour.
--
-- List price (SPEC §12): ListCost = `pricing_public_on_demand_cost` (NULL when the export lacks
-- it: unknown, not free; 0 on a SavingsPlanNegation, the mirror of a covered hour). x_PricingCategory: a usage line of a SpotUsage (or SageMaker
-- `Train-Spot`) usage type or `pricing_term = Spot` → spot; covered by a savings plan or a
-- reservation (SavingsPlanCoveredUsage, DiscountedUsage, and the SavingsPlanNegation that
-- mirrors a covered line) → committed; other usage (Usage) → on_demand; every other line
-- (fees, tax, credits, refunds, discounts) → other. A pod's split row carries its share of
-- the parent hour's ListCost, as it does of its cost.
WITH usage_types AS (
    -- what a usage type says, worked out once per distinct usage type (a bill has a few
    -- hundred) rather than by a regular expression on every line
    SELECT
        usage_type,
        regexp_matches(usage_type, '(^|-)(BoxUsage|SpotUsage|HostUsage)(:|$)') AS box_usage,
        -- a SageMaker training job's instances (`Train:ml.p4d.24xlarge`); the job's ML
        -- storage volume (`Train:VolumeUsage.gp2`, GB-Mo) is block storage, as EBS's is
        regexp_matches(usage_type, '(^|-)Train(-Spot)?:ml\.') AS train_usage,
        regexp_matches(usage_type, '(^|-)Train(-Spot)?:VolumeUsage') AS train_volume,
        regexp_matches(usage_type,
            '(DataTransfer|-Out-Bytes|-In-Bytes|-Bytes-Internet|NatGateway|TransitGateway|VpcEndpoint|PrivateLink|CloudFront)')
            AS transfer_usage,
        regexp_matches(usage_type, '(^|-)EBS:') AS ebs_usage,
        regexp_matches(usage_type, '(NatGateway|TransitGateway|VpcEndpoint|PrivateLink)')
            AS shared_network,
        regexp_matches(usage_type, '(^|-)(SpotUsage(:|$)|Train-Spot:)') AS spot_usage,
        -- a commitment's own fee: a reservation's (`HeavyUsage:m5.large`) or a savings
        -- plan's (`ComputeSP:1yrNoUpfront`, `SageMakerSP:…`): what a refund of it refunds
        regexp_matches(usage_type, '((^|-)HeavyUsage(:|$)|[A-Za-z]SP:)') AS commitment_fee
    FROM (SELECT DISTINCT coalesce(line_item_usage_type, '') AS usage_type FROM cur_raw)
),
raw AS (
    SELECT
        cur_raw.*,
        coalesce(line_item_line_item_type, '') AS line_type,
        u.*,
        nullif(trim(line_item_resource_id), '') AS resource_id,
        -- the instance type: product column first, else the usage type after ':'
        regexp_replace(
            coalesce(nullif(product_instance_type, ''),
                     nullif(split_part(coalesce(line_item_usage_type, ''), ':', 2), '')),
            '^ml\.', '') AS instance_type,
        TRY_CAST(product['gpu'] AS DOUBLE) AS product_gpu,
        nullif(trim(split_line_item_parent_resource_id), '') AS split_parent_id,
        epoch(line_item_usage_end_date - line_item_usage_start_date) / 3600.0 AS period_hours
    FROM cur_raw
    JOIN usage_types AS u ON u.usage_type = coalesce(cur_raw.line_item_usage_type, '')
),
classified AS (
    SELECT
        raw.*,
        -- instance usage: EC2 Box/Spot/Host usage and SageMaker training instances, on the
        -- usage line types (a negation mirrors its covered line but carries no hours) and a
        -- refund of such usage (a Usage line, SPEC §5: a refunded GPU hour is gpu, not
        -- other); a refund gives money back for hours its usage line counted, so it carries
        -- none either (hours of its own would double d, the hours the instance ran)
        line_type IN ('Usage', 'DiscountedUsage', 'SavingsPlanCoveredUsage', 'SavingsPlanNegation',
                      'Refund')
          AND (box_usage OR (line_item_product_code = 'AmazonSageMaker' AND train_usage))
            AS instance_usage,
        transfer_usage
          OR line_item_product_code = 'AWSDataTransfer'
          OR coalesce(product_product_family, '') IN ('Data Transfer', 'NAT Gateway', 'VpcEndpoint')
            AS network_usage,
        line_item_product_code IN ('AmazonS3', 'AmazonEFS', 'AmazonFSx', 'AmazonGlacier',
                                   'AmazonS3GlacierDeepArchive')
          OR ebs_usage
          OR (line_item_product_code = 'AmazonSageMaker' AND train_volume)
          OR coalesce(product_product_family, '') IN ('Storage', 'Storage Snapshot')
            AS storage_usage
    FROM raw
),
job_period_hours AS (
    -- a training job's instance-hours in each of its periods, summed over the rows the period
    -- is split into (a savings-plan row + an on-demand row of 1.0 each are 2 instances'
    -- hour); only the rows that carry hours (a negation mirrors its covered row, a refund
    -- gives money back for hours counted). Its own narrow pass over cur_raw (SageMaker rows,
    -- five columns): sharing the chain below would make DuckDB buffer every row of the month.
    SELECT line_item_resource_id AS job, line_item_usage_type AS job_usage_type,
           instance_hours_per_hour(sum(line_item_usage_amount), line_item_usage_start_date,
                                   line_item_usage_end_date) AS instances
    FROM cur_raw
    WHERE line_item_product_code = 'AmazonSageMaker'
      AND line_item_usage_end_date > line_item_usage_start_date
      AND line_item_line_item_type IN ('Usage', 'DiscountedUsage', 'SavingsPlanCoveredUsage')
    GROUP BY line_item_resource_id, line_item_usage_type, line_item_usage_start_date,
             line_item_usage_end_date
),
job_instances AS (
    -- a training job keeps its instance count: the most instance-hours per hour any of its
    -- periods shows, so that a partial hour (2 instances × 30 min = 1.0) or an hour split
    -- into rows of at most 1.0 each does not read as fewer instances
    SELECT job, job_usage_type, max(instances) AS peak_instances
    FROM job_period_hours
    GROUP BY ALL
),
component AS (
    SELECT
        c.*,
        CASE
            WHEN instance_usage AND (regexp_matches(coalesce(c.instance_type, ''), '^(p|g|gr|trn|inf|dl)\d')
                                     OR coalesce(product_gpu, 0) > 0) THEN 'gpu'
            WHEN instance_usage THEN 'cpu'
            WHEN network_usage THEN 'network'
            WHEN storage_usage THEN 'storage'
            ELSE 'other'
        END AS cost_component,
        a.accelerators AS table_accelerators,
        -- instances a line covers: 1 for EC2 (one resource = one instance); a SageMaker
        -- training job of n instances bills n instance-hours per hour of its period
        CASE WHEN instance_usage AND line_item_product_code = 'AmazonSageMaker'
             THEN job_instances_at_peak(j.peak_instances) ELSE 1 END AS instance_count
    FROM classified c
    LEFT JOIN accelerator_counts a ON a.instance_type = c.instance_type
    LEFT JOIN job_instances j
      ON j.job = c.line_item_resource_id AND j.job_usage_type = c.line_item_usage_type
),
normalized AS (
SELECT
    CAST($month AS DATE) AS month,
    -- a line of another billing period was refused (cur2.check_amounts): the folder's month
    -- and the line's agree, or the line names none
    coalesce(bill_billing_period_start_date, CAST($month_start AS TIMESTAMP)) AS BillingPeriodStart,
    line_item_usage_start_date AS ChargePeriodStart,
    line_item_usage_end_date AS ChargePeriodEnd,
    'AWS' AS ProviderName,
    coalesce(nullif(product['servicename'], ''), nullif(product['product_name'], ''),
             nullif(product_servicecode, ''), line_item_product_code) AS ServiceName,
    service_category(cost_component) AS ServiceCategory,
    CASE
        -- a refund takes the category of what it refunds: a reservation's or savings plan's
        -- fee (its usage type), a tax (its tax type), else usage
        WHEN line_type = 'Refund' AND commitment_fee THEN 'Purchase'
        WHEN line_type = 'Refund' AND coalesce(trim(line_item_tax_type), '') <> '' THEN 'Tax'
        WHEN line_type IN ('Usage', 'DiscountedUsage', 'SavingsPlanCoveredUsage',
                           'SavingsPlanNegation', 'Refund') THEN 'Usage'
        WHEN line_type = 'Tax' THEN 'Tax'
        WHEN line_type = 'Credit' THEN 'Credit'
        WHEN line_type IN ('Fee', 'RIFee', 'SavingsPlanRecurringFee', 'SavingsPlanUpfrontFee')
            THEN 'Purchase'
        ELSE 'Adjustment'
    END AS ChargeCategory,
    CASE WHEN line_type = 'Refund' AND line_item_usage_start_date < CAST($month_start AS TIMESTAMP)
         THEN 'Correction' END AS ChargeClass,
    resource_id AS ResourceId,
    coalesce(nullif(product_region_code, ''),
             nullif(regexp_replace(coalesce(line_item_availability_zone, ''), '[a-z]$', ''), ''))
        AS RegionId,
    product_sku AS SkuId,
    line_item_usage_amount AS ConsumedQuantity,
    pricing_unit AS ConsumedUnit,
    -- discount rows are already inside the other rows' net figures: with net columns they
    -- add nothing to the invoice total
    CASE
        WHEN $has_net AND line_type IN ('EdpDiscount', 'PrivateRateDiscount', 'BundledDiscount',
                                        'Discount') THEN coalesce(line_item_net_unblended_cost, 0)
        ELSE coalesce(line_item_net_unblended_cost, line_item_unblended_cost, 0)
    END AS BilledCost,
    -- AWS's amortized-cost rule, on the net columns where the export has them
    coalesce(CASE
        WHEN line_type = 'SavingsPlanCoveredUsage' THEN
            coalesce(savings_plan_net_savings_plan_effective_cost, savings_plan_savings_plan_effective_cost)
        WHEN line_type = 'DiscountedUsage' THEN
            coalesce(reservation_net_effective_cost, reservation_effective_cost)
        WHEN line_type IN ('SavingsPlanNegation', 'SavingsPlanUpfrontFee') THEN 0
        WHEN line_type = 'Fee' AND coalesce(reservation_reservation_a_r_n, '') <> '' THEN 0
        WHEN line_type = 'SavingsPlanRecurringFee' THEN
            coalesce(savings_plan_total_commitment_to_date, 0) - coalesce(savings_plan_used_commitment, 0)
        WHEN line_type = 'RIFee' THEN
            coalesce(reservation_net_unused_amortized_upfront_fee_for_billing_period,
                     reservation_unused_amortized_upfront_fee_for_billing_period, 0)
          + coalesce(reservation_net_unused_recurring_fee, reservation_unused_recurring_fee, 0)
        -- discounts are already inside the net figures
        WHEN $has_net AND line_type IN ('EdpDiscount', 'PrivateRateDiscount', 'BundledDiscount',
                                        'Discount') THEN 0
        ELSE coalesce(line_item_net_unblended_cost, line_item_unblended_cost)
    END, 0) AS EffectiveCost,
    -- a bill naming no currency on any line is in USD; a line naming none beside lines that
    -- name one was refused (cur2.check_amounts), as was a line without its unblended cost
    coalesce(nullif(trim(line_item_currency_code), ''), 'USD') AS BillingCurrency,
    -- a negation mirrors a covered hour (its EffectiveCost is 0 too): its list price, where
    -- an export gives one, would count the hour twice
    CASE WHEN line_type = 'SavingsPlanNegation' THEN 0
         ELSE pricing_public_on_demand_cost END AS ListCost,
    CASE
        WHEN line_type IN ('Usage', 'DiscountedUsage', 'SavingsPlanCoveredUsage',
                           'SavingsPlanNegation')
             AND (spot_usage OR lower(coalesce(pricing_term, '')) = 'spot') THEN 'spot'
        WHEN line_type IN ('SavingsPlanCoveredUsage', 'DiscountedUsage', 'SavingsPlanNegation')
            THEN 'committed'
        WHEN line_type = 'Usage' THEN 'on_demand'
        ELSE 'other'
    END AS x_PricingCategory,
    CASE
        WHEN line_type IN ('SavingsPlanRecurringFee', 'RIFee') THEN 'Unused'
        WHEN line_type IN ('SavingsPlanCoveredUsage', 'DiscountedUsage') THEN 'Used'
    END AS CommitmentDiscountStatus,
    resource_tags AS Tags,
    cost_component AS x_CostComponent,
    -- G: the config/built-in table, else the product's `gpu` attribute, else 1 (reported)
    CASE WHEN cost_component = 'gpu' THEN
        CAST(coalesce(table_accelerators, nullif(round(product_gpu), 0), 1) AS INTEGER)
          * instance_count
        ELSE 0
    END AS x_AcceleratorCount,
    CASE WHEN instance_usage AND line_type NOT IN ('SavingsPlanNegation', 'Refund')
         THEN coalesce(line_item_usage_amount, 0) / instance_count END AS x_UsageHours,
    coalesce(instance_usage, false) AS x_InstanceUsage,
    CASE WHEN instance_usage THEN instance_type END AS x_InstanceType,
    CASE
        WHEN resource_id IS NULL OR shared_network THEN 'shared'
        WHEN line_item_product_code = 'AmazonS3' OR list_contains($known_buckets, resource_id)
            THEN 'bucket'
        WHEN instance_usage THEN 'instance'
        WHEN starts_with(resource_id, 'vol-') THEN 'volume'
        ELSE 'other'
    END AS x_ResourceKind,
    line_type AS x_LineItemType,
    nullif(bill_invoice_id, '') AS x_InvoiceId,
    cur_source_line($source, identity_line_item_id, identity_time_interval,
                    line_item_usage_start_date, line_item_usage_end_date) AS x_SourceLine,
    _file AS x_File,
    _row AS x_Row,
    (cost_component = 'gpu' AND table_accelerators IS NULL
     AND coalesce(product_gpu, 0) < 0.5) AS x_UnknownAcceleratorType,
    -- a pod's (or ECS task's) split row: its parent instance and its amortized split cost
    CASE WHEN line_type IN ('Usage', 'DiscountedUsage', 'SavingsPlanCoveredUsage',
                            'SavingsPlanNegation')
         THEN split_parent_id END AS pod_parent,
    greatest(coalesce(split_line_item_net_split_cost, split_line_item_split_cost, 0), 0)
        AS pod_split_cost
FROM component
)
-- A pod's split row carries its split cost here; when the export has split rows,
-- billing_facts_cur2_split.sql then moves that cost out of its parent instance's hour.
SELECT
    n.* EXCLUDE (pod_parent, pod_split_cost) REPLACE (
        CASE WHEN n.pod_parent IS NOT NULL THEN n.pod_split_cost ELSE n.EffectiveCost END
            AS EffectiveCost,
        CASE WHEN n.pod_parent IS NOT NULL THEN 0 ELSE n.x_AcceleratorCount END
            AS x_AcceleratorCount,
        CASE WHEN n.pod_parent IS NOT NULL THEN 'container' ELSE n.x_ResourceKind END
            AS x_ResourceKind
    ),
    false AS x_SplitParent
FROM normalized n
