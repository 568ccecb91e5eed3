-- What would reduce this bill the most: the mission's levers ranked by the dollars each one
-- touches in this month's data, with the figure behind it and what pulling it costs.
--
--   bound the search          Σ search_shape.questioned_cost: this month's cost of the search
--                             runs that repeat a config an earlier search of the model ran,
--                             or that are extra seeds of a config other than the best (each
--                             run once; runs without config_id are never re-runs); the shape
--                             and search_trend's saturation are its evidence: the 10 most
--                             questioned searches, the others counted and summed
--   retrain on measured decay Σ retrain_cadence.flat_retrain_cost: this month's cost of the
--                             retrains not triggered by drift whose metric moved less than
--                             policy.retrain.min_metric_change; 0 with its reason when no
--                             retrain's metric change is known: no metric_value, no previous
--                             production run of its model, or that run's metric missing or
--                             another
--   cache preprocessing       preprocessing_waste, kind 'recomputed': preprocess runs that
--                             recomputed a table a cache would have served; 0 with its reason
--                             when no preprocess run records an input_hash and
--                             transform_version
--   delete dead checkpoints   retention_violations: the monthly cost of every object the
--                             retention policy says should be gone; 0 with its reason when
--                             nothing was listed this month (no checkpoints source)
--   co-locate compute & data  egress: cross-region pulls of datasets (run or untracked); 0
--                             with its reason when no dataset region is known (no datasets in
--                             the config, no run records dataset_region); its evidence gives
--                             the runs' GB and routes, then the unclaimed transfer apart
--   chase untracked usage     untracked GPU and CPU compute (attribution, purpose untracked)
--   checkpoint before going   Σ preemption.lost_cost: this month's cost of the runs that a
--   preemptible               restart from scratch repeated (chains with spot compute); 0 with
--                             its reason when nothing is spot or no run records restart_of
--   use a cheaper card        idle GPU cost from gpu_utilization (runs that report their mean
--                             utilization); 0 when no run reports one
--
-- A lever's dollars are the money pulling it could save: never below 0. A figure that
-- refunds or credits leave below 0 (a refund on a re-run search run, on a dead checkpoint's
-- bucket, on an unclaimed instance …) is 0, its evidence opening with "<the figure> is a
-- credit this month (−$…): nothing to save;" ("nothing to chase" for untracked compute)
-- before the lever's own evidence; it ranks as a $0 lever. The floor is on the lever's net
-- figure: a credit smaller than the lever's charges lowers it. A period sums the months'
-- floored dollars (period_levers).
--
-- Ranking: all but the last by dollars to the currency's smallest unit (the cent, a yen),
-- largest first (ties — figures the page shows alike, whatever a float sum's last bits say —
-- in the order above). "Use a cheaper
-- card" is always last, whatever its figure: the per-hour price explains little of the bill
-- and changing hardware is the most expensive lever to pull, so the mission pulls it last.
WITH
bill AS MATERIALIZED (
    -- the month's currency and its decimals, read once: each `fmt_money` and `minor_digits`
    -- spells its argument out several times, and `bill_currency` scans the month's lines
    -- (25 texts × 8 copies of that scan took the step from 0.3 to 2.0 s at 2M lines)
    SELECT bill_currency($month) AS currency, minor_digits(bill_currency($month)) AS digits
),
search AS (
    -- the searches whose shape questions some of this month's cost, with their saturation
    -- (search_trend) when known
    SELECT
        coalesce(fsum(sh.questioned_cost), 0)                   AS dollars,
        count(*) FILTER (WHERE sh.questioned_cost <> 0)        AS searches,
        string_agg(
            sh.search_id || ': ' || counted(sh.configs, 'config') || ' × '
            || CASE WHEN sh.grid THEN counted(sh.seeds_per_config, 'seed') || ', a full grid'
                    ELSE 'up to ' || counted(sh.seeds_per_config, 'seed')
                         || ', not a full grid' END
            || CASE WHEN sh.rerun_configs > 0
                    THEN '; ' || sh.rerun_configs || ' of '
                         || counted(sh.configs, 'config') || ' already run in '
                         || sh.rerun_of || ' — ' || fmt_money(sh.rerun_cost, b.currency)
                         || ' re-run'
                    ELSE '; no config run in an earlier search' END
            || CASE WHEN sh.runs_without_config > 0
                    THEN '; ' || counted(sh.runs_without_config, 'run') || ' without config_id, never '
                         || 'counted as re-runs'
                    ELSE '' END
            || CASE WHEN sh.best_config_id IS NULL
                    THEN '; no metric picks a best config: extra seeds of every config '
                    ELSE '; extra seeds of non-best configs ' END
            || fmt_money(sh.extra_seed_cost, b.currency)
            -- a run both re-run and an extra seed is in both figures and questioned once:
            -- say how much, or a reader adds the two and gets more than the lever
            || CASE WHEN round(sh.rerun_cost + sh.extra_seed_cost - sh.questioned_cost,
                               b.digits) <> 0
                    THEN ' (' || coalesce('best ' || sh.best_config_id || '; ', '')
                         || fmt_money(sh.rerun_cost + sh.extra_seed_cost
                                      - sh.questioned_cost, b.currency)
                         || ' of it also re-run, counted once)'
                    ELSE coalesce(' (best ' || sh.best_config_id || ')', '') END
            || CASE WHEN t.saturating AND (t.improvement IS NULL OR t.improvement <= 0)
                    THEN '; saturating: no improvement'
                    WHEN t.saturating
                    THEN '; saturating: ' || fmt_money(t.cost_per_improvement, b.currency)
                         || ' per unit of ' || coalesce(t.metric_name, 'the metric') || ' vs '
                         || fmt_money(t.previous_cost_per_improvement, b.currency) || ' for '
                         || t.previous_search_id
                    ELSE '' END,
            ' | ' ORDER BY sh.questioned_cost DESC, sh.search_id)
            FILTER (WHERE sh.questioned_cost <> 0 AND sh.listed <= 10)  AS detail,
        -- the searches past the first 10, counted and summed: every one was listed (14.3
        -- million characters for 2,000 searches re-running each other's configs)
        count(*) FILTER (WHERE sh.questioned_cost <> 0 AND sh.listed > 10)   AS rest,
        fsum(sh.questioned_cost)
            FILTER (WHERE sh.questioned_cost <> 0 AND sh.listed > 10)        AS rest_cost,
        coalesce(sum(sh.runs_without_config), 0)               AS runs_without_config,
        coalesce(sum(sh.runs), 0)                              AS runs
    FROM bill AS b,
         (SELECT *,
                 -- the place of a questioned search in the list, largest first
                 row_number() OVER (PARTITION BY questioned_cost <> 0
                                    ORDER BY questioned_cost DESC, search_id) AS listed
          FROM search_shape WHERE month = $month) AS sh
    LEFT JOIN search_trend AS t ON t.month = sh.month AND t.search_id = sh.search_id
),
all_search AS (
    SELECT coalesce(fsum(cost), 0) AS cost
    FROM attribution_runs WHERE month = $month AND purpose_class = 'search'
),
preprocessing AS (
    SELECT
        coalesce(fsum(cost) FILTER (WHERE kind = 'recomputed'), 0)      AS dollars,
        count(*) FILTER (WHERE kind = 'recomputed')                    AS runs,
        coalesce(fsum(cpu_hours) FILTER (WHERE kind = 'recomputed'), 0) AS cpu_hours,
        count(DISTINCT (input_hash, transform_version))
            FILTER (WHERE kind = 'recomputed')                         AS tables,
        count(*) FILTER (WHERE kind = 'stale_transform')               AS stale_runs,
        coalesce(fsum(cost) FILTER (WHERE kind = 'stale_transform'), 0) AS stale_cost
    FROM preprocessing_waste
    WHERE month = $month
),
retention AS (
    SELECT
        coalesce(fsum(monthly_cost), 0)                                   AS dollars,
        count(*)                                                         AS objects,
        coalesce(sum(bytes), 0)                                          AS bytes,
        coalesce(fsum(monthly_cost) FILTER (WHERE reason = 'dead_run'), 0) AS dead,
        coalesce(fsum(monthly_cost) FILTER (WHERE reason = 'beyond_keep_last'), 0) AS beyond,
        coalesce(fsum(monthly_cost) FILTER (WHERE reason = 'orphan'), 0)  AS orphan
    FROM retention_violations
    WHERE month = $month
),
egress_total AS (
    -- the runs that pulled across regions (their GB and routes) apart from the transfer on
    -- dataset buckets no run claimed (run_id NULL): that was pulled by no run
    SELECT
        coalesce(fsum(cost), 0)                                   AS dollars,
        count(DISTINCT run_id)                                   AS runs,
        fsum(gigabytes) FILTER (WHERE run_id IS NOT NULL)        AS gb,  -- NULL: none in bytes
        coalesce(string_agg(DISTINCT coalesce(dataset, dataset_bucket, '?') || ' '
                            || coalesce(dataset_region, '?') || ' → ' || run_region, ', '
                            ORDER BY coalesce(dataset, dataset_bucket, '?') || ' '
                            || coalesce(dataset_region, '?') || ' → ' || run_region)
                     FILTER (WHERE run_id IS NOT NULL), '')      AS routes,
        count(*) FILTER (WHERE run_id IS NULL)                   AS unclaimed_rows,
        coalesce(fsum(cost) FILTER (WHERE run_id IS NULL), 0)    AS unclaimed,
        fsum(gigabytes) FILTER (WHERE run_id IS NULL)            AS unclaimed_gb,
        string_agg(DISTINCT coalesce(dataset, dataset_bucket, '?') || ' '
                   || coalesce(dataset_region, '?'), ', '
                   ORDER BY coalesce(dataset, dataset_bucket, '?') || ' '
                   || coalesce(dataset_region, '?'))
            FILTER (WHERE run_id IS NULL)                        AS unclaimed_datasets
    FROM egress
    WHERE month = $month
),
untracked AS (
    SELECT
        coalesce(fsum(cost), 0)                                            AS dollars,
        coalesce(fsum(accelerator_hours) FILTER (WHERE component = 'gpu'), 0) AS gpu_hours,
        coalesce(fsum(hours) FILTER (WHERE component = 'cpu'), 0)          AS cpu_hours
    FROM attribution_runs
    WHERE month = $month AND purpose_class = 'untracked' AND component IN ('gpu', 'cpu')
),
top_resource AS (
    -- the resource with the most untracked compute cost, from untracked_usage (already
    -- per resource): joining every untracked row back to its line costs ~1 s at 5M lines
    SELECT resource_id, coalesce(resource_id, '(no resource id)') AS resource,
           fsum(cost) AS cost
    FROM untracked_usage
    WHERE month = $month AND component IN ('gpu', 'cpu')
    GROUP BY resource_id
    ORDER BY cost DESC, resource
    LIMIT 1
),
top_untracked AS (
    -- and its instance type, from its own lines that have untracked compute rows
    SELECT
        t.resource,
        (SELECT min(l.x_InstanceType)
         FROM billing_facts AS l
         SEMI JOIN (SELECT line_key FROM attribution_rows
                    WHERE month = $month AND purpose_class = 'untracked'
                      AND component IN ('gpu', 'cpu')) AS a
           ON a.line_key = key_hash(l.x_SourceLine)
         WHERE l.month = $month AND l.ResourceId IS NOT DISTINCT FROM t.resource_id)
            AS instance_type,
        t.cost
    FROM top_resource AS t
),
idle AS (
    SELECT
        coalesce(fsum(idle_cost), 0)              AS dollars,
        count(*)                                 AS runs,
        coalesce(fsum(idle_accelerator_hours), 0) AS idle_hours,
        coalesce(fsum(accelerator_hours), 0)      AS paid_hours
    FROM gpu_utilization
    WHERE month = $month
),
tracked_gpu AS (
    SELECT coalesce(fsum(cost), 0) AS cost
    FROM attribution_runs
    WHERE month = $month AND component = 'gpu' AND run_id IS NOT NULL
),
retrain AS (
    SELECT
        coalesce(fsum(flat_retrain_cost), 0)                            AS dollars,
        coalesce(sum(retrains), 0)                                     AS retrains,
        coalesce(sum(flat_retrains), 0)                                AS flat,
        count(*) FILTER (WHERE mean_metric_change IS NOT NULL)         AS measured_models,
        -- the 10 costliest models, then a count (each model was listed: 3,000 models)
        array_to_string((list(model || ': ' || flat_retrains || ' of '
                              || counted(retrains, 'retrain') || ' flat, '
                              || fmt_money(flat_retrain_cost, b.currency)
                              || coalesce(', every ' || format('{:,.1f}', median_days_between)
                                          || ' days', '')
                              ORDER BY flat_retrain_cost DESC, model)
                         FILTER (WHERE flat_retrains > 0))[1:10], '; ')
            || more_of(count(*) FILTER (WHERE flat_retrains > 0), '; ', 'model')  AS detail
    FROM bill AS b, retrain_cadence
    WHERE month = $month
),
unmeasured AS (
    -- why a retrain has no metric change (retrain_cadence's production runs and each one's
    -- previous of the model, macros.sql `production_runs`, as that table pairs them): each
    -- retrain under the first reason that holds. All were said to lack a metric_value, also
    -- when each had one and was its model's first
    SELECT *,
        no_metric + first_runs + previous_no_metric + other_metric          AS count,
        -- the reasons with their counts, as each evidence below lists them
        concat_ws(', ',
            CASE WHEN no_metric > 0 THEN no_metric || ' without a metric_value' END,
            CASE WHEN first_runs > 0
                 THEN first_runs || ' with a metric_value but no previous '
                      || 'production run of its model to compare with' END,
            CASE WHEN previous_no_metric > 0
                 THEN previous_no_metric || ' whose previous production run '
                      || 'has no metric_value' END,
            CASE WHEN other_metric > 0
                 THEN other_metric || ' whose previous production run logged '
                      || 'another metric_name' END)                             AS reasons
    FROM (
    SELECT
        count(*) FILTER (WHERE metric_value IS NULL)                         AS no_metric,
        count(*) FILTER (WHERE metric_value IS NOT NULL AND NOT has_previous) AS first_runs,
        count(*) FILTER (WHERE metric_value IS NOT NULL AND has_previous
                           AND previous_value IS NULL)                       AS previous_no_metric,
        count(*) FILTER (WHERE metric_value IS NOT NULL AND previous_value IS NOT NULL
                           AND metric_name <> previous_name)                 AS other_metric
    FROM (
        SELECT start_time, metric_value, metric_name,
               previous IS NOT NULL       AS has_previous,
               previous.metric_value      AS previous_value,
               previous.metric_name       AS previous_name
        FROM production_runs($month)
    )
    WHERE start_time >= CAST($month_start AS TIMESTAMP)
      AND start_time < CAST($month_end AS TIMESTAMP)
    )
),
preempted AS (
    SELECT
        coalesce(fsum(lost_cost), 0)                                    AS dollars,
        count(*)                                                       AS chains,
        coalesce(sum(restarts), 0)                                     AS restarts,
        coalesce(sum(restarts_from_scratch), 0)                        AS from_scratch,
        -- each list under the heading that counts it: the chains that lost compute, the
        -- chains dearer than their last run on demand, the chains whose last run has no
        -- on-demand figure this month (compared with nothing)
        -- each list its first 10, then a count (every chain was listed: 1,000 spot chains)
        array_to_string((list(chain_id || ' (' || runs || ' runs, ' || restarts_from_scratch
                              || ' from scratch) ' || fmt_money(lost_cost, b.currency)
                              || ' of ' || fmt_money(cost, b.currency)
                              ORDER BY lost_cost DESC, chain_id)
                         FILTER (WHERE lost_cost <> 0))[1:10], ', ')
            || more_of(count(*) FILTER (WHERE lost_cost <> 0), ', ', 'chain') AS lost_detail,
        count(*) FILTER (WHERE spot_cost_more_than_on_demand)          AS dearer,
        array_to_string((list(chain_id || ' ' || fmt_money(cost, b.currency) || ' vs '
                              || fmt_money(last_run_on_demand_cost, b.currency)
                              ORDER BY cost - last_run_on_demand_cost DESC, chain_id)
                         FILTER (WHERE spot_cost_more_than_on_demand))[1:10], ', ')
            || more_of(count(*) FILTER (WHERE spot_cost_more_than_on_demand), ', ', 'chain')
                                                                       AS dearer_detail,
        count(*) FILTER (WHERE last_run_on_demand_cost IS NULL)        AS unpriced,
        array_to_string((list(chain_id ORDER BY chain_id)
                         FILTER (WHERE last_run_on_demand_cost IS NULL))[1:10], ', ')
            || more_of(count(*) FILTER (WHERE last_run_on_demand_cost IS NULL), ', ', 'chain')
                                                                       AS unpriced_detail
    FROM bill AS b, preemption
    WHERE month = $month
),
run_records AS (
    -- what the tracker records that three levers need to be priced at all, in one pass
    SELECT
        count(*) FILTER (WHERE restart_of IS NOT NULL)                  AS restarts,
        count(*) FILTER (WHERE purpose = 'preprocess' AND input_hash IS NOT NULL
                           AND transform_version IS NOT NULL)          AS keyed_preprocess,
        count(*) FILTER (WHERE dataset_region IS NOT NULL)              AS dataset_regions
    FROM month_runs($month)
),
month_spend AS (
    -- the month's cost the missing-data reasons quote: what the lever could not look into
    SELECT
        coalesce(fsum(cost) FILTER (WHERE purpose_class = 'preprocessing'), 0) AS preprocessing,
        coalesce(fsum(cost) FILTER (WHERE component = 'storage'), 0)          AS storage,
        coalesce(fsum(cost) FILTER (WHERE component = 'network'), 0)          AS network
    FROM attribution_runs
    WHERE month = $month
),
known AS (
    -- a checkpoint listing of the month (objects, or a dated report of an empty bucket), and
    -- a dataset region from the config
    SELECT
        EXISTS (SELECT 1 FROM checkpoint_inventory WHERE month = $month)
            OR EXISTS (SELECT 1 FROM checkpoint_snapshots WHERE month = $month) AS listing,
        EXISTS (SELECT 1 FROM config_datasets WHERE region IS NOT NULL)       AS config_regions
),
levers_figures AS (
    -- figure: the lever's net figure this month; credit_of: what it is, named when refunds
    -- leave it below 0
    SELECT 1 AS mission_order, 'bound the search' AS lever, s.dollars AS figure,
        'the re-run configs'' and extra seeds'' cost' AS credit_of,
        'an approval step before launch (cost-pipeline estimate --approve against '
        || 'policy.search.approval_budget), reusing the results of configs already run, '
        || 'fewer seeds for configs that are not the best, early stopping; '
        || 'risk: missing a late improvement' AS what_it_costs_to_pull,
        CASE WHEN s.searches > 0
             THEN fmt_money(s.dollars, b.currency) || ' of ' || fmt_money(a.cost, b.currency)
                  || ' search cost this month re-ran configs or ran extra seeds: ' || s.detail
                  || CASE WHEN s.rest > 0
                          THEN ' | … and ' || format('{:,}', s.rest) || ' more search'
                               || CASE WHEN s.rest = 1 THEN '' ELSE 'es' END || ' ('
                               || fmt_money(s.rest_cost, b.currency) || ' questioned; every '
                               || 'row is in the warehouse''s search_shape)'
                          ELSE '' END
             WHEN a.cost = 0 THEN 'no search billed this month'
             WHEN s.runs > 0 AND s.runs_without_config = s.runs
             THEN 'no search run records a config_id: re-runs and extra seeds cannot be told '
                  || '(search cost this month ' || fmt_money(a.cost, b.currency) || ')'
             ELSE 'no search re-ran a config of an earlier search or ran extra seeds of a '
                  || 'non-best config (search cost this month ' || fmt_money(a.cost, b.currency)
                  || ')' END AS evidence
    FROM bill AS b, search AS s, all_search AS a
    UNION ALL
    SELECT 2, 'retrain on measured decay', r.dollars, 'the flat retrains'' cost',
        'retraining when drift or a metric says the model decayed instead of on a calendar: '
        || 'a drift monitor and a metric threshold (policy.retrain.min_metric_change); risk: '
        || 'a late retrain when the monitor misses a decay',
        CASE WHEN r.retrains = 0 THEN 'no production retrain started this month'
             WHEN r.measured_models = 0 AND u.no_metric = r.retrains
             THEN counted(r.retrains, 'retrain') || ' this month, none with a metric_value to compare '
                  || 'with the previous production run: flatness cannot be measured'
             WHEN r.measured_models = 0
             THEN counted(r.retrains, 'retrain') || ' this month, none measured ('
                  || u.reasons || '): flatness cannot be measured'
             WHEN r.flat = 0
             THEN 'every measured retrain moved the metric by at least '
                  || plain_number($min_metric_change) || ' or was triggered by drift ('
                  -- the retrains not measured, and why: "every measured" was read of all
                  || CASE WHEN u.count = 0 THEN counted(r.retrains, 'retrain')
                          ELSE (r.retrains - u.count) || ' of '
                               || counted(r.retrains, 'retrain') || ' measured; ' || u.reasons
                     END || ')'
             ELSE r.flat || ' of ' || counted(r.retrains, 'retrain')
                  || CASE WHEN r.flat = 1 THEN ' was' ELSE ' were' END
                  || ' not triggered by drift and '
                  || 'moved the metric less than ' || plain_number($min_metric_change) || ': ' || r.detail END
    FROM bill AS b, retrain AS r, unmeasured AS u
    UNION ALL
    SELECT 3, 'cache preprocessing', p.dollars, 'the recomputations'' cost',
        'a feature-table cache keyed by (input_hash, transform_version): storage for '
        || counted(p.tables, 'cached table') || ' and a lookup before each preprocess step',
        CASE WHEN p.runs = 0 AND rr.keyed_preprocess = 0
             THEN 'no preprocess run records an input_hash and transform_version: '
                  || 'recomputations cannot be told (preprocessing cost this month '
                  || fmt_money(ms.preprocessing, b.currency) || ')'
             ELSE counted(p.runs, 'preprocess run') || ' recomputed an (input_hash, transform_version) '
                  || 'already computed: ' || format('{:,.1f}', p.cpu_hours) || ' CPU-hours'
                  || CASE WHEN p.stale_runs > 0
                          THEN '; ' || counted(p.stale_runs, 'run') || ' ('
                               || fmt_money(p.stale_cost, b.currency)
                               || ') trained on a stale transform_version (not counted here)'
                          ELSE '' END END
    FROM bill AS b, preprocessing AS p, run_records AS rr, month_spend AS ms
    UNION ALL
    SELECT 4, 'delete dead checkpoints', r.dollars,
        'the storage of the checkpoints breaking the retention policy',
        'a lifecycle rule or cleanup job applying the retention policy; risk: deleting a '
        || 'checkpoint someone still needs (keep=true protects a run)',
        CASE WHEN r.objects = 0 AND NOT k.listing
             THEN 'no checkpoint listing this month (no checkpoints source in the config, or '
                  || 'it listed nothing): dead checkpoints cannot be told (storage cost this '
                  || 'month ' || fmt_money(ms.storage, b.currency) || ')'
             ELSE counted(r.objects, 'object') || ', ' || byte_size(r.bytes) || ', '
                  || CASE WHEN r.objects = 1 THEN 'breaks' ELSE 'break' END || ' the '
                  || 'retention policy: dead runs ' || fmt_money(r.dead, b.currency)
                  || ', beyond keep-last ' || fmt_money(r.beyond, b.currency)
                  || ', orphans ' || fmt_money(r.orphan, b.currency) || ' a month' END
    FROM bill AS b, retention AS r, known AS k, month_spend AS ms
    UNION ALL
    SELECT 5, 'co-locate compute & data', e.dollars, 'the cross-region pulls'' cost',
        'train in the dataset''s region, or copy the dataset once into the compute region '
        || '(one transfer plus its storage) instead of pulling it per run; may need GPU '
        || 'capacity in that region',
        CASE WHEN e.dollars = 0 AND NOT k.config_regions AND rr.dataset_regions = 0
             THEN 'no dataset region known (no datasets in the config, no run records '
                  || 'dataset_region): cross-region pulls cannot be told (network cost this '
                  || 'month ' || fmt_money(ms.network, b.currency) || ')'
             WHEN e.dollars = 0 THEN 'no cross-region pull billed this month'
             ELSE CASE WHEN e.runs = 0 THEN 'no run pulled data across regions'
                       ELSE counted(e.runs, 'run') || ' pulled '
                            || CASE WHEN e.gb IS NOT NULL
                                    THEN format('{:,.0f}', e.gb) || ' GB' ELSE 'data' END
                            || ' across regions: ' || e.routes END
                  || CASE WHEN e.unclaimed_rows > 0
                          THEN '; ' || fmt_money(e.unclaimed, b.currency)
                               || CASE WHEN e.unclaimed_gb IS NOT NULL
                                       THEN ' (' || format('{:,.0f}', e.unclaimed_gb) || ' GB)'
                                       ELSE '' END
                               || ' of transfer on dataset buckets no run claims: '
                               || e.unclaimed_datasets
                          ELSE '' END END
    FROM bill AS b, egress_total AS e, known AS k, run_records AS rr, month_spend AS ms
    UNION ALL
    SELECT 6, 'chase untracked usage', u.dollars, 'untracked compute',
        'finding the owners of the resources in untracked_usage, tagging resources with '
        || 'run ids and logging runs in the tracker; stopping what nobody claims',
        'untracked compute: ' || format('{:,.1f}', u.gpu_hours) || ' GPU-hours, '
        || format('{:,.1f}', u.cpu_hours) || ' CPU-hours'
        || coalesce('; largest ' || t.resource || coalesce(' (' || t.instance_type || ')', '')
                    || ' ' || fmt_money(t.cost, b.currency), '')
    FROM bill AS b, untracked AS u
    LEFT JOIN top_untracked AS t ON true
    UNION ALL
    SELECT 7, 'checkpoint before going preemptible', pe.dollars,
        'the cost of the runs restarted from scratch',
        'checkpointing spot runs often enough to resume (and resuming from the checkpoint '
        || 'on restart), or on-demand capacity for runs that cannot; costs checkpoint storage',
        -- the chains dearer than their last run on demand, and those with no on-demand
        -- figure, follow whatever the restarts say (a $0 lever left them out)
        CASE WHEN pe.chains = 0 THEN 'no spot compute billed to a run this month'
             ELSE CASE
                 WHEN rr.restarts = 0
                 THEN counted(pe.chains, 'run chain') || ' used spot capacity, but no run records '
                      || 'restart_of: restarts cannot be told'
                 WHEN pe.from_scratch = 0
                 THEN counted(pe.chains, 'chain') || ' on spot capacity, '
                      || counted(pe.restarts, 'restart') || ', none from scratch'
                 -- restarts from scratch whose repeated runs cost nothing this month (billed
                 -- in another month, or a restart_of naming no recorded run): no chain to
                 -- list, and the list's NULL made the evidence NULL and rolled the month back
                 WHEN pe.dollars = 0
                 THEN counted(pe.from_scratch, 'restart') || ' from scratch in '
                      || counted(pe.chains, 'spot chain') || ', repeating no run billed this month'
                 ELSE counted(pe.from_scratch, 'restart') || ' from scratch in '
                      || counted(pe.chains, 'spot chain') || ' repeated '
                      || fmt_money(pe.dollars, b.currency)
                      || ': ' || pe.lost_detail END
                  || CASE WHEN pe.dearer > 0 OR pe.dollars <> 0
                          THEN '; ' || counted(pe.dearer, 'chain') || ' cost more than '
                               || CASE WHEN pe.dearer = 1 THEN 'its' ELSE 'their' END
                               || ' last run on demand'
                               || coalesce(': ' || pe.dearer_detail, '')
                          ELSE '' END
                  || CASE WHEN pe.unpriced > 0
                          THEN '; ' || counted(pe.unpriced, 'chain') || ' whose last run has no on-demand '
                               || 'price this month (no compute row, or a line without '
                               || 'ListCost): ' || pe.unpriced_detail
                          ELSE '' END END
    FROM bill AS b, preempted AS pe, run_records AS rr
    UNION ALL
    SELECT 8, 'use a cheaper card', i.dollars, 'the idle GPU cost',
        'benchmarking the model on another accelerator (or fewer GPUs per run), possibly '
        || 'longer runs; last because the per-hour price explains little of the bill',
        CASE WHEN i.runs = 0
             THEN 'no run reports GPU utilization (runs column gpu_utilization, MLflow '
                  || 'system/gpu_*_utilization_percentage); tracked GPU cost this month '
                  || fmt_money(g.cost, b.currency)
             ELSE counted(i.runs, 'run') || CASE WHEN i.runs = 1 THEN ' reports' ELSE ' report' END
                  || ' utilization: ' || format('{:,.1f}', i.idle_hours)
                  || ' of ' || format('{:,.1f}', i.paid_hours)
                  || ' GPU-hours paid for sat idle' END
    FROM bill AS b, idle AS i, tracked_gpu AS g
),
levers AS (
    -- a saving is never below 0: a credit is 0, saying so (a figure below the currency's
    -- smallest unit either way — a cent, a yen — is a float sum's crumbs, 0 without a note)
    SELECT
        *,
        CASE WHEN figure > 0 THEN figure ELSE 0.0 END AS dollars,
        CASE WHEN round(figure * power(10, b.digits)) < 0
             THEN credit_of || ' is a credit this month ('
                  || fmt_money(figure, b.currency) || '): nothing to '
                  || CASE WHEN lever = 'chase untracked usage' THEN 'chase' ELSE 'save' END
                  || '; '
             ELSE '' END AS credit_note
    FROM bill AS b, levers_figures
)
SELECT
    CAST($month AS DATE) AS month,
    CAST(row_number() OVER (ORDER BY (lever = 'use a cheaper card'),
                                     round(dollars * power(10, b.digits)) DESC,
                                     mission_order) AS INTEGER) AS rank,
    lever,
    dollars,
    what_it_costs_to_pull,
    credit_note || evidence AS evidence
FROM bill AS b, levers
