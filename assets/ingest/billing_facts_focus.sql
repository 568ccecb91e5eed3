-- FinOps FOCUS 1.x rows → billing_facts (SPEC §5). FOCUS columns are kept as they are; this
-- file only adds the x_ columns the attribution needs.
-- Reads `focus_raw` (the month's rows, typed: a temp table, or a view over local parquet
-- files; see sources/focus.py) and the temp table `accelerator_counts(instance_type,
-- accelerators)`, its types in lower case (ingest/accelerators.py).
-- Parameters: $month, $month_start, $source, $known_buckets.
--
-- Rules:
-- * Instance usage: a Usage row (not an unused commitment) of the Compute or AI and Machine
--   Learning service category, with a time unit (FOCUS's UnitFormat, days to microseconds,
--   with its unit quantity: `consumed_hours_per_unit`) and an identifiable instance (an
--   instance type, or a resource type naming a VM, instance, node or fleet), whatever its
--   ResourceId: as a CUR line, a row naming no resource is instance usage (x_ResourceKind
--   shared: only its tag can claim it). x_UsageHours = ConsumedQuantity in hours: the hours
--   the resource ran in the charge period; an AWS training job's (`…Train:ml.…`) ÷ its
--   instances, the most instance-hours per hour of any of its rows, and G = its instances ×
--   the type's. A row that only cancels a bill (BilledCost < 0, EffectiveCost 0: what a CUR
--   savings-plan negation would be) carries no hours, as the CUR reader's negations carry
--   none. Nor does a capacity reservation's idle part (`CapacityReservationStatus = Unused`,
--   FOCUS 1.1+). An AWS row with a usage type (`x_UsageType`) is instance usage only where a
--   CUR line of that usage type is (SPEC §5: BoxUsage, SpotUsage, HostUsage, SageMaker
--   training), so the same bill read from either export has the same hours: a capacity
--   reservation's own `UnusedBox:` and rate-0 `Reservation:` rows, a dedicated instance's
--   `DedicatedUsage:`, a SageMaker notebook, endpoint or processing job are not instance
--   hours.
-- * The instance type is read from every column a provider's FOCUS export puts it in, first
--   found wins: x_InstanceType; SkuPriceDetails / x_SkuDetails keys InstanceType, VMSize,
--   ServiceType, MachineType (any case, x_ prefix allowed); AWS x_UsageType after the `:` of
--   an instance usage type (`USE1-BoxUsage:g5.4xlarge`, `…SpotUsage:…`, `…Train:ml.…`);
--   x_MachineType and a GCP `machine_spec`/`machine_type` tag (`a2-highgpu-8g`) or TPU
--   `…accelerator_type` tag (`v5litepod-8`: G = chips of the slice, v2-v5p names counting
--   TensorCores, two a chip, as in billing_facts_gcp.sql); Azure
--   x_SkuMeterName of a Virtual Machines meter (`NC24ads A100 v4 Spot` →
--   `Standard_NC24ads_A100_v4`); the AWS instance type named in ChargeDescription (`$1.006
--   per On Demand Linux g5.xlarge Instance Hour`, the only place in FOCUS 1.0 files).
-- * An accelerator SKU line (GCP bills GPUs per GPU-second over all the VM's GPUs: a
--   Google row — ProviderName or ServiceProviderName naming Google — whose description or
--   meter names a GPU/TPU, not the VM) has x_UsageHours = GPU-hours ÷ G. Another
--   provider's row naming a GPU is no such meter: its quantity is the instance's hours.
-- * A Compute Engine VM's own SKU lines (`N2 Instance Core running in …`, `… Ram …`, `Small
--   Instance with 1 VCPU …`), as Google's FOCUS view writes them (ConsumedQuantity = the
--   export's usage: vCPU-seconds, byte-seconds, instance-seconds), are instance usage and
--   carry the VM's hours once, as billing_facts_gcp.sql does: an accelerator VM's (an
--   accelerator machine type, or a GPU line of the resource and period) are its GPU lines',
--   its core and memory lines carry none and are gpu; a plain VM's core line carries
--   vCPU-hours ÷ its vCPUs (the `cores` label, SkuPriceDetails CoreCount, a predefined or
--   custom type's name; as given where none says), its memory none. Such a VM's G is found
--   per resource-period as billing_facts_gcp.sql finds it and shared by its GPU, core and RAM
--   lines (gcp_accelerated); a machine type that counts no GPU (N1) is named with the GPU
--   its GPU line names, `n1-standard-8 + nvidia-tesla-t4`, the key `accelerators:` takes.
--   A line without a ResourceId has no VM to be grouped with: a GPU line carries its own
--   GPU-hours ÷ G (G from its type, else its GPU-hours ÷ the period, reported as unknown),
--   a core, RAM or shared-core line no hours (its VM's GPU line may carry them: an N1's
--   attached GPUs), gpu where its machine type is an accelerator type, so that no VM-hour
--   is counted twice.
-- * gpu = instance usage of an accelerator type: AWS `p|g|gr|trn|inf|dl<digit>` families
--   (SageMaker's `ml.` stripped; not GCP's shared-core `g1-small`), Azure N-series
--   (`Standard_NC…`, `NCC…`, `ND…`, `NV…`, `NG…`), GCP `a2-/a3-/a4-/a4x-` and `g2-` machine
--   types, TPU `ct<digit>` types; or an accelerator count given by the provider
--   (x_AcceleratorCount, SkuPriceDetails GpuCount/AcceleratorCount); or a GPU/TPU SKU line;
--   or x_CostComponent = 'gpu'. cpu = other instance usage.
-- * network = the Networking category, or data transfer / egress / NAT / endpoint meters;
--   storage = the Storage category, a *Storage subcategory or AWS's `EBS:` usage types
--   (EBS is EC2's: AWS may file its rows under Compute); other = the rest. A valid
--   x_CostComponent in the file wins.
-- * G (x_AcceleratorCount) = the provider's count, else the accelerator table (built-in +
--   `accelerators:`), else the GCP name's `-<N>g` / `-<N>t` suffix, else a Compute Engine
--   accelerator VM's (its type named with its GPU in the table, else GPU-hours ÷ the
--   VM-hours its core line states, else GPU-hours ÷ the period), else (reported as unknown)
--   an accelerator SKU line's accelerator-hours ÷ its period's hours, else 1.
-- * Buckets (x_ResourceKind = bucket): object-storage resources (S3, GCS, Azure Blob storage
--   accounts) and resources the config names as buckets; an S3 ARN or a GCS resource name is
--   reduced to the bucket name so it matches the checkpoint listings.
-- * ListCost is the file's own (NULL when absent). x_PricingCategory from PricingCategory:
--   Dynamic → spot, Committed → committed, Standard → on_demand, and FOCUS 1.0-preview's
--   names of the same (Spot, Commitment-Based, On-Demand); anything else (Other, empty, a
--   non-usage row) → other.
-- * FOCUS 1.0-preview files have no CommitmentDiscountStatus nor ChargeClass: their
--   ChargeSubcategory says it. `Unused Commitment` → CommitmentDiscountStatus Unused (an
--   unused commitment, whichever source it comes from), `Used Commitment` → Used; a `Refund`
--   of an earlier billing period (its charge period starts before its billing period) →
--   ChargeClass Correction, which is what FOCUS 1.0's Correction means (as CUR's refunds).
-- * Split cost allocation, as this product's FOCUS export writes it (tag
--   `cost-pipeline/split_allocation`; FOCUS 1.2 and AWS's FOCUS export have no column for
--   it): a pod's split row (`container`) is x_ResourceKind container, G 0, no hours, the
--   instance type of its node, as the CUR reader leaves it; its node's line (`parent`), which
--   keeps what the pods left, is x_SplitParent: its rest is idle capacity.
-- * x_InvoiceId = InvoiceId, else x_InvoiceId (Azure's FOCUS 1.0 export has only that).
-- * x_LineItemType = ChargeCategory, but for a Usage row of a commitment discount, named as
--   the CUR reader names the same line so that the report's invoice → amortized bridge says
--   what moved: covered usage (Used) of a spend commitment (CommitmentDiscountCategory
--   Spend: a savings plan) SavingsPlanCoveredUsage, of a usage commitment (Usage: a
--   reservation) DiscountedUsage, of one the file does not say CommitmentCoveredUsage; a Used
--   row that only cancels a bill SavingsPlanNegation; an unused commitment (Unused), which a
--   CUR keeps inside its fee lines, UnusedCommitment.
WITH tag_hints AS (
    -- the JSON columns are parsed once per distinct text, not once a line (a run's lines, a
    -- SKU's lines share theirs): each line joins its own
    SELECT
        Tags AS tags_text,
        tag_map,
        -- a tag naming the machine type, else a TPU slice's accelerator type (`v5litepod-8`)
        coalesce(
            list_filter(map_entries(tag_map),
                        lambda e: regexp_matches(lower(e.key), '(^|[/:_.-])machine_(spec|type)$'))[1].value,
            list_filter(map_entries(tag_map),
                        lambda e: regexp_matches(lower(e.key), '(^|[/:_.-])accelerator[_-]type$')
                                  AND regexp_matches(lower(e.value), '^(v[2-6][a-z]*|v5litepod)-[0-9]+$'))[1].value
        ) AS tag_machine_type,
        -- GCP's `compute.googleapis.com/cores` system label: the VM's vCPUs
        TRY_CAST(list_filter(map_entries(tag_map),
                             lambda e: regexp_matches(lower(e.key), '(^|[/:_.-])cores$'))[1].value
                 AS DOUBLE) AS tag_cores
    FROM (
        SELECT Tags, CAST(json_transform(Tags, '"MAP(VARCHAR, VARCHAR)"') AS MAP(VARCHAR, VARCHAR))
            AS tag_map
        FROM (SELECT DISTINCT Tags FROM focus_raw)
    )
),
detail_hints AS (
    SELECT
        SkuPriceDetails AS price_text,
        x_SkuDetails AS sku_text,
        -- SkuPriceDetails / x_SkuDetails keys naming the instance, whatever their spelling
        coalesce(
            list_filter(map_entries(CAST(json_transform(SkuPriceDetails, '"MAP(VARCHAR, VARCHAR)"')
                                         AS MAP(VARCHAR, VARCHAR))),
                        lambda e: regexp_replace(lower(e.key), '^x_|[^a-z]', '', 'g')
                                  IN ('instancetype', 'vmsize', 'machinetype'))[1].value,
            list_filter(map_entries(CAST(json_transform(x_SkuDetails, '"MAP(VARCHAR, VARCHAR)"')
                                         AS MAP(VARCHAR, VARCHAR))),
                        lambda e: regexp_replace(lower(e.key), '^x_|[^a-z]', '', 'g')
                                  IN ('instancetype', 'vmsize', 'servicetype', 'machinetype'))[1].value
        ) AS detail_instance_type,
        coalesce(TRY_CAST(json_extract_string(SkuPriceDetails, '$.x_AcceleratorCount') AS DOUBLE),
                 TRY_CAST(json_extract_string(SkuPriceDetails, '$.AcceleratorCount') AS DOUBLE),
                 TRY_CAST(json_extract_string(SkuPriceDetails, '$.GpuCount') AS DOUBLE),
                 TRY_CAST(json_extract_string(SkuPriceDetails, '$.x_GpuCount') AS DOUBLE))
            AS detail_accelerators,
        TRY_CAST(json_extract_string(SkuPriceDetails, '$.CoreCount') AS DOUBLE) AS detail_cores
    FROM (SELECT DISTINCT SkuPriceDetails, x_SkuDetails FROM focus_raw)
),
job_instances AS (
    -- a training job keeps its instance count, as with CUR (SPEC §5): the most instance-hours
    -- per hour any of its periods shows, its rows of a period summed, so that a partial hour
    -- of 2 instances (2 × 30 min = 1.0), or an hour billed as a savings-plan row and an
    -- on-demand row of 1.0 each, does not read as fewer instances; a row that only cancels a
    -- bill (a negation) carries no hours. A narrow pass over the job rows alone.
    SELECT job, job_usage_type, max(instances) AS peak_instances
    FROM (
        SELECT nullif(trim(ResourceId), '') AS job, x_UsageType AS job_usage_type,
               instance_hours_per_hour(sum(ConsumedQuantity * consumed_hours_per_unit(ConsumedUnit)),
                                       ChargePeriodStart, ChargePeriodEnd) AS instances
        FROM focus_raw
        WHERE regexp_matches(coalesce(x_UsageType, ''), '(^|-)Train(-Spot)?:ml\.')
          AND ChargeCategory = 'Usage' AND ChargePeriodEnd > ChargePeriodStart
          AND NOT coalesce(BilledCost < 0 AND EffectiveCost = 0, false)
        GROUP BY nullif(trim(ResourceId), ''), x_UsageType, ChargePeriodStart, ChargePeriodEnd
    )
    GROUP BY ALL
),
meters AS (
    -- what a line's meter says (its SKU's description, usage type, unit, categories) every
    -- line of the SKU shares: the regexes run once per distinct meter, not once a line
    -- (2M FOCUS rows of 9 meters: ~1.2 s of regexes a month)
    SELECT
        *,
        -- whether an AWS usage type is instance usage as SPEC §5 (and the CUR reader) says:
        -- EC2 Box/Spot/Host usage and a SageMaker training job's instances (`Train:ml.…`,
        -- not the job's storage volume `Train:VolumeUsage…`); NULL without a usage type
        CASE WHEN nullif(trim(x_UsageType), '') IS NOT NULL
             THEN regexp_matches(x_UsageType,
                                 '(^|-)((BoxUsage|SpotUsage|HostUsage)(:|$)|Train(-Spot)?:ml\.)')
        END AS instance_usage_type,
        -- the instance type an instance usage type names (after its `:`)
        CASE WHEN instance_usage_type
             THEN nullif(split_part(x_UsageType, ':', 2), '') END AS usage_type_instance,
        CASE WHEN regexp_matches(concat_ws(' ', x_SkuMeterCategory, ServiceName), '(?i)virtual machines')
              AND regexp_matches(coalesce(x_SkuMeterName, ''), '(?i)^[a-z]{1,4}[0-9]+[a-z]*( [a-z0-9]+)*$')
             THEN 'Standard_' || replace(regexp_replace(trim(x_SkuMeterName),
                                                        '(?i) (spot|low priority)$', ''), ' ', '_')
        END AS meter_instance_type,
        nullif(regexp_extract(coalesce(ChargeDescription, ''),
            '(^|[^A-Za-z0-9.-])((ml\.)?[a-z][a-z0-9-]*[0-9][a-z0-9-]*\.([0-9]*x?large|medium|small|micro|nano|metal[a-z0-9-]*))([^A-Za-z0-9.-]|$)',
            2), '') AS description_instance_type,
        -- a line metering accelerator time (GCP's GPU SKUs), not the VM's: Google's rows
        -- only (its FOCUS view's provider is `Google Cloud`); another provider's description
        -- naming a GPU is an instance's hours, not GPU-seconds (`Usage of gpu in Amazon
        -- Elastic Compute Cloud (p4d.24xlarge)`, as this product's own export once wrote it)
        google
          AND regexp_matches(description_text, '(?i)\b(gpu|tpu)\b')
          AND NOT regexp_matches(description_text, '(?i)(instance|core|ram|vm)\b')
            AS accelerator_sku,
        -- a Compute Engine VM's own meter (GCP bills a VM's hour as SKU lines: its vCPUs in
        -- vCPU-seconds, its memory in byte-seconds, a shared-core VM in instance-seconds;
        -- its GPUs as accelerator lines), as billing_facts_gcp.sql reads it
        compute_engine
          AND regexp_matches(description_text,
                             '(?i)(\bcore\b|\bram\b|\binstance with\b).*\brunning in\b')
          AND NOT regexp_matches(description_text, '(?i)\bgpu\b') AS gcp_vm_meter,
        gcp_vm_meter AND regexp_matches(description_text, '(?i)\bcore\b') AS gcp_core_meter,
        gcp_vm_meter AND NOT gcp_core_meter AND regexp_matches(description_text, '(?i)\bram\b')
            AS gcp_ram_meter,
        compute_engine AND accelerator_sku AS gcp_accelerator_meter,
        -- the GPU a Compute Engine GPU SKU names, as GCP spells accelerator types and
        -- billing_facts_gcp.sql names it ("Nvidia Tesla T4 GPU running in …" →
        -- nvidia-tesla-t4, "Spot Preemptible Nvidia L4 GPU …" → nvidia-l4)
        CASE WHEN gcp_accelerator_meter THEN coalesce(
            nullif(regexp_replace(lower(regexp_extract(coalesce(ChargeDescription, ''),
                '(?i)^(?:(?:spot|preemptible)\s+)*(.*?)\s+gpu\b', 1)), '\s+', '-', 'g'), ''),
            nullif(regexp_replace(lower(regexp_extract(coalesce(SkuMeter, ''),
                '(?i)^(?:(?:spot|preemptible)\s+)*(.*?)\s+gpu\b', 1)), '\s+', '-', 'g'), ''))
        END AS gcp_gpu_name,
        consumed_hours_per_unit(ConsumedUnit) AS hours_per_unit,
        regexp_matches(coalesce(ResourceType, ''),
                       '(?i)(virtual machine|instance|node|compute fleet|training job)')
            AS instance_resource_type,
        ServiceCategory = 'Networking'
          OR regexp_matches(meter_text,
               '(?i)(data ?transfer|egress|bandwidth|-Out-Bytes|-In-Bytes|-Bytes-Internet|cloudfront|nat ?gateway|transit ?gateway|vpc ?endpoint|private ?link|private endpoint)')
            AS network_usage,
        -- AWS's EBS volumes and snapshots, and a SageMaker training job's ML storage volume,
        -- are storage as in a CUR, whatever category the export gives EC2's or SageMaker's rows
        ServiceCategory = 'Storage' OR regexp_matches(coalesce(ServiceSubcategory, ''), '(?i)storage')
          OR regexp_matches(coalesce(x_UsageType, ''), '(^|-)(EBS:|Train(-Spot)?:VolumeUsage)')
            AS storage_usage,
        -- a shared network resource, named by its meter (or by its id: `resources`)
        names_shared_network(meter_text) AS shared_meter,
        regexp_matches(concat_ws(' ', ResourceType, ServiceSubcategory, ServiceName),
                       '(?i)(bucket|object storage|storage account|blob storage|^AmazonS3|simple storage service|cloud storage)')
            AS object_storage_meter,
        regexp_matches(coalesce(ResourceType, ''), '(?i)(volume|disk)') AS volume_resource_type
    FROM (
        SELECT *, concat_ws(' ', ServiceSubcategory, SkuMeter, x_UsageType, ResourceType) AS meter_text,
               concat_ws(' ', ChargeDescription, SkuMeter) AS description_text,
               regexp_matches(coalesce(ServiceName, ''), '(?i)^\s*compute engine\s*$')
                   AS compute_engine,
               regexp_matches(concat_ws(' ', ServiceProviderName, ProviderName),
                              '(?i)\bgoogle\b') AS google
        FROM (SELECT DISTINCT x_UsageType, x_SkuMeterCategory, ServiceName, x_SkuMeterName,
                              ChargeDescription, SkuMeter, ConsumedUnit, ServiceSubcategory,
                              ResourceType, ServiceCategory, ProviderName, ServiceProviderName
              FROM focus_raw)
    )
),
gcp_vm_lines AS (
    -- the GPU, core and shared-core instance lines of Compute Engine VMs (Google rows): what
    -- each says of its VM's hour. A pass over those lines alone (none in another bill)
    SELECT
        nullif(trim(f.ResourceId), '') AS resource_id, f.ChargePeriodStart, f.ChargePeriodEnd,
        f.ConsumedQuantity * g.hours_per_unit AS usage_hours,
        g.gcp_accelerator_meter AS gpu_line, g.gcp_core_meter AS core_line, g.gcp_gpu_name,
        -- the machine type as `raw` reads it for a Google row
        coalesce(nullif(trim(f.x_InstanceType), ''), nullif(trim(d.detail_instance_type), ''),
                 nullif(trim(f.x_MachineType), ''), t.tag_machine_type) AS machine_type,
        coalesce(t.tag_cores, d.detail_cores) AS stated_cores
    FROM focus_raw f
    JOIN (SELECT DISTINCT ChargeDescription, SkuMeter, ProviderName, ServiceProviderName,
                          ServiceName, ConsumedUnit, hours_per_unit, gcp_accelerator_meter,
                          gcp_core_meter, gcp_gpu_name
          FROM meters WHERE gcp_accelerator_meter OR (gcp_vm_meter AND NOT gcp_ram_meter)) g
      ON g.ChargeDescription IS NOT DISTINCT FROM f.ChargeDescription
     AND g.SkuMeter IS NOT DISTINCT FROM f.SkuMeter
     AND g.ProviderName IS NOT DISTINCT FROM f.ProviderName
     AND g.ServiceProviderName IS NOT DISTINCT FROM f.ServiceProviderName
     AND g.ServiceName IS NOT DISTINCT FROM f.ServiceName
     AND g.ConsumedUnit IS NOT DISTINCT FROM f.ConsumedUnit
    LEFT JOIN tag_hints t ON t.tags_text IS NOT DISTINCT FROM f.Tags
    LEFT JOIN detail_hints d
      ON d.price_text IS NOT DISTINCT FROM f.SkuPriceDetails
     AND d.sku_text IS NOT DISTINCT FROM f.x_SkuDetails
    WHERE f.ChargeCategory = 'Usage' AND nullif(trim(f.ResourceId), '') IS NOT NULL
      AND coalesce(f.CommitmentDiscountStatus, '') <> 'Unused'
      AND NOT coalesce(f.BilledCost < 0 AND f.EffectiveCost = 0, false)
),
gcp_accelerated AS (
    -- per Compute Engine resource-period with a GPU line, as billing_facts_gcp.sql: the VM's
    -- accelerator count G, which its GPU, core and RAM lines share, where its machine type
    -- does not say it (`accelerated_gpus`: the count `accelerators:` gives the type named
    -- with its GPU, `n1-standard-8 + nvidia-tesla-t4`; else GPU-hours ÷ the VM-hours its core
    -- line states, vCPU-hours ÷ its vCPUs, or a shared-core VM's instance-hours; else
    -- GPU-hours ÷ the period, a lower bound reported as unknown), and that name for a machine
    -- type that counts no GPU of its own (N1, whose GPUs are attached)
    SELECT
        resource_id, ChargePeriodStart,
        CASE WHEN machine_gpus > 0 THEN machine_gpus
             WHEN attached_gpus > 0 THEN attached_gpus
             WHEN vm_hours > 0 AND gpu_hours > 0
                 THEN greatest(1, CAST(round(gpu_hours / vm_hours) AS INTEGER))
             WHEN gpu_hours > 0 AND period_hours > 0
                 THEN greatest(1, CAST(ceil(gpu_hours / period_hours - 1e-9) AS INTEGER))
             ELSE 1 END AS accelerated_gpus,
        NOT coalesce(machine_gpus > 0 OR attached_gpus > 0 OR (vm_hours > 0 AND gpu_hours > 0),
                     false) AS accelerated_gpus_guessed,
        CASE WHEN NOT coalesce(machine_gpus > 0, false) AND attached_gpu IS NOT NULL
             THEN attached_type END AS accelerated_type
    FROM (
        SELECT v.*, coalesce(m.accelerators, TRY_CAST(regexp_extract(
                   coalesce(v.machine_type, ''), '-(\d+)[gt]$', 1) AS INTEGER)) AS machine_gpus,
               n.accelerators AS attached_gpus
        FROM (
            SELECT *, coalesce(machine_type || ' + ', '') || attached_gpu AS attached_type
            FROM (
                SELECT
                    resource_id, ChargePeriodStart,
                    fsum(usage_hours) FILTER (WHERE gpu_line) AS gpu_hours,
                    -- a core line's vCPU-hours ÷ the VM's vCPUs (as `cored` finds them), a
                    -- shared-core VM's instance-hours as they are
                    fsum(CASE WHEN NOT core_line THEN usage_hours
                              WHEN vm_cores > 0 THEN usage_hours / vm_cores END)
                        FILTER (WHERE NOT gpu_line) AS vm_hours,
                    min(gcp_gpu_name) FILTER (WHERE gpu_line) AS attached_gpu,
                    min(machine_type) AS machine_type,
                    max(epoch(ChargePeriodEnd - ChargePeriodStart)) / 3600.0 AS period_hours
                FROM (
                    SELECT *, CASE WHEN core_line
                                   THEN coalesce(stated_cores, vcpus_named(machine_type))
                              END AS vm_cores
                    FROM gcp_vm_lines
                )
                GROUP BY resource_id, ChargePeriodStart
                HAVING bool_or(gpu_line)
            )
        ) v
        LEFT JOIN accelerator_counts m ON m.instance_type = lower(v.machine_type)
        LEFT JOIN accelerator_counts n ON n.instance_type = lower(v.attached_type)
    )
),
resources AS (
    -- what a resource id says, once per resource
    SELECT
        ResourceId AS resource_text,
        resource_id,
        names_shared_network(resource_id) AS shared_resource,
        starts_with(resource_id, 'vol-') AS volume_id,  -- an EBS volume, as in a CUR
        -- the bucket name inside the provider's resource id, when it is an object-storage id
        coalesce(
            nullif(regexp_extract(coalesce(resource_id, ''), '^arn:aws[a-z-]*:s3:[^:]*:[^:]*:(bucket/)?([^/]+)$', 2), ''),
            nullif(regexp_extract(coalesce(resource_id, ''), '^(//storage\.googleapis\.com/)?projects/[^/]+/buckets/([^/]+)$', 2), ''),
            nullif(regexp_extract(coalesce(resource_id, ''), '^gs://([^/]+)/?$', 1), '')) AS bucket_name
    FROM (SELECT ResourceId, nullif(trim(ResourceId), '') AS resource_id
          FROM (SELECT DISTINCT ResourceId FROM focus_raw))
),
hints AS (
    SELECT
        f.* REPLACE (
            coalesce(f.CommitmentDiscountStatus,
                     CASE lower(trim(f.ChargeSubcategory))
                         WHEN 'unused commitment' THEN 'Unused'
                         WHEN 'used commitment' THEN 'Used' END) AS CommitmentDiscountStatus,
            coalesce(f.ChargeClass,
                     CASE WHEN lower(trim(f.ChargeSubcategory)) = 'refund'
                               AND f.ChargePeriodStart < f.BillingPeriodStart
                          THEN 'Correction' END) AS ChargeClass),
        t.tag_map, t.tag_cores,
        d.detail_instance_type,
        d.detail_accelerators, d.detail_cores,
        m.gcp_vm_meter, m.gcp_core_meter, m.gcp_ram_meter,
        g.resource_id IS NOT NULL AS gcp_accelerator_period,
        g.accelerated_gpus, g.accelerated_gpus_guessed, g.accelerated_type,
        m.usage_type_instance, m.meter_instance_type, m.description_instance_type,
        m.accelerator_sku, m.instance_usage_type, m.hours_per_unit, m.instance_resource_type,
        m.network_usage, m.storage_usage, m.shared_meter, m.object_storage_meter,
        m.volume_resource_type,
        r.resource_id, r.shared_resource, r.volume_id, r.bucket_name,
        coalesce(nullif(trim(x_MachineType), ''), t.tag_machine_type) AS machine_type
    FROM focus_raw f
    LEFT JOIN tag_hints t ON t.tags_text IS NOT DISTINCT FROM f.Tags
    LEFT JOIN detail_hints d
      ON d.price_text IS NOT DISTINCT FROM f.SkuPriceDetails
     AND d.sku_text IS NOT DISTINCT FROM f.x_SkuDetails
    LEFT JOIN meters m
      ON m.x_UsageType IS NOT DISTINCT FROM f.x_UsageType
     AND m.x_SkuMeterCategory IS NOT DISTINCT FROM f.x_SkuMeterCategory
     AND m.ServiceName IS NOT DISTINCT FROM f.ServiceName
     AND m.x_SkuMeterName IS NOT DISTINCT FROM f.x_SkuMeterName
     AND m.ChargeDescription IS NOT DISTINCT FROM f.ChargeDescription
     AND m.SkuMeter IS NOT DISTINCT FROM f.SkuMeter
     AND m.ConsumedUnit IS NOT DISTINCT FROM f.ConsumedUnit
     AND m.ServiceSubcategory IS NOT DISTINCT FROM f.ServiceSubcategory
     AND m.ResourceType IS NOT DISTINCT FROM f.ResourceType
     AND m.ServiceCategory IS NOT DISTINCT FROM f.ServiceCategory
     AND m.ProviderName IS NOT DISTINCT FROM f.ProviderName
     AND m.ServiceProviderName IS NOT DISTINCT FROM f.ServiceProviderName
    LEFT JOIN resources r ON r.resource_text IS NOT DISTINCT FROM f.ResourceId
    LEFT JOIN gcp_accelerated g
      ON g.resource_id = r.resource_id AND g.ChargePeriodStart = f.ChargePeriodStart
),
raw AS (
    SELECT
        *,
        nullif(regexp_replace(coalesce(
            nullif(trim(x_InstanceType), ''),
            nullif(trim(detail_instance_type), ''),
            usage_type_instance,
            machine_type,
            meter_instance_type,
            description_instance_type), '^ml\.', ''), '')
            AS instance_type,
        coalesce(x_AcceleratorCount, detail_accelerators)
            AS provider_accelerators
    FROM hints
),
cored AS (
    SELECT
        *,
        -- a GCP VM's vCPUs, for its core lines: GCP's `cores` label, FOCUS's SkuPriceDetails
        -- CoreCount, else its machine type's name (macros.sql `vcpus_named`)
        CASE WHEN gcp_core_meter
             THEN coalesce(tag_cores, detail_cores, vcpus_named(instance_type)) END AS vm_cores
    FROM raw
),
classified AS (
    SELECT
        cored.*,
        -- a pod's (or ECS task's) split row, as this product's own export marks it (tag
        -- `cost-pipeline/split_allocation`): its cost is already its share of the instance
        coalesce(tag_map['cost-pipeline/split_allocation'] = 'container', false)
            AS split_container,
        ChargeCategory = 'Usage' AND coalesce(CommitmentDiscountStatus, '') <> 'Unused'
          AND NOT split_container
          AND lower(trim(coalesce(CapacityReservationStatus, ''))) <> 'unused'
          -- an AWS row (its export keeps CUR's usage types) is instance usage only as a CUR
          -- line would be: not a capacity reservation's `Reservation:`/`UnusedBox:` rows, a
          -- dedicated instance, a notebook, an endpoint or a processing job
          AND CASE WHEN instance_usage_type = false
                   THEN NOT regexp_matches(coalesce(ServiceProviderName, ProviderName, ''),
                                           '(?i)^\s*(aws|amazon)')
                   ELSE true END
          -- whatever its resource id, as the CUR reader's (a line naming no resource is
          -- instance usage of a `shared` kind, which only its tag can claim); a VM's memory
          -- line, in byte-seconds, is the VM's usage without hours
          AND (hours_per_unit IS NOT NULL OR gcp_vm_meter)
          AND ConsumedQuantity IS NOT NULL
          AND (ServiceCategory IN ('Compute', 'AI and Machine Learning')
               OR lower(coalesce(x_CostComponent, '')) IN ('gpu', 'cpu'))
          AND (instance_type IS NOT NULL OR instance_resource_type)
            AS instance_usage,
        (regexp_matches(coalesce(instance_type, ''),
            '(?i)^((p|g|gr|trn|inf|dl)\d|(standard_|basic_)?(ncc|n[cdvg])\d|a\d+x?-|ct\d|(v[2-6][a-z]*|v5litepod)-[0-9]+$)')
          -- GCP's shared-core g1-small is no GPU (AWS has no g1 family)
          AND NOT regexp_matches(coalesce(instance_type, ''), '(?i)^g1-'))
          OR coalesce(provider_accelerators, 0) > 0
          OR lower(coalesce(x_CostComponent, '')) = 'gpu'
          -- a line metering GPU or TPU time, whatever its type names
          OR accelerator_sku
          OR (gcp_vm_meter AND gcp_accelerator_period) AS accelerator_type,
        shared_meter OR shared_resource AS shared_network,
        coalesce(BilledCost < 0 AND EffectiveCost = 0, false) AS cancels_bill
    FROM cored
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
            bucket_name IS NOT NULL OR object_storage_meter
            OR list_contains($known_buckets, resource_id)) AS bucket,
        a.accelerators AS table_accelerators,
        -- instances a row covers: 1 but for a training job of n instances, which bills n
        -- instance-hours per hour of its period
        CASE WHEN instance_usage THEN job_instances_at_peak(j.peak_instances) ELSE 1 END
            AS instance_count
    FROM classified c
    LEFT JOIN accelerator_counts a ON a.instance_type = lower(c.instance_type)
    LEFT JOIN job_instances j
      ON j.job = c.resource_id AND j.job_usage_type = c.x_UsageType
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
    upper(trim(BillingCurrency)) AS BillingCurrency,   -- an ISO code: `inr` is INR
    CommitmentDiscountStatus,
    ListCost,
    CASE WHEN ChargeCategory <> 'Usage' THEN 'other'   -- a purchase, tax, credit: as CUR's
    ELSE CASE lower(trim(coalesce(PricingCategory, '')))
        WHEN 'dynamic' THEN 'spot' WHEN 'committed' THEN 'committed'
        WHEN 'standard' THEN 'on_demand'
        -- FOCUS 1.0-preview's names (Azure's "FOCUS 1.0-preview" export)
        WHEN 'spot' THEN 'spot' WHEN 'commitment-based' THEN 'committed'
        WHEN 'on-demand' THEN 'on_demand' ELSE 'other'
    END END AS x_PricingCategory,
    tag_map AS Tags,
    cost_component AS x_CostComponent,
    accelerators AS x_AcceleratorCount,
    CASE WHEN cancels_bill THEN NULL
         WHEN instance_usage AND accelerator_sku AND accelerators > 0
         THEN ConsumedQuantity * hours_per_unit / accelerators
         -- a GCP VM's hours: an accelerator VM's are its GPU lines', a VM's memory carries
         -- none, its vCPU-seconds ÷ its vCPUs (as given where they are unknown) and a
         -- shared-core VM's instance-seconds are its hours. A line naming no resource
         -- carries none: nothing groups it with its VM's GPU line, which may carry them (an
         -- N1's attached GPUs), so a VM-hour is never counted twice
         WHEN instance_usage AND gcp_vm_meter
         THEN CASE WHEN accelerator_type OR gcp_ram_meter OR resource_id IS NULL THEN NULL
                   WHEN gcp_core_meter AND vm_cores > 0
                   THEN ConsumedQuantity * hours_per_unit / vm_cores
                   ELSE ConsumedQuantity * hours_per_unit END
         WHEN instance_usage THEN ConsumedQuantity * hours_per_unit / instance_count
    END AS x_UsageHours,
    coalesce(instance_usage, false) AS x_InstanceUsage,
    -- an N1 VM's lines name its attached GPU too (`n1-standard-8 + nvidia-tesla-t4`), as
    -- billing_facts_gcp.sql names them: the key `accelerators:` takes for its count
    CASE WHEN instance_usage OR split_container THEN coalesce(accelerated_type, instance_type) END
        AS x_InstanceType,
    CASE
        WHEN split_container THEN 'container'
        WHEN resource_id IS NULL OR shared_network THEN 'shared'
        WHEN bucket THEN 'bucket'
        WHEN instance_usage THEN 'instance'
        WHEN volume_resource_type OR volume_id THEN 'volume'
        ELSE 'other'
    END AS x_ResourceKind,
    -- a Usage row's commitment, in the CUR reader's line item types where it has the same
    -- line, so the invoice → amortized bridge names what moved as it does for a CUR
    CASE WHEN ChargeCategory <> 'Usage' THEN ChargeCategory
         WHEN CommitmentDiscountStatus = 'Unused' THEN 'UnusedCommitment'
         WHEN CommitmentDiscountStatus = 'Used' AND cancels_bill THEN 'SavingsPlanNegation'
         WHEN CommitmentDiscountStatus = 'Used' THEN CASE CommitmentDiscountCategory
             WHEN 'Spend' THEN 'SavingsPlanCoveredUsage' WHEN 'Usage' THEN 'DiscountedUsage'
             ELSE 'CommitmentCoveredUsage' END
         ELSE ChargeCategory
    END AS x_LineItemType,
    coalesce(InvoiceId, x_InvoiceId) AS x_InvoiceId,
    -- the instance's line its pods' split rows took their cost from: the rest is unused
    -- capacity (this product's own export marks it; no provider's FOCUS export does)
    coalesce(tag_map['cost-pipeline/split_allocation'] = 'parent', false) AS x_SplitParent,
    $source || ':' || _name || ':' || _row AS x_SourceLine,
    _file AS x_File,
    _row AS x_Row,
    (cost_component = 'gpu' AND coalesce(provider_accelerators, 0) < 0.5
     AND NOT split_container  -- a pod counts no accelerators of its own
     AND NOT coalesce(gcp_vm_meter, false)  -- the VM's GPU lines report it
     AND table_accelerators IS NULL
     AND NOT regexp_matches(coalesce(instance_type, ''), '^(a\d+x?|ct\d+[a-z]*)-.*-(\d+)[gt]$')
     AND tpu_chips IS NULL
     -- a GCP VM's count its hour's lines give (its VM-hours, its type with its GPU)
     AND coalesce(accelerated_gpus_guessed, true))
        AS x_UnknownAcceleratorType
FROM (
    SELECT *, CASE
        WHEN cost_component <> 'gpu' THEN 0
        -- a pod's split cost is already its share of the instance: a run's gpus must not
        -- shrink it again, as with the CUR reader's pods
        WHEN split_container THEN 0
        -- the file's own x_AcceleratorCount is the resource's, all its instances included
        WHEN round(x_AcceleratorCount) <> 0 THEN CAST(round(x_AcceleratorCount) AS INTEGER)
        -- the others are an instance's (a SKU's details, the type's table, its name)
        ELSE CAST(coalesce(
            nullif(round(provider_accelerators), 0),
            table_accelerators,
            TRY_CAST(regexp_extract(coalesce(instance_type, ''), '^(a\d+x?|ct\d+[a-z]*)-.*-(\d+)[gt]$', 2) AS INTEGER),
            tpu_chips,
            -- a GCP accelerator VM's, shared by its GPU, core and RAM lines (gcp_accelerated)
            accelerated_gpus,
            -- an accelerator SKU line of an unknown type: its accelerator-hours ÷ the hours of
            -- its period, a lower bound (reported as unknown), as billing_facts_gcp.sql
            CASE WHEN accelerator_sku AND ChargePeriodEnd > ChargePeriodStart
                 THEN greatest(1, CAST(ceil(ConsumedQuantity * hours_per_unit
                                            / (epoch(ChargePeriodEnd - ChargePeriodStart) / 3600.0)
                                            - 1e-9) AS INTEGER)) END,
            1) AS INTEGER) * instance_count
    END AS accelerators
    FROM (
        -- a TPU slice's chips: v5e/v6e names count chips, v2-v5p names TensorCores (2 a chip)
        SELECT *, CASE
            WHEN regexp_matches(lower(coalesce(instance_type, '')), '^(v5litepod|v5e|v6e)-[0-9]+$')
                THEN TRY_CAST(regexp_extract(instance_type, '-([0-9]+)$', 1) AS INTEGER)
            WHEN regexp_matches(lower(coalesce(instance_type, '')), '^v[2-5]p?-[0-9]+$')
                THEN greatest(1, TRY_CAST(regexp_extract(instance_type, '-([0-9]+)$', 1) AS INTEGER) // 2)
        END AS tpu_chips
        FROM component
    )
)
