-- CUR 2.0 line items → billing_facts (FOCUS column names, SPEC §5).
-- Reads the temp view `cur_raw` (one delivery of one month, columns already typed) and the
-- temp table `accelerator_counts(instance_type, accelerators)`.
-- Parameters: $month, $month_start, $source, $has_net (the export carries the net columns),
-- $known_buckets (bucket names the config lists: checkpoint buckets and dataset buckets).
WITH raw AS (
    SELECT
        *,
        coalesce(line_item_line_item_type, '') AS line_type,
        coalesce(line_item_usage_type, '') AS usage_type,
        nullif(trim(line_item_resource_id), '') AS resource_id,
        -- the instance type: product column first, else the usage type after ':'
        regexp_replace(
            coalesce(nullif(product_instance_type, ''),
                     nullif(split_part(coalesce(line_item_usage_type, ''), ':', 2), '')),
            '^ml\.', '') AS instance_type,
        TRY_CAST(product['gpu'] AS DOUBLE) AS product_gpu,
        epoch(line_item_usage_end_date - line_item_usage_start_date) / 3600.0 AS period_hours
    FROM cur_raw
),
classified AS (
    SELECT
        raw.*,
        -- instance usage: EC2 Box/Spot/Host usage and SageMaker training instances, on the
        -- usage line types (a negation mirrors its covered line but carries no hours)
        line_type IN ('Usage', 'DiscountedUsage', 'SavingsPlanCoveredUsage', 'SavingsPlanNegation')
          AND (regexp_matches(usage_type, '(^|-)(BoxUsage|SpotUsage|HostUsage)(:|$)')
               OR (line_item_product_code = 'AmazonSageMaker'
                   AND regexp_matches(usage_type, '(^|-)Train(-Spot)?:')))
            AS instance_usage,
        regexp_matches(usage_type,
            '(DataTransfer|-Out-Bytes|-In-Bytes|-Bytes-Internet|NatGateway|TransitGateway|VpcEndpoint|PrivateLink|CloudFront)')
          OR line_item_product_code = 'AWSDataTransfer'
          OR coalesce(product_product_family, '') IN ('Data Transfer', 'NAT Gateway', 'VpcEndpoint')
            AS network_usage,
        line_item_product_code IN ('AmazonS3', 'AmazonEFS', 'AmazonFSx', 'AmazonGlacier',
                                   'AmazonS3GlacierDeepArchive')
          OR regexp_matches(usage_type, '(^|-)EBS:')
          OR coalesce(product_product_family, '') IN ('Storage', 'Storage Snapshot')
            AS storage_usage,
        regexp_matches(usage_type, '(NatGateway|TransitGateway|VpcEndpoint|PrivateLink)')
            AS shared_network
    FROM raw
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
        CASE
            WHEN instance_usage AND line_item_product_code = 'AmazonSageMaker'
                 AND period_hours > 0 AND line_item_usage_amount > period_hours * (1 + 1e-9)
            THEN CAST(ceil(line_item_usage_amount / period_hours - 1e-9) AS INTEGER)
            ELSE 1
        END AS instance_count
    FROM classified c
    LEFT JOIN accelerator_counts a ON a.instance_type = c.instance_type
)
SELECT
    CAST($month AS DATE) AS month,
    coalesce(bill_billing_period_start_date, CAST($month_start AS TIMESTAMP)) AS BillingPeriodStart,
    line_item_usage_start_date AS ChargePeriodStart,
    line_item_usage_end_date AS ChargePeriodEnd,
    'AWS' AS ProviderName,
    coalesce(nullif(product['servicename'], ''), nullif(product['product_name'], ''),
             nullif(product_servicecode, ''), line_item_product_code) AS ServiceName,
    CASE cost_component
        WHEN 'gpu' THEN 'AI and Machine Learning' WHEN 'cpu' THEN 'Compute'
        WHEN 'storage' THEN 'Storage' WHEN 'network' THEN 'Networking' ELSE 'Other'
    END AS ServiceCategory,
    CASE
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
    coalesce(nullif(line_item_currency_code, ''), 'USD') AS BillingCurrency,
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
    CASE WHEN instance_usage AND line_type <> 'SavingsPlanNegation'
         THEN coalesce(line_item_usage_amount, 0) / instance_count END AS x_UsageHours,
    instance_usage AS x_InstanceUsage,
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
    $source || ':' || identity_line_item_id || ':' ||
        coalesce(identity_time_interval,
                 strftime(line_item_usage_start_date, '%Y-%m-%dT%H:%M:%SZ') || '/' ||
                 strftime(line_item_usage_end_date, '%Y-%m-%dT%H:%M:%SZ')) AS x_SourceLine,
    _file AS x_File,
    _row AS x_Row,
    (cost_component = 'gpu' AND table_accelerators IS NULL
     AND coalesce(product_gpu, 0) < 0.5) AS x_UnknownAcceleratorType
FROM component
