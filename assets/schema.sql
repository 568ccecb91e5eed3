-- The warehouse: every table the pipeline builds, each with its partition column `month`
-- (DATE, first day of the month). Created idempotently before any asset writes.

CREATE TABLE IF NOT EXISTS billing_facts (
    month                    DATE NOT NULL,
    BillingPeriodStart       TIMESTAMP,
    ChargePeriodStart        TIMESTAMP NOT NULL,
    ChargePeriodEnd          TIMESTAMP NOT NULL,
    ProviderName             VARCHAR,
    ServiceName              VARCHAR,
    ServiceCategory          VARCHAR,
    ChargeCategory           VARCHAR NOT NULL,      -- Usage | Purchase | Tax | Credit | Adjustment
    ChargeClass              VARCHAR,               -- NULL | Correction
    ResourceId               VARCHAR,
    RegionId                 VARCHAR,
    SkuId                    VARCHAR,
    ConsumedQuantity         DOUBLE,
    ConsumedUnit             VARCHAR,
    BilledCost               DOUBLE NOT NULL,
    EffectiveCost            DOUBLE NOT NULL,
    BillingCurrency          VARCHAR,
    CommitmentDiscountStatus VARCHAR,               -- Used | Unused | NULL
    Tags                     MAP(VARCHAR, VARCHAR),
    x_CostComponent          VARCHAR NOT NULL,      -- gpu | cpu | storage | network | other
    x_AcceleratorCount       INTEGER NOT NULL,      -- G: accelerators of the resource (gpu lines)
    x_UsageHours             DOUBLE,                -- instance/accelerator usage lines only
    x_InstanceUsage          BOOLEAN NOT NULL,      -- an instance-usage line (hours or negation)
    x_InstanceType           VARCHAR,
    x_ResourceKind           VARCHAR,               -- bucket | instance | volume | shared | other
    x_LineItemType           VARCHAR,               -- the source's own charge type
    x_InvoiceId              VARCHAR,               -- set when the line belongs to a final bill
    x_SourceLine             VARCHAR NOT NULL
);

CREATE TABLE IF NOT EXISTS tracker_runs (
    month             DATE NOT NULL,
    run_id            VARCHAR NOT NULL,
    source            VARCHAR,
    experiment        VARCHAR,
    model             VARCHAR,
    purpose           VARCHAR,
    search_id         VARCHAR,
    seed              VARCHAR,
    config_id         VARCHAR,
    status            VARCHAR NOT NULL,
    start_time        TIMESTAMP NOT NULL,
    end_time          TIMESTAMP,
    resource_ids      VARCHAR[],
    gpus              INTEGER,
    region            VARCHAR,
    dataset           VARCHAR,
    dataset_region    VARCHAR,
    input_hash        VARCHAR,
    transform_version VARCHAR,
    metric_name       VARCHAR,
    metric_value      DOUBLE,
    keep              BOOLEAN NOT NULL,
    deleted           BOOLEAN NOT NULL,
    parent_run_id     VARCHAR,
    team              VARCHAR
);

CREATE TABLE IF NOT EXISTS checkpoint_inventory (
    month         DATE NOT NULL,
    source        VARCHAR NOT NULL,
    bucket        VARCHAR NOT NULL,
    key           VARCHAR NOT NULL,
    size          BIGINT NOT NULL,
    last_modified TIMESTAMP,
    snapshot_date DATE,            -- NULL: one listing, read as the month-end snapshot
    prefix        VARCHAR,         -- the source's run prefix, when the key is under it
    run_id        VARCHAR,         -- the path segment after the prefix (known or not)
    checkpoint    VARCHAR          -- the next segment, or the object itself
);

CREATE TABLE IF NOT EXISTS attribution (
    month             DATE NOT NULL,
    x_SourceLine      VARCHAR NOT NULL,
    run_id            VARCHAR,
    purpose_class     VARCHAR NOT NULL,  -- production|search|preprocessing|other|untracked|unallocated
    component         VARCHAR NOT NULL,
    cost              DOUBLE NOT NULL,
    hours             DOUBLE,
    accelerator_hours DOUBLE,
    share             DOUBLE NOT NULL,   -- the final share of the line this row carries
    claimed_share     DOUBLE,            -- S: the line's claimed shares before normalization
    rule              VARCHAR NOT NULL,  -- compute | bucket_storage | bucket_transfer | non_usage
    kind              VARCHAR            -- untracked: no_run|idle_capacity|shared; unallocated: tax|credit|purchase|unused_commitment|adjustment|correction
);

CREATE TABLE IF NOT EXISTS reconciliation (
    month                    DATE NOT NULL,
    billed_gpu_hours         DOUBLE NOT NULL,
    tracked_gpu_hours        DOUBLE NOT NULL,
    untracked_gpu_hours      DOUBLE NOT NULL,
    untracked_share          DOUBLE NOT NULL,
    threshold                DOUBLE NOT NULL,
    status                   VARCHAR NOT NULL,
    untracked_cost_share     DOUBLE NOT NULL,
    by_accelerator_type      STRUCT(instance_type VARCHAR, billed_gpu_hours DOUBLE,
                                    untracked_gpu_hours DOUBLE, untracked_share DOUBLE,
                                    gpu_cost DOUBLE, untracked_cost_share DOUBLE)[],
    coverage                 DOUBLE NOT NULL,
    over_claimed_gpu_hours   DOUBLE NOT NULL,
    unbilled_claim_gpu_hours DOUBLE NOT NULL,
    provisional              BOOLEAN NOT NULL,
    total_effective_cost     DOUBLE NOT NULL,
    attributed_cost          DOUBLE NOT NULL,
    untracked_cost           DOUBLE NOT NULL,
    unallocated_cost         DOUBLE NOT NULL,
    runs_without_end         INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS untracked_usage (
    month             DATE NOT NULL,
    resource_id       VARCHAR,
    day               DATE NOT NULL,
    component         VARCHAR NOT NULL,
    kind              VARCHAR NOT NULL,   -- no_run | idle_capacity | shared
    hours             DOUBLE,
    accelerator_hours DOUBLE,
    cost              DOUBLE NOT NULL
);

CREATE TABLE IF NOT EXISTS cost_per_model_monthly (
    month             DATE NOT NULL,
    model             VARCHAR,
    purpose_class     VARCHAR NOT NULL,
    component         VARCHAR NOT NULL,
    cost              DOUBLE NOT NULL,
    accelerator_hours DOUBLE NOT NULL,
    runs              BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS search_costs (
    month                     DATE NOT NULL,
    search_id                 VARCHAR NOT NULL,
    model                     VARCHAR,
    runs                      BIGINT NOT NULL,
    configs                   DOUBLE NOT NULL,
    seeds                     BIGINT NOT NULL,
    runs_this_month           BIGINT NOT NULL,
    hours                     DOUBLE NOT NULL,
    accelerator_hours         DOUBLE NOT NULL,
    cost                      DOUBLE NOT NULL,
    metric_name               VARCHAR,
    best_metric               DOUBLE,
    previous_best             DOUBLE,
    improvement               DOUBLE,
    cost_per_improvement      DOUBLE,
    accelerator_hours_per_improvement DOUBLE
);

CREATE TABLE IF NOT EXISTS retention_violations (
    month         DATE NOT NULL,
    bucket        VARCHAR NOT NULL,
    key           VARCHAR NOT NULL,
    run_id        VARCHAR,
    run_status    VARCHAR,
    purpose       VARCHAR,
    checkpoint    VARCHAR,
    reason        VARCHAR NOT NULL,  -- dead_run | beyond_keep_last | orphan
    bytes         BIGINT NOT NULL,
    last_modified TIMESTAMP,
    monthly_cost  DOUBLE NOT NULL
);

CREATE TABLE IF NOT EXISTS storage_by_run_status (
    month      DATE NOT NULL,
    run_status VARCHAR NOT NULL,    -- live | production | dead | orphan
    objects    BIGINT NOT NULL,
    bytes      BIGINT NOT NULL,
    cost       DOUBLE NOT NULL
);
