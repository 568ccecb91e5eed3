-- The month's bill as a FOCUS 1.2 cost-and-usage dataset, split the way FOCUS 1.3 describes
-- allocated charges: each billing line becomes one row per row of `attribution` (a run,
-- `untracked` or `unallocated`), its dimensions copied from the origin line and every
-- summable metric (BilledCost, EffectiveCost, ListCost, ContractedCost, ConsumedQuantity,
-- PricingQuantity) multiplied by the row's share, in DECIMAL(38, 10), the last row of a line
-- taking the rest: the rows of a line sum back to the origin line exactly.
-- One slice of the month: the lines whose x_SourceLine is in [$line_from, $line_to) (NULL:
-- unbounded), in the file's order; the export writes the slices one after the other
-- (cost_pipeline/export/focus.py). What is the month's, not the slice's — one category and
-- subcategory per service, whether the month is invoiced — comes from the temp tables of
-- focus_export_prepare.sql.
-- Parameters: $month, $line_from, $line_to. docs/focus-export.md says why
-- each derived column holds what it holds.
--
-- Columns billing_facts does not carry (docs/focus-export.md):
-- * BillingAccountId / BillingAccountName: the billing source's name in the config (the
--   prefix of x_SourceLine) — the account the pipeline read the bill from.
-- * ProviderName / PublisherName / InvoiceIssuerName: the line's provider (the source's name
--   when a source gives none): the provider issues the invoice of its own services.
-- * ServiceName: the line's, else the provider's name. ServiceCategory: the line's when it
--   is a FOCUS 1.2 value, else from the cost component (gpu/cpu → Compute, storage →
--   Storage, network → Networking, other → Other); then one category per ServiceName (FOCUS:
--   a service has one category): the one most of the service's lines have.
-- * ChargeCategory: Usage|Purchase|Tax|Credit|Adjustment (anything else → Adjustment);
--   ChargeClass: Correction or NULL. ChargeDescription: built from category, component,
--   service and instance type or SKU; a gpu line is `accelerated compute`, a Google GPU/TPU
--   SKU line (quantity = accelerator time over its G accelerators) `accelerator time
--   (GPU/TPU)`, so that reading the file back as FOCUS gives the same hours.
-- * ListCost: the line's ListCost for Usage and Purchase rows, else (no list price, and every
--   other category, which FOCUS sets to BilledCost) BilledCost. ContractedCost: no negotiated
--   rates are known, so ListCost for Usage and Purchase, BilledCost otherwise.
-- * ConsumedQuantity/ConsumedUnit: the line's for Usage rows that are not unused commitment
--   (0 'Units' when the source gave none), NULL otherwise; 0 in a time unit for instance
--   usage that counts no hours (a refund, a negation), which a FOCUS reader would take for
--   the instance's hours. PricingQuantity/PricingUnit: the
--   consumed quantity and unit for Usage and Purchase (1 'Units' without one), NULL for
--   Tax, Credit and Adjustment. Units are spelled in FOCUS's UnitFormat (`Hrs` → `Hours`,
--   `GB-Mo` → `GB-Months`, GCP's `gibibyte hour` → `GiB-Hours` …); a unit the format cannot
--   express is `Units`.
-- * ChargeFrequency: Usage and Tax → Usage-Based; Purchase → Recurring for recurring
--   commitment fees (RIFee, SavingsPlanRecurringFee), else One-Time; Credit, Adjustment →
--   One-Time. ServiceSubcategory, one per ServiceName (the one most of the lines in its
--   category have): Compute → Virtual Machines (instance usage), Containers, else Other
--   (Compute); Storage → Object Storage (buckets), Block Storage (volumes), else Other
--   (Storage); Networking → Network Connectivity; AI and Machine Learning → Machine
--   Learning; any other category → Other (<category>).
-- * InvoiceId: the line's final-bill id when every line of the month has one; NULL for every
--   row otherwise (a provisional month: FOCUS wants all rows invoiced or none).
-- Columns it carries, made to FOCUS's rules: RegionId and RegionName are the line's RegionId
-- (no region names are kept); SkuId the line's, NULL for Tax, and for a Usage or Purchase row
-- that is no correction a stand-in when the line has none; PricingCategory from
-- x_PricingCategory (on_demand → Standard, spot → Dynamic, committed → Committed, other →
-- Other), Committed for a commitment's usage, NULL for Tax.
WITH origin AS (
    SELECT
        b.x_SourceLine,
        hash(b.x_SourceLine, reverse(b.x_SourceLine)) AS line_key,  -- attribution_rows.line_key
        split_part(b.x_SourceLine, ':', 1) AS source_name,
        b.ChargePeriodStart, b.ChargePeriodEnd,
        coalesce(nullif(trim(b.ProviderName), ''), split_part(b.x_SourceLine, ':', 1))
            AS provider,
        nullif(trim(b.ServiceName), '') AS service_name,
        CASE WHEN b.ChargeCategory IN ('Usage', 'Purchase', 'Tax', 'Credit', 'Adjustment')
             THEN b.ChargeCategory ELSE 'Adjustment' END AS charge_category,
        CASE WHEN b.ChargeClass = 'Correction' THEN 'Correction' END AS charge_class,
        nullif(trim(b.ResourceId), '') AS resource_id,
        nullif(trim(b.RegionId), '') AS region_id,
        nullif(trim(b.SkuId), '') AS sku_id,
        upper(trim(b.BillingCurrency)) AS BillingCurrency,
        b.Tags,
        b.x_CostComponent, b.x_AcceleratorCount, b.x_InstanceType, b.SkuId, b.x_PricingCategory,
        coalesce(b.CommitmentDiscountStatus, '') = 'Unused' AS unused_commitment,
        CASE WHEN b.CommitmentDiscountStatus IN ('Used', 'Unused')
             THEN b.CommitmentDiscountStatus END AS commitment_status,
        b.ConsumedQuantity AS consumed_raw,
        b.x_UsageHours AS line_usage_hours,
        -- instance usage that counts no hours: a refund (its hour was counted by the line it
        -- refunds), a savings-plan negation, a GCP accelerator VM's core line
        coalesce(b.x_InstanceUsage, false) AND b.x_UsageHours IS NULL AS counts_no_hours,
        b.x_LineItemType, b.x_InvoiceId,
        -- split cost allocation (SPEC §3), which the FOCUS reader reads back from its tag: a
        -- pod's (or ECS task's) split row, whose cost is already its share of the instance;
        -- the instance's line its pods took their split cost from, whose rest is idle capacity
        CASE WHEN b.x_ResourceKind = 'container' THEN 'container'
             WHEN b.x_SplitParent THEN 'parent' END AS split_allocation,
        -- FOCUS UnitFormat (the validator's pattern): known spellings first, else kept when
        -- it already conforms, else `Units`
        CASE
            WHEN b.ConsumedUnit IS NULL OR trim(b.ConsumedUnit) = '' THEN NULL
            WHEN lower(trim(b.ConsumedUnit)) IN ('hrs', 'hr', 'hour', 'hours', 'h') THEN 'Hours'
            WHEN lower(trim(b.ConsumedUnit)) IN ('seconds', 'second', 'secs', 'sec', 's')
                THEN 'Seconds'
            WHEN lower(trim(b.ConsumedUnit)) IN ('minutes', 'minute', 'mins', 'min') THEN 'Minutes'
            WHEN lower(trim(b.ConsumedUnit)) = 'gibibyte hour' THEN 'GiB-Hours'
            WHEN lower(trim(b.ConsumedUnit)) = 'gibibyte month' THEN 'GiB-Months'
            WHEN lower(trim(b.ConsumedUnit)) = 'gibibyte' THEN 'GiB'
            WHEN lower(trim(b.ConsumedUnit)) = 'byte-seconds' THEN 'Byte-Seconds'
            ELSE regexp_replace(regexp_replace(regexp_replace(regexp_replace(trim(b.ConsumedUnit),
                     '(?i)-(mo|mos|month)$', '-Months'), '(?i)-(hrs|hr|hour)$', '-Hours'),
                     '(?i)-(day)$', '-Days'), '(?i)-(seconds?|secs?)$', '-Seconds')
        END AS unit_spelled,
        CAST(b.BilledCost AS DECIMAL(38, 10)) AS billed,
        CAST(b.EffectiveCost AS DECIMAL(38, 10)) AS effective,
        CAST(b.ListCost AS DECIMAL(38, 10)) AS list_raw
    FROM billing_facts b
    WHERE b.month = $month
      AND ($line_from IS NULL OR b.x_SourceLine >= $line_from)
      AND ($line_to IS NULL OR b.x_SourceLine < $line_to)
),
priced AS (
    SELECT
        o.*,
        -- spelled as focus_export_prepare.sql spells it: focus_services is joined on it
        coalesce(o.service_name, o.provider) AS service,
        -- a Google GPU/TPU SKU line meters accelerator time over all the resource's G
        -- accelerators (its quantity is x_UsageHours × G, not the VM's hours): its description
        -- says so, so that the FOCUS reader reads it back as such; no other line's does
        coalesce(lower(o.provider) LIKE '%google%' AND o.x_CostComponent = 'gpu'
                 AND o.x_AcceleratorCount > 1 AND o.line_usage_hours > 0
                 AND abs(o.consumed_raw * CASE o.consumed_unit WHEN 'Hours' THEN 1.0
                                              WHEN 'Minutes' THEN 1 / 60.0
                                              WHEN 'Seconds' THEN 1 / 3600.0
                                              WHEN 'Days' THEN 24.0 END
                         / (o.line_usage_hours * o.x_AcceleratorCount) - 1) < 1e-9, false)
            AS accelerator_time,
        CASE WHEN charge_category IN ('Usage', 'Purchase') THEN coalesce(list_raw, billed)
             ELSE billed END AS list,
        -- a FOCUS reader takes a Usage row's time quantity for the hours its instance ran:
        -- a line that counts none consumed none (its pricing quantity keeps the line's)
        CASE WHEN charge_category = 'Usage' AND NOT unused_commitment
             THEN CASE WHEN counts_no_hours AND regexp_full_match(lower(coalesce(consumed_unit, '')),
                                '([1-9][0-9]{0,8} ?)?(days?|hours?|hrs?|h|minutes?|mins?|seconds?'
                                || '|secs?|s|milliseconds?|ms|microseconds?)')
                       THEN CAST(0 AS DECIMAL(38, 10))
                       ELSE CAST(coalesce(consumed_raw, 0) AS DECIMAL(38, 10)) END END AS consumed,
        CASE WHEN charge_category = 'Usage' AND NOT unused_commitment
             THEN coalesce(consumed_unit, 'Units') END AS consumed_unit_out,
        CASE WHEN charge_category IN ('Usage', 'Tax') THEN 'Usage-Based'
             WHEN charge_category = 'Purchase'
              AND x_LineItemType IN ('RIFee', 'SavingsPlanRecurringFee') THEN 'Recurring'
             ELSE 'One-Time' END AS charge_frequency,
        CASE WHEN charge_category IN ('Usage', 'Purchase')
             THEN CAST(coalesce(consumed_raw, 1) AS DECIMAL(38, 10)) END AS pricing,
        CASE WHEN charge_category IN ('Usage', 'Purchase')
             THEN CASE WHEN consumed_raw IS NULL THEN 'Units'
                       ELSE coalesce(consumed_unit, 'Units') END END AS pricing_unit
    FROM (SELECT *,
                 CASE WHEN unit_spelled IS NULL OR regexp_matches(unit_spelled,
                      '^([A-Za-z][A-Za-z0-9]*(\s+[A-Za-z][A-Za-z0-9]*)*'
                      || '(-(Years|Months|Days|Hours|Minutes|Seconds)'
                      || '|/(Year|Month|Day|Hour|Minute|Second)'
                      || '|/[0-9]+ (Years|Months|Days|Hours|Minutes|Seconds))?'
                      || '|[0-9]+ [A-Za-z][A-Za-z0-9]*(\s+[A-Za-z][A-Za-z0-9]*)*)$')
                      THEN unit_spelled ELSE 'Units' END AS consumed_unit
          FROM origin) o
),
parts AS (
    SELECT
        a.line_key, h.run_id, a.purpose_class, a.kind, a.rule, a.share,
        a.hours, a.accelerator_hours,
        row_number() OVER line_rows AS part,
        count(*) OVER (PARTITION BY a.line_key) AS parts
    FROM attribution_rows a
    -- the run's run_id from its run_hash = key_hash(run_id) (macros.sql `run_hashes`, inlined:
    -- the export's read-only connection has no macros)
    LEFT JOIN (SELECT DISTINCT run_id, hash(run_id, reverse(run_id)) AS run_hash
               FROM tracker_runs WHERE month = $month) h ON h.run_hash = a.run_hash
    WHERE a.month = $month
      AND a.line_key IN (SELECT hash(x_SourceLine, reverse(x_SourceLine)) FROM billing_facts
                         WHERE month = $month
                           AND ($line_from IS NULL OR x_SourceLine >= $line_from)
                           AND ($line_to IS NULL OR x_SourceLine < $line_to))
    WINDOW line_rows AS (PARTITION BY a.line_key
                         ORDER BY h.run_id NULLS LAST, a.purpose_class, a.kind NULLS FIRST)
),
line_amounts AS (
    -- the metrics a line's rows split: only these and the keys go through the window below,
    -- which sorts what it reads (the whole wide row there took ~40 s of CPU at 8.4M rows)
    SELECT line_key, billed, effective, list, consumed, pricing FROM priced
),
split AS (
    SELECT
        m.*,
        coalesce(s.part, 1) AS part_no,
        coalesce(s.parts, 1) AS part_count,
        coalesce(s.share, 1.0) AS line_share,
        s.run_id, s.purpose_class, s.kind, s.rule, s.hours, s.accelerator_hours
    FROM line_amounts m
    LEFT JOIN parts s USING (line_key)
),
shared_out AS (
    -- each metric × share, rounded to the metric's scale; the line's last row takes the rest
    SELECT
        *,
        CAST(billed * line_share AS DECIMAL(38, 10)) AS billed_part,
        CAST(effective * line_share AS DECIMAL(38, 10)) AS effective_part,
        CAST(list * line_share AS DECIMAL(38, 10)) AS list_part,
        CAST(consumed * line_share AS DECIMAL(38, 10)) AS consumed_part,
        CAST(pricing * line_share AS DECIMAL(38, 10)) AS pricing_part
    FROM split
),
allocated_amounts AS (
    -- the last row takes the line's metric less the other rows' parts: the line's total of the
    -- parts less the row's own (exact in DECIMAL), a window with no frame to slide
    SELECT
        line_key, part_no, part_count, line_share, run_id, purpose_class, kind, rule, hours,
        accelerator_hours,
        CASE WHEN part_no < part_count THEN billed_part
             ELSE billed - (sum(billed_part) OVER line - billed_part) END AS BilledCost,
        CASE WHEN part_no < part_count THEN effective_part
             ELSE effective - (sum(effective_part) OVER line - effective_part) END
            AS EffectiveCost,
        CASE WHEN part_no < part_count THEN list_part
             ELSE list - (sum(list_part) OVER line - list_part) END AS ListCost,
        CASE WHEN part_no < part_count THEN consumed_part
             ELSE consumed - (sum(consumed_part) OVER line - consumed_part) END
            AS ConsumedQuantity,
        CASE WHEN part_no < part_count THEN pricing_part
             ELSE pricing - (sum(pricing_part) OVER line - pricing_part) END AS PricingQuantity
    FROM shared_out
    WINDOW line AS (PARTITION BY line_key)
),
allocated AS (
    SELECT
        p.*,
        a.part_no, a.line_share,
        a.run_id, coalesce(a.purpose_class, 'unallocated') AS purpose_class,
        a.kind AS allocation_kind, coalesce(a.rule, 'non_usage') AS allocation_rule,
        a.hours AS usage_hours, a.accelerator_hours,
        r.model, r.search_id,
        a.BilledCost, a.EffectiveCost, a.ListCost, a.ConsumedQuantity, a.PricingQuantity
    FROM allocated_amounts a
    JOIN priced p USING (line_key)
    LEFT JOIN tracker_runs r ON r.month = $month AND r.run_id = a.run_id
),
pieces AS (
    -- FOCUS: a Purchase's EffectiveCost is 0 (it covers future charges). What a commitment
    -- fee leaves unused (CUR's SavingsPlanRecurringFee / RIFee amortization, in EffectiveCost
    -- of the fee's line) becomes a Usage row of its own with CommitmentDiscountStatus Unused
    -- and BilledCost 0, as AWS's FOCUS export shows it; the line's rows still sum to it.
    SELECT *, 0 AS piece FROM allocated
    UNION ALL
    SELECT *, 1 AS piece FROM allocated
    WHERE charge_category = 'Purchase' AND EffectiveCost <> 0
)
SELECT
    source_name AS BillingAccountId,
    source_name AS BillingAccountName,
    BillingCurrency,
    timezone('UTC', CAST($month AS TIMESTAMP)) AS BillingPeriodStart,
    timezone('UTC', CAST($month AS TIMESTAMP) + INTERVAL 1 MONTH) AS BillingPeriodEnd,
    timezone('UTC', ChargePeriodStart) AS ChargePeriodStart,
    timezone('UTC', ChargePeriodEnd) AS ChargePeriodEnd,
    CASE WHEN piece = 1 THEN 'Usage' ELSE charge_category END AS ChargeCategory,
    charge_class AS ChargeClass,
    charge_frequency AS ChargeFrequency,
    -- the component in words that name no meter: a bare `gpu` reads as a GPU SKU line
    -- (quantity over all the accelerators) to a FOCUS reader, which an instance-hour is not
    CASE WHEN piece = 1 THEN 'Unused commitment' ELSE charge_category END
        || ' of ' || CASE WHEN accelerator_time THEN 'accelerator time (GPU/TPU)'
                          WHEN x_CostComponent = 'gpu' THEN 'accelerated compute'
                          ELSE x_CostComponent END
        || ' in ' || a.service
        || coalesce(' (' || coalesce(x_InstanceType, SkuId) || ')', '') AS ChargeDescription,
    provider AS ProviderName,
    provider AS PublisherName,
    provider AS InvoiceIssuerName,
    a.service AS ServiceName,
    c.category AS ServiceCategory,
    coalesce(c.subcategory, 'Other (' || c.category || ')') AS ServiceSubcategory,
    CASE WHEN (SELECT invoiced FROM focus_invoicing) THEN x_InvoiceId END AS InvoiceId,
    resource_id AS ResourceId,
    region_id AS RegionId,
    region_id AS RegionName,
    CASE WHEN charge_category = 'Tax' THEN NULL
         -- FOCUS: a Usage or Purchase row that is no correction names its SKU; a line without
         -- one gets a stand-in from what it bought: service/component/instance type (a
         -- commitment fee and its unused part: service/component/its line item type)
         WHEN charge_category IN ('Usage', 'Purchase') AND charge_class IS NULL
             THEN coalesce(sku_id, concat_ws('/', a.service, x_CostComponent,
                 CASE WHEN charge_category = 'Purchase' THEN coalesce(x_LineItemType, 'Purchase')
                      ELSE x_InstanceType END))
         ELSE sku_id END AS SkuId,
    CASE WHEN piece = 1 THEN CAST(0 AS DECIMAL(38, 10)) ELSE BilledCost END AS BilledCost,
    CASE WHEN charge_category = 'Purchase' AND piece = 0 THEN CAST(0 AS DECIMAL(38, 10))
         ELSE EffectiveCost END AS EffectiveCost,
    CASE WHEN piece = 1 THEN CAST(0 AS DECIMAL(38, 10)) ELSE ListCost END AS ListCost,
    -- no negotiated rates are known: the contracted cost is the list cost (docs)
    CASE WHEN piece = 1 THEN CAST(0 AS DECIMAL(38, 10)) ELSE ListCost END AS ContractedCost,
    CASE WHEN piece = 0 THEN ConsumedQuantity END AS ConsumedQuantity,
    CASE WHEN piece = 0 THEN consumed_unit_out END AS ConsumedUnit,
    CASE WHEN piece = 1 THEN CAST(0 AS DECIMAL(38, 10)) ELSE PricingQuantity END
        AS PricingQuantity,
    pricing_unit AS PricingUnit,
    -- FOCUS: null for Tax; a commitment's usage (Used, and Unused: a fee's unused part too) is
    -- Committed; else x_PricingCategory's, anything unknown Other (never null off Tax)
    CASE WHEN charge_category = 'Tax' THEN NULL
         WHEN piece = 1 OR (charge_category = 'Usage' AND commitment_status IS NOT NULL)
             THEN 'Committed'
         WHEN x_PricingCategory = 'on_demand' THEN 'Standard'
         WHEN x_PricingCategory = 'spot' THEN 'Dynamic'
         WHEN x_PricingCategory = 'committed' THEN 'Committed'
         ELSE 'Other' END AS PricingCategory,
    CASE WHEN piece = 1 THEN 'Unused' WHEN charge_category = 'Usage' THEN commitment_status
    END AS CommitmentDiscountStatus,
    CASE WHEN Tags IS NULL OR cardinality(Tags) = 0 THEN
        -- most lines carry no tags of their own: the same JSON object, its keys in the
        -- sorted order below, written directly (the lists and lambdas cost ~20 s of CPU at
        -- 8.4M rows)
        '{' || concat_ws(',',
            '"cost-pipeline/allocation_rule":' || to_json(allocation_rule),
            '"cost-pipeline/model":' || to_json(model),
            '"cost-pipeline/purpose_class":' || to_json(purpose_class),
            '"cost-pipeline/run_id":' || to_json(run_id),
            '"cost-pipeline/search_id":' || to_json(search_id),
            '"cost-pipeline/split_allocation":' || to_json(split_allocation)) || '}'
    ELSE CAST(to_json(map_from_entries(list_sort(list_concat(
        list_filter(map_entries(Tags), lambda e: NOT starts_with(e.key, 'cost-pipeline/')),
        list_filter([
            {'key': 'cost-pipeline/run_id', 'value': run_id},
            {'key': 'cost-pipeline/model', 'value': model},
            {'key': 'cost-pipeline/purpose_class', 'value': purpose_class},
            {'key': 'cost-pipeline/search_id', 'value': search_id},
            {'key': 'cost-pipeline/allocation_rule', 'value': allocation_rule},
            {'key': 'cost-pipeline/split_allocation', 'value': split_allocation}],
            lambda e: e.value IS NOT NULL))))) AS VARCHAR) END AS Tags,
    run_id AS x_RunId,
    model AS x_Model,
    purpose_class AS x_PurposeClass,
    search_id AS x_SearchId,
    allocation_rule AS x_AllocationRule,
    allocation_kind AS x_AllocationKind,
    line_share AS x_AllocatedShare,
    x_CostComponent,
    x_AcceleratorCount,
    x_InstanceType,
    x_PricingCategory,
    usage_hours AS x_UsageHours,
    accelerator_hours AS x_AcceleratorHours,
    split_allocation AS x_SplitAllocation,
    x_SourceLine
FROM pieces a
JOIN focus_services c USING (service)
ORDER BY x_SourceLine, part_no, piece
