-- FinOps FOCUS 1.x rows → billing_facts (SPEC §5). FOCUS columns are kept as they are; this
-- file only adds the x_ columns the attribution needs.
-- Reads the temp table `focus_raw` (the month's rows, typed; see sources/focus.py) and the
-- temp table `accelerator_counts(instance_type, accelerators)`.
-- Parameters: $month, $month_start, $source, $known_buckets.
--
-- Rules:
-- * Instance usage: a Usage row (not an unused commitment) of the Compute or AI and Machine
--   Learning service category, with a resource, a time unit (hours, minutes, seconds) and an
--   identifiable instance (an instance type in SkuPriceDetails.InstanceType / x_InstanceType,
--   or a resource type naming a VM, instance, node or fleet). x_UsageHours = ConsumedQuantity
--   in hours: the hours the resource ran in the charge period.
-- * gpu = instance usage of an accelerator type: AWS `p|g|gr|trn|inf|dl<digit>` families
--   (SageMaker's `ml.` stripped), Azure N-series (`Standard_NC…`, `ND…`, `NV…`, `NG…`),
--   GCP `a2-/a3-/a4-` and `g2-` machine types, TPU `ct<digit>` types; or an accelerator count
--   given by the provider (x_AcceleratorCount, SkuPriceDetails GpuCount/AcceleratorCount);
--   or x_CostComponent = 'gpu'. cpu = other instance usage.
-- * network = the Networking category, or data transfer / egress / NAT / endpoint meters;
--   storage = the Storage category or a *Storage subcategory; other = the rest. A valid
--   x_CostComponent in the file wins.
-- * G (x_AcceleratorCount) = the provider's count, else the accelerator table (built-in +
--   `accelerators:`), else the GCP name's `-<N>g` / `-<N>t` suffix, else 1 (reported).
-- * Buckets (x_ResourceKind = bucket): object-storage resources (S3, GCS, Azure Blob storage
--   accounts) and resources the config names as buckets; an S3 ARN or a GCS resource name is
--   reduced to the bucket name so it matches the checkpoint listings.
WITH raw AS (
    SELECT
        *,
        nullif(trim(ResourceId), '') AS resource_id,
        nullif(regexp_replace(coalesce(
            x_InstanceType,
            json_extract_string(SkuPriceDetails, '$.InstanceType'),
            json_extract_string(SkuPriceDetails, '$.x_InstanceType')), '^ml\.', ''), '')
            AS instance_type,
        coalesce(x_AcceleratorCount,
                 TRY_CAST(json_extract_string(SkuPriceDetails, '$.x_AcceleratorCount') AS DOUBLE),
                 TRY_CAST(json_extract_string(SkuPriceDetails, '$.AcceleratorCount') AS DOUBLE),
                 TRY_CAST(json_extract_string(SkuPriceDetails, '$.GpuCount') AS DOUBLE),
                 TRY_CAST(json_extract_string(SkuPriceDetails, '$.x_GpuCount') AS DOUBLE))
            AS provider_accelerators,
        CASE
            WHEN regexp_matches(lower(trim(coalesce(ConsumedUnit, ''))), '^(hours?|hrs?|h)$') THEN 1.0
            WHEN regexp_matches(lower(trim(coalesce(ConsumedUnit, ''))), '^(minutes?|mins?)$') THEN 1 / 60.0
            WHEN regexp_matches(lower(trim(coalesce(ConsumedUnit, ''))), '^(seconds?|secs?|s)$') THEN 1 / 3600.0
        END AS hours_per_unit,
        concat_ws(' ', ServiceSubcategory, SkuMeter, x_UsageType, ResourceType) AS meter_text
    FROM focus_raw
),
classified AS (
    SELECT
        raw.*,
        ChargeCategory = 'Usage' AND coalesce(CommitmentDiscountStatus, '') <> 'Unused'
          AND resource_id IS NOT NULL AND hours_per_unit IS NOT NULL
          AND ConsumedQuantity IS NOT NULL
          AND (ServiceCategory IN ('Compute', 'AI and Machine Learning')
               OR lower(coalesce(x_CostComponent, '')) IN ('gpu', 'cpu'))
          AND (instance_type IS NOT NULL
               OR regexp_matches(coalesce(ResourceType, ''),
                                 '(?i)(virtual machine|instance|node|compute fleet|training job)'))
            AS instance_usage,
        regexp_matches(coalesce(instance_type, ''),
            '(?i)^((p|g|gr|trn|inf|dl)\d|(standard_|basic_)?n[cdvg]\d|a[2-4]-|ct\d)')
          OR coalesce(provider_accelerators, 0) > 0
          OR lower(coalesce(x_CostComponent, '')) = 'gpu' AS accelerator_type,
        ServiceCategory = 'Networking'
          OR regexp_matches(meter_text,
               '(?i)(data ?transfer|egress|bandwidth|-Out-Bytes|-In-Bytes|nat ?gateway|transit ?gateway|vpc ?endpoint|private ?link|private endpoint)')
            AS network_usage,
        ServiceCategory = 'Storage' OR regexp_matches(coalesce(ServiceSubcategory, ''), '(?i)storage')
            AS storage_usage,
        regexp_matches(concat_ws(' ', meter_text, resource_id),
            '(?i)(nat ?gateway|transit ?gateway|vpc ?endpoint|private ?link|private endpoint)')
            AS shared_network,
        -- the bucket name inside the provider's resource id, when it is an object-storage id
        coalesce(
            nullif(regexp_extract(coalesce(resource_id, ''), '^arn:aws[a-z-]*:s3:[^:]*:[^:]*:(bucket/)?([^/]+)$', 2), ''),
            nullif(regexp_extract(coalesce(resource_id, ''), '^(//storage\.googleapis\.com/)?projects/[^/]+/buckets/([^/]+)$', 2), ''),
            nullif(regexp_extract(coalesce(resource_id, ''), '^gs://([^/]+)/?$', 1), '')) AS bucket_name
    FROM raw
),
component AS (
    SELECT
        c.*,
        CASE
            WHEN lower(x_CostComponent) IN ('gpu', 'cpu', 'storage', 'network', 'other')
                THEN lower(x_CostComponent)
            WHEN instance_usage AND accelerator_type THEN 'gpu'
            WHEN instance_usage THEN 'cpu'
            WHEN network_usage THEN 'network'
            WHEN storage_usage THEN 'storage'
            ELSE 'other'
        END AS cost_component,
        (network_usage OR storage_usage) AND resource_id IS NOT NULL AND (
            bucket_name IS NOT NULL
            OR regexp_matches(concat_ws(' ', ResourceType, ServiceSubcategory, ServiceName),
                              '(?i)(bucket|object storage|storage account|blob storage|^AmazonS3|simple storage service|cloud storage)')
            OR list_contains($known_buckets, resource_id)) AS bucket,
        a.accelerators AS table_accelerators
    FROM classified c
    LEFT JOIN accelerator_counts a ON lower(a.instance_type) = lower(c.instance_type)
)
SELECT
    CAST($month AS DATE) AS month,
    coalesce(BillingPeriodStart, CAST($month_start AS TIMESTAMP)) AS BillingPeriodStart,
    ChargePeriodStart,
    ChargePeriodEnd,
    coalesce(ServiceProviderName, ProviderName) AS ProviderName,
    ServiceName,
    ServiceCategory,
    ChargeCategory,
    ChargeClass,
    CASE WHEN bucket THEN coalesce(bucket_name, resource_id) ELSE resource_id END AS ResourceId,
    RegionId,
    SkuId,
    ConsumedQuantity,
    ConsumedUnit,
    BilledCost,
    EffectiveCost,
    BillingCurrency,
    CommitmentDiscountStatus,
    CAST(json_transform(Tags, '"MAP(VARCHAR, VARCHAR)"') AS MAP(VARCHAR, VARCHAR)) AS Tags,
    cost_component AS x_CostComponent,
    CASE WHEN cost_component = 'gpu' THEN CAST(coalesce(
        nullif(round(provider_accelerators), 0),
        table_accelerators,
        TRY_CAST(regexp_extract(coalesce(instance_type, ''), '^(a[2-4]|ct\d+[a-z]*)-.*-(\d+)[gt]$', 2) AS INTEGER),
        1) AS INTEGER)
        ELSE 0
    END AS x_AcceleratorCount,
    CASE WHEN instance_usage THEN ConsumedQuantity * hours_per_unit END AS x_UsageHours,
    coalesce(instance_usage, false) AS x_InstanceUsage,
    CASE WHEN instance_usage THEN instance_type END AS x_InstanceType,
    CASE
        WHEN resource_id IS NULL OR shared_network THEN 'shared'
        WHEN bucket THEN 'bucket'
        WHEN instance_usage THEN 'instance'
        WHEN regexp_matches(coalesce(ResourceType, ''), '(?i)(volume|disk)') THEN 'volume'
        ELSE 'other'
    END AS x_ResourceKind,
    ChargeCategory AS x_LineItemType,
    InvoiceId AS x_InvoiceId,
    false AS x_SplitParent,  -- split cost allocation is a CUR feature
    $source || ':' || _name || ':' || _row AS x_SourceLine,
    _file AS x_File,
    _row AS x_Row,
    (cost_component = 'gpu' AND coalesce(provider_accelerators, 0) < 0.5
     AND table_accelerators IS NULL
     AND NOT regexp_matches(coalesce(instance_type, ''), '^(a[2-4]|ct\d+[a-z]*)-.*-(\d+)[gt]$'))
        AS x_UnknownAcceleratorType
FROM component
