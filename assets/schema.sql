-- The warehouse: every table the pipeline builds, each with its partition column `month`
-- (DATE, first day of the month). Created idempotently before any asset writes.

-- The required values (the columns marked "required") are checked when a month is loaded
-- (billing.py), so that a line lacking one is reported with its file and row; a NOT NULL
-- constraint would abort the loading transaction instead.
CREATE TABLE IF NOT EXISTS billing_facts (
    month                    DATE NOT NULL,
    BillingPeriodStart       TIMESTAMP,
    ChargePeriodStart        TIMESTAMP,             -- required
    ChargePeriodEnd          TIMESTAMP,             -- required
    ProviderName             VARCHAR,
    ServiceName              VARCHAR,
    ServiceCategory          VARCHAR,
    ChargeCategory           VARCHAR,               -- required: Usage|Purchase|Tax|Credit|…
    ChargeClass              VARCHAR,               -- NULL | Correction
    ResourceId               VARCHAR,
    RegionId                 VARCHAR,
    SkuId                    VARCHAR,
    ConsumedQuantity         DOUBLE,
    ConsumedUnit             VARCHAR,
    BilledCost               DOUBLE,                -- required
    EffectiveCost            DOUBLE,                -- required
    BillingCurrency          VARCHAR,
    CommitmentDiscountStatus VARCHAR,               -- Used | Unused | NULL
    Tags                     MAP(VARCHAR, VARCHAR),
    x_CostComponent          VARCHAR,               -- required: gpu|cpu|storage|network|other
    x_AcceleratorCount       INTEGER,               -- required: G, accelerators of the resource
    x_UsageHours             DOUBLE,                -- instance/accelerator usage lines only
    x_InstanceUsage          BOOLEAN,               -- required: instance usage (or negation)
    x_InstanceType           VARCHAR,
    x_ResourceKind           VARCHAR,               -- bucket|instance|volume|container|shared|other
    x_LineItemType           VARCHAR,               -- the source's own charge type
    x_InvoiceId              VARCHAR,               -- set when the line belongs to a final bill
    -- required; a unique id per line: zstd writes it in a third of the time dictionary
    -- compression takes (0.26 against 0.74 s at 4.9M lines) and stores it smaller
    x_SourceLine             VARCHAR USING COMPRESSION zstd,
    x_SplitParent            BOOLEAN                -- an instance row whose pods' split rows took
                                                    -- their share: the rest is unused capacity
);
-- lineage: the file and row (1-based; the numbered row of a BigQuery result) the line came
-- from, and whether its accelerator count was assumed (1: an unknown GPU instance type)
ALTER TABLE billing_facts ADD COLUMN IF NOT EXISTS x_File VARCHAR;
ALTER TABLE billing_facts ADD COLUMN IF NOT EXISTS x_Row BIGINT;
ALTER TABLE billing_facts ADD COLUMN IF NOT EXISTS x_UnknownAcceleratorType BOOLEAN;
-- warehouses created before the column existed
ALTER TABLE billing_facts ADD COLUMN IF NOT EXISTS x_SplitParent BOOLEAN;
-- SPEC §12: the line at the provider's public on-demand price (NULL: the source does not say)
-- and how it was priced: on_demand | spot | committed | other (non-usage lines)
ALTER TABLE billing_facts ADD COLUMN IF NOT EXISTS ListCost DOUBLE;
ALTER TABLE billing_facts ADD COLUMN IF NOT EXISTS x_PricingCategory VARCHAR;

-- Each month's whole bill, as the reports show it (period_month_totals.sql, which also sums a
-- month missing here from its lines): written with the month's lines, in their transaction
-- (billing.py), so that the 6-month strip and the period report read a row a month instead
-- of every line of every month again.
CREATE TABLE IF NOT EXISTS billing_months (
    month          DATE NOT NULL,
    lines          BIGINT NOT NULL,
    effective_cost DECIMAL(38, 10),   -- Σ EffectiveCost, each line's cast to DECIMAL first
    billed_cost    DECIMAL(38, 10),
    currencies     BIGINT NOT NULL,   -- distinct BillingCurrency (1, SPEC §5)
    currency       VARCHAR NOT NULL
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
    team              VARCHAR,
    gpu_utilization   DOUBLE,            -- mean GPU utilization over the run, 0-100 (optional)
    trigger           VARCHAR,           -- schedule | drift | manual: why a retrain was launched
    restart_of        VARCHAR,           -- the interrupted run this run continues or repeats
    resumed_from      VARCHAR,           -- the checkpoint it resumed from; NULL = from scratch
    -- the MLflow run id of the run bearing `run_id` in this snapshot (a run renamed later is
    -- still this one: the write-back tags it with this month's cost); NULL: a runs file, or a
    -- month written before the column
    tracker_run_uuid  VARCHAR
);
-- warehouses created before the column existed
ALTER TABLE tracker_runs ADD COLUMN IF NOT EXISTS gpu_utilization DOUBLE;
ALTER TABLE tracker_runs ADD COLUMN IF NOT EXISTS trigger VARCHAR;
ALTER TABLE tracker_runs ADD COLUMN IF NOT EXISTS restart_of VARCHAR;
ALTER TABLE tracker_runs ADD COLUMN IF NOT EXISTS resumed_from VARCHAR;
ALTER TABLE tracker_runs ADD COLUMN IF NOT EXISTS tracker_run_uuid VARCHAR;

CREATE TABLE IF NOT EXISTS checkpoint_inventory (
    month         DATE NOT NULL,
    source        VARCHAR NOT NULL,
    bucket        VARCHAR NOT NULL,
    -- zstd, as x_SourceLine: a row group's keys are all distinct (a report lists each object
    -- once), where dictionary and FSST compression take longer and store more (10.8M objects
    -- of a month of daily reports: written in 2.74 against 3.60 s, 188 against 241 MiB)
    key           VARCHAR USING COMPRESSION zstd NOT NULL,
    size          BIGINT NOT NULL,
    last_modified TIMESTAMP,
    snapshot_date DATE,            -- NULL: one listing, read as the month-end snapshot
    prefix        VARCHAR,         -- the source's run prefix, when the key is under it
    run_id        VARCHAR,         -- the path segment after the prefix (known or not)
    checkpoint    VARCHAR          -- the next segment, or the object itself
);

-- The dated snapshots of the month read into checkpoint_inventory, one row per report (an S3
-- Inventory report, or a day of a plain CSV's `snapshot_date` column): a bucket's dated
-- snapshot exists when its report does, even one listing no object (the bucket was empty that
-- day, so its storage that day is untracked, SPEC §6 rule 4), and its `source` tells a
-- bucket's inventory configurations apart (macros.sql `month_end_snapshot`). Readers take the
-- dated snapshots from here and from checkpoint_inventory's own dates (a manifest without
-- `sourceBucket` leaves no row here).
CREATE TABLE IF NOT EXISTS checkpoint_snapshots (
    month         DATE NOT NULL,
    source        VARCHAR NOT NULL,  -- the checkpoints entry, e.g. `checkpoints[0] inventory`
    bucket        VARCHAR NOT NULL,  -- the report's sourceBucket
    snapshot_date DATE NOT NULL      -- the report's date
);

-- The attribution's rows as stored: a line is named by `line_key` = hash(x_SourceLine,
-- reverse(x_SourceLine)) and a run by `run_hash` = hash(run_id, reverse(run_id)) (macros.sql
-- `key_hash`; 64-bit integers; ingest refuses a month where two line ids, or two run ids,
-- share one), not by their strings repeated on each of the month's tens of millions of
-- rows: at 5M billing lines the rows are written in 2.4 instead of 3.7 s (12-character run
-- ids; 4.6 s with MLflow's 32). Readers use the view `attribution` below (SPEC §7's
-- columns); the pipeline's own SQL joins `line_key` to the key_hash of
-- billing_facts.x_SourceLine and `run_hash` to that of tracker_runs.run_id — every run row's
-- run is one of the month's tracker runs. The column comment on `line_key` names the key:
-- a warehouse whose rows were keyed by hash(text) alone is keyed again (warehouse.py).
--
-- Its three closed vocabularies are ENUMs: at 5M billing lines the slices' inserts take 5.0
-- instead of 5.7 s and the per-run sums 0.54 instead of 0.62 s, VARCHAR's dictionary
-- compression being redone per row group. Their values are listed in alphabetical order, so
-- that ORDER BY, min and max see them as they would the strings; they compare with string
-- literals as strings do. The view casts them back to VARCHAR. (`kind` stays VARCHAR: an
-- unallocated line's kind is its ChargeCategory, whatever a FOCUS file says.)
CREATE TYPE IF NOT EXISTS attribution_purpose_class AS ENUM (   -- SPEC §6
    'other', 'preprocessing', 'production', 'search', 'unallocated', 'untracked');
CREATE TYPE IF NOT EXISTS attribution_component AS ENUM (       -- SPEC §5 x_CostComponent
    'cpu', 'gpu', 'network', 'other', 'storage');
CREATE TYPE IF NOT EXISTS attribution_rule AS ENUM (            -- macros.sql attribution_rule
    'bucket_storage', 'bucket_transfer', 'compute', 'non_usage');

CREATE TABLE IF NOT EXISTS attribution_rows (
    month             DATE NOT NULL,
    line_key          UBIGINT NOT NULL,  -- key_hash(x_SourceLine) of the billing line
    run_hash          UBIGINT,           -- key_hash(run_id); NULL: untracked, unallocated
    purpose_class     attribution_purpose_class NOT NULL,
    component         attribution_component NOT NULL,
    cost              DOUBLE NOT NULL,
    hours             DOUBLE,
    accelerator_hours DOUBLE,
    share             DOUBLE NOT NULL,   -- the final share of the line this row carries
    claimed_share     DOUBLE,            -- S: the line's claimed shares before normalization
    rule              attribution_rule NOT NULL,
    -- untracked: no_run|idle_capacity|shared; unallocated: tax|credit|purchase|
    -- unused_commitment|adjustment|correction; NULL on a run's row (nearly all rows). With
    -- zstd the month's rows write in 2.4 instead of 2.9 s at 5M lines
    kind              VARCHAR USING COMPRESSION zstd
);

-- SPEC §7's `attribution`: one row per (billing line, run | untracked | unallocated)
CREATE OR REPLACE VIEW attribution AS
SELECT a.month, l.x_SourceLine, r.run_id, CAST(a.purpose_class AS VARCHAR) AS purpose_class,
       CAST(a.component AS VARCHAR) AS component, a.cost, a.hours, a.accelerator_hours,
       a.share, a.claimed_share, CAST(a.rule AS VARCHAR) AS rule, a.kind
FROM attribution_rows AS a
LEFT JOIN (SELECT month, x_SourceLine, hash(x_SourceLine, reverse(x_SourceLine)) AS line_key
           FROM billing_facts) AS l
  ON l.month = a.month AND l.line_key = a.line_key
LEFT JOIN (SELECT DISTINCT month, run_id, hash(run_id, reverse(run_id)) AS run_hash
           FROM tracker_runs) AS r
  ON r.month = a.month AND r.run_hash = a.run_hash;

-- The month's attribution summed per run | untracked | unallocated × purpose class × component
-- × rule × kind (attribution_runs.sql): written with each month's attribution, read by the
-- decisions that need no single line (a few hundred thousand rows where attribution holds
-- tens of millions). Σ cost = Σ attribution.cost per month.
CREATE TABLE IF NOT EXISTS attribution_runs (
    month             DATE NOT NULL,
    run_id            VARCHAR,
    purpose_class     VARCHAR NOT NULL,
    component         VARCHAR NOT NULL,
    rule              VARCHAR NOT NULL,
    kind              VARCHAR,
    cost              DOUBLE NOT NULL,
    hours             DOUBLE,            -- NULL when no row of the group has hours
    accelerator_hours DOUBLE,
    rows              BIGINT NOT NULL,   -- the attribution rows summed
    -- Σ cost as DECIMAL, each row's cost cast first: the months' figures the reports sum
    -- from these rows (period_purpose_component.sql) are then those of summing every
    -- attribution row as DECIMAL, exactly, without reading the rows again
    cost_exact        DECIMAL(38, 10)
);
-- (a warehouse written before it: ensure_schema sums its months again)
ALTER TABLE attribution_runs ADD COLUMN IF NOT EXISTS cost_exact DECIMAL(38, 10);

-- What each month's attribution was computed from (attribution.py, attribution_basis.sql):
-- a row with run_id NULL carries `inputs` (a hash of the bill's and the listing's attributed
-- columns, the parameters, the datasets and the attribution's code), a row per tracker run
-- its key. A re-run with the same `inputs` and run keys keeps the month's rows.
CREATE TABLE IF NOT EXISTS attribution_basis (
    month   DATE NOT NULL,
    run_id  VARCHAR,
    inputs  VARCHAR NOT NULL,
    run_key UBIGINT
);
-- per run, what its key hashes but its window (`shape_key`), and that window [rs, re): a run
-- whose shape is the same and only its window moved changed the claims of the lines in the
-- window's moved ends alone (attribution_affected.sql)
ALTER TABLE attribution_basis ADD COLUMN IF NOT EXISTS shape_key UBIGINT;
ALTER TABLE attribution_basis ADD COLUMN IF NOT EXISTS rs TIMESTAMP;
ALTER TABLE attribution_basis ADD COLUMN IF NOT EXISTS re TIMESTAMP;
-- written by earlier versions on the run_id NULL row (the bill's hash and its key), no longer
-- written nor read: the bill's part of `inputs` is read from its input_tokens token
ALTER TABLE attribution_basis ADD COLUMN IF NOT EXISTS bill_key VARCHAR;
ALTER TABLE attribution_basis ADD COLUMN IF NOT EXISTS bill_hash VARCHAR;

-- What a decision table's month was computed from, written with its rows: `inputs` hashes
-- what its basis query reads (assets/queries/checkpoint_basis.sql for the tables that read
-- few of a run's fields, decisions.py `KEPT_WHEN_SAME`; decision_inputs.sql for the others),
-- the parameters and the SQL; `rows` the rows written. A re-run with the same `inputs` whose
-- table still holds `rows` rows for the month keeps them (warehouse.py
-- `replace_month_unless_same`).
CREATE TABLE IF NOT EXISTS decision_basis (
    month      DATE NOT NULL,
    table_name VARCHAR NOT NULL,
    inputs     VARCHAR NOT NULL,
    rows       BIGINT NOT NULL
);

-- The monthly report's page of each month as the monthly_report asset last wrote it: what it
-- was computed from (`inputs`: defs/assets/report.py `page_inputs` — the bases of the tables
-- it shows, every month's input tokens, the strip's months' reconciliations, the report's
-- code and the page's path), its size and SHA-256, and the asset's metadata (JSON). A run whose
-- inputs are the same, the page still there with those bytes, keeps the page and its metadata.
CREATE TABLE IF NOT EXISTS report_pages (
    month       DATE NOT NULL,
    inputs      VARCHAR NOT NULL,
    path        VARCHAR NOT NULL,
    html_bytes  BIGINT NOT NULL,
    metadata    VARCHAR NOT NULL,
    html_sha256 VARCHAR
);
-- a warehouse written before the pages' hashes: its rows have none, and their pages are drawn
-- once more
ALTER TABLE report_pages ADD COLUMN IF NOT EXISTS html_sha256 VARCHAR;

-- What each month's bill, runs and attribution are, as their writers leave it in the
-- transaction that writes them (warehouse.py `note_input`), for decision_inputs.sql: the
-- runs (`tracker`) and the attribution as hashes of what the month holds — the same rows
-- read again give the same token — and the bill as its lines' count and hash sums (billing.py
-- `bill_token`): the same lines written again give the same token too.
CREATE TABLE IF NOT EXISTS input_tokens (
    month DATE NOT NULL,
    input VARCHAR NOT NULL,   -- billing | tracker | attribution
    token VARCHAR NOT NULL
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
    accelerator_hours_per_improvement DOUBLE,
    estimated_cost            DOUBLE,            -- the latest approval's estimate (SPEC §12)
    cumulative_cost           DOUBLE,            -- all months through this one
    overrun                   DOUBLE             -- cumulative_cost − estimated_cost
);
-- warehouses created before the approval columns existed
ALTER TABLE search_costs ADD COLUMN IF NOT EXISTS estimated_cost DOUBLE;
ALTER TABLE search_costs ADD COLUMN IF NOT EXISTS cumulative_cost DOUBLE;
ALTER TABLE search_costs ADD COLUMN IF NOT EXISTS overrun DOUBLE;

-- the shape of each search active in the month and the part of its cost the shape questions
-- (SPEC §12; assets/decisions/search_shape.sql)
CREATE TABLE IF NOT EXISTS search_shape (
    month               DATE NOT NULL,
    search_id           VARCHAR NOT NULL,
    model               VARCHAR,
    runs                BIGINT NOT NULL,   -- trials, all months
    configs             BIGINT NOT NULL,   -- as search_costs: distinct config_id, else runs ÷ seeds (up)
    seeds_per_config    BIGINT NOT NULL,   -- the most distinct seeds any config has
    grid                BOOLEAN NOT NULL,  -- every config has seeds_per_config seeds
    best_config_id      VARCHAR,           -- NULL: no run with a config reports the metric
    rerun_configs       BIGINT NOT NULL,   -- configs already run in an earlier search of the model
    rerun_of            VARCHAR,           -- those earlier searches, comma-separated
    runs_without_config BIGINT NOT NULL,   -- never re-runs, never extra seeds
    rerun_cost          DOUBLE NOT NULL,   -- this month
    extra_seed_cost     DOUBLE NOT NULL,   -- this month
    questioned_cost     DOUBLE NOT NULL,   -- this month, each run once
    cost                DOUBLE NOT NULL    -- this month, sweep controllers included
);

-- every recorded search estimate (`cost-pipeline estimate … --approve`): history, never
-- replaced per month; the latest recording of a search counts
CREATE TABLE IF NOT EXISTS search_approvals (
    month                DATE NOT NULL,     -- the month of the recording
    search_id            VARCHAR NOT NULL,
    model                VARCHAR NOT NULL,
    configs              BIGINT NOT NULL,
    seeds                BIGINT NOT NULL,
    reruns               BIGINT NOT NULL,
    runs                 BIGINT NOT NULL,
    per_run_cost         DOUBLE NOT NULL,
    estimated_cost       DOUBLE NOT NULL,
    approval_budget      DOUBLE NOT NULL,
    approved             BOOLEAN NOT NULL,  -- estimated_cost ≤ approval_budget
    expected_improvement DOUBLE,
    approved_by          VARCHAR,
    recorded_at          TIMESTAMP NOT NULL, -- UTC
    currency             VARCHAR            -- the estimate's (its basis runs', else the bill's)
);
-- warehouses created before the estimate's currency was recorded: their recordings have none
-- (NULL), and search_costs compares them with the spend as it always did
ALTER TABLE search_approvals ADD COLUMN IF NOT EXISTS currency VARCHAR;

CREATE TABLE IF NOT EXISTS retention_violations (
    month         DATE NOT NULL,
    bucket        VARCHAR NOT NULL,
    -- an object's key, unique: zstd writes the month's 842k violations of the bench's 1M
    -- objects in 0.54–0.61 s against 0.68–0.72 s (insert and commit), 21 against 26 MiB
    key           VARCHAR NOT NULL USING COMPRESSION zstd,
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

CREATE TABLE IF NOT EXISTS search_trend (
    month                         DATE NOT NULL,
    model                         VARCHAR,
    metric_name                   VARCHAR,
    search_id                     VARCHAR NOT NULL,
    search_start                  TIMESTAMP,
    search_order                  BIGINT NOT NULL,   -- 1 = the model's first search
    runs                          BIGINT NOT NULL,
    best_metric                   DOUBLE,
    previous_best                 DOUBLE,
    improvement                   DOUBLE,
    accelerator_hours             DOUBLE NOT NULL,   -- all months up to this one
    cost                          DOUBLE NOT NULL,   -- all months up to this one
    cost_this_month               DOUBLE NOT NULL,
    cost_per_improvement          DOUBLE,
    previous_search_id            VARCHAR,
    previous_cost_per_improvement DOUBLE,
    saturating                    BOOLEAN NOT NULL
);
-- the currency its cost is in (NULL: billed in none, or in more than one)
ALTER TABLE search_trend ADD COLUMN IF NOT EXISTS currency VARCHAR;

CREATE TABLE IF NOT EXISTS preprocessing_waste (
    month                     DATE NOT NULL,
    kind                      VARCHAR NOT NULL,  -- recomputed | stale_transform
    run_id                    VARCHAR NOT NULL,
    purpose                   VARCHAR,
    model                     VARCHAR,
    status                    VARCHAR,
    start_time                TIMESTAMP,
    input_hash                VARCHAR NOT NULL,
    transform_version         VARCHAR NOT NULL,  -- what the run computed / trained on
    current_transform_version VARCHAR NOT NULL,  -- what was already available when it started
    reference_run_id          VARCHAR NOT NULL,  -- the preprocess run that computed that first
    cpu_hours                 DOUBLE NOT NULL,
    accelerator_hours         DOUBLE NOT NULL,
    cost                      DOUBLE NOT NULL    -- the run's attributed cost this month
);

CREATE TABLE IF NOT EXISTS egress (
    month              DATE NOT NULL,
    run_id             VARCHAR,                  -- NULL: transfer on a dataset bucket no run claimed
    model              VARCHAR,
    purpose_class      VARCHAR NOT NULL,
    dataset            VARCHAR,
    dataset_bucket     VARCHAR,
    dataset_region     VARCHAR,
    run_region         VARCHAR,
    lines              BIGINT NOT NULL,
    gigabytes          DOUBLE,                   -- share × ConsumedQuantity in GB (macros.sql gigabytes_per_unit)
    transfer_cost      DOUBLE NOT NULL,          -- bucket transfer rule (cross-region reads)
    other_network_cost DOUBLE NOT NULL,          -- the run's other network lines
    cost               DOUBLE NOT NULL
);

CREATE TABLE IF NOT EXISTS gpu_utilization (
    month                  DATE NOT NULL,
    run_id                 VARCHAR NOT NULL,
    model                  VARCHAR,
    purpose_class          VARCHAR NOT NULL,
    gpus                   INTEGER,
    gpu_utilization        DOUBLE NOT NULL,       -- mean over the run, 0-100
    accelerator_hours      DOUBLE NOT NULL,
    gpu_cost               DOUBLE NOT NULL,
    idle_accelerator_hours DOUBLE NOT NULL,
    idle_cost              DOUBLE NOT NULL
);

CREATE TABLE IF NOT EXISTS showback (
    month             DATE NOT NULL,
    team              VARCHAR,                    -- NULL: neither the run nor the line names one
    purpose_class     VARCHAR NOT NULL,
    component         VARCHAR NOT NULL,
    cost              DOUBLE NOT NULL,
    hours             DOUBLE NOT NULL,
    accelerator_hours DOUBLE NOT NULL,
    runs              BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS run_costs (
    month             DATE NOT NULL,
    run_id            VARCHAR NOT NULL,
    model             VARCHAR,
    purpose_class     VARCHAR NOT NULL,
    search_id         VARCHAR,
    gpu_cost          DOUBLE NOT NULL,
    cpu_cost          DOUBLE NOT NULL,
    storage_cost      DOUBLE NOT NULL,
    network_cost      DOUBLE NOT NULL,
    other_cost        DOUBLE NOT NULL,
    cost              DOUBLE NOT NULL,            -- Σ of the run's attribution rows this month
    accelerator_hours DOUBLE NOT NULL,
    cpu_hours         DOUBLE NOT NULL             -- hours of its cpu rows
);

-- The MLflow runs whose `cost.*` tags the write-back wrote, per tracker store
-- (defs/assets/tracker_tags.py `store_of`): a run loses its tags when the warehouse no longer
-- gives it a cost only when it is here, so a user's own tag under one of the nine names, on
-- a run never costed, stays (ingest/sources/mlflow_tags.py). One row a store × run.
CREATE TABLE IF NOT EXISTS tracker_tagged_runs (
    month         DATE NOT NULL,      -- the materialization that recorded it
    store         VARCHAR NOT NULL,
    mlflow_run_id VARCHAR NOT NULL
);

CREATE TABLE IF NOT EXISTS retrain_cadence (
    month               DATE NOT NULL,
    model               VARCHAR NOT NULL,
    retrains            BIGINT NOT NULL,     -- production runs started in the month
    by_trigger          STRUCT(schedule BIGINT, drift BIGINT, manual BIGINT, unknown BIGINT),
    schedule_retrains   BIGINT NOT NULL,
    drift_retrains      BIGINT NOT NULL,
    manual_retrains     BIGINT NOT NULL,
    unknown_retrains    BIGINT NOT NULL,
    median_days_between DOUBLE,              -- NULL with fewer than 2 starts in 6 months
    cost                DOUBLE NOT NULL,     -- the model's production cost this month
    search_cost         DOUBLE NOT NULL,
    mean_metric_change  DOUBLE,
    flat_retrains       BIGINT NOT NULL,
    flat_retrain_cost   DOUBLE NOT NULL      -- the lever "retrain on measured decay"
);

CREATE TABLE IF NOT EXISTS preemption (
    month                         DATE NOT NULL,
    chain_id                      VARCHAR NOT NULL,  -- the chain's first run
    model                         VARCHAR,
    runs                          BIGINT NOT NULL,
    restarts                      BIGINT NOT NULL,
    restarts_from_scratch         BIGINT NOT NULL,
    cost                          DOUBLE NOT NULL,
    lost_cost                     DOUBLE NOT NULL,   -- the lever "checkpoint before going preemptible"
    on_demand_cost                DOUBLE,            -- NULL: a compute line without ListCost
    last_run_id                   VARCHAR,
    last_run_on_demand_cost       DOUBLE,
    spot_cost_more_than_on_demand BOOLEAN
);

CREATE TABLE IF NOT EXISTS cost_levers (
    month                 DATE NOT NULL,
    rank                  INTEGER NOT NULL,
    lever                 VARCHAR NOT NULL,
    dollars               DOUBLE NOT NULL,
    what_it_costs_to_pull VARCHAR NOT NULL,
    evidence              VARCHAR NOT NULL
);

-- every billing delivery read, per month and source (history: not replaced per month)
CREATE TABLE IF NOT EXISTS billing_deliveries (
    month                 DATE NOT NULL,
    source                VARCHAR NOT NULL,
    execution_id          VARCHAR NOT NULL,   -- manifest executionId, else files:<hash>
    location              VARCHAR NOT NULL,   -- the manifest read ('' without one)
    files                 VARCHAR[] NOT NULL,
    file_bytes            BIGINT,
    first_seen            TIMESTAMP NOT NULL, -- UTC, first materialization that read it
    last_seen             TIMESTAMP NOT NULL,
    total_effective_cost  DOUBLE NOT NULL,    -- the source's Σ EffectiveCost of the month
    previous_execution_id VARCHAR,            -- the delivery of the month seen before it
    change_effective_cost DOUBLE,             -- total − the previous delivery's total
    PRIMARY KEY (month, source, execution_id)
);

-- what each asset's month was last materialized from (cost_pipeline/incremental.py): the
-- fingerprint of its code, config and inputs, and the check outcomes it had then
CREATE TABLE IF NOT EXISTS materializations (
    month           DATE NOT NULL,
    asset           VARCHAR NOT NULL,
    fingerprint     VARCHAR NOT NULL,
    materialized_at TIMESTAMP NOT NULL,   -- UTC, the Dagster materialization event's time
    run_id          VARCHAR,
    checks          VARCHAR,              -- JSON list of the asset's check outcomes
    PRIMARY KEY (month, asset)
);
