-- The macros the SQL files share, defined on the connection with the schema
-- (`ensure_schema`), so that attribution, reconciliation and the checks agree.

-- how attribution treats a billing line (SPEC §6): a run's claim, bucket storage or
-- transfer, or no usage at all
CREATE OR REPLACE TEMP MACRO attribution_rule(charge_category, commitment_status,
                                              resource_kind, component) AS
    CASE
        WHEN charge_category <> 'Usage' OR commitment_status = 'Unused' THEN 'non_usage'
        WHEN resource_kind = 'bucket' AND component = 'storage' THEN 'bucket_storage'
        WHEN resource_kind = 'bucket' AND component = 'network' THEN 'bucket_transfer'
        ELSE 'compute'
    END;

-- whether the attribution reads a line of billing_facts (by rowid): every line; a re-run that
-- attributes again only the lines some changed runs claim (attribution.py) replaces it, for
-- its statements, by a test against `attribution_affected`
CREATE OR REPLACE TEMP MACRO in_attribution_scope(line_rowid) AS true;

-- whether attribution_runs.sql sums a row (by its run_hash — NULL: untracked, unallocated —
-- and rule): every row; a re-run that attributed again only some lines replaces it, for that
-- statement, by a test against the (run, rule) pairs with rows on those lines (attribution.py)
CREATE OR REPLACE TEMP MACRO in_summary_scope(row_run_hash, row_rule) AS true;

-- hours in one unit of a FOCUS row's ConsumedQuantity: a time unit of FOCUS's UnitFormat
-- (days, hours, minutes, seconds, milliseconds, microseconds; `hrs`, `h`, `mins`, `secs`,
-- `s`, `ms` too), optionally preceded by its unit quantity, a positive integer (`1 Hour`,
-- Azure's spelling; `10 Hours`: each unit of the quantity is ten hours); NULL for a unit
-- that is not time. Worked out once per distinct meter (billing_facts_focus.sql).
CREATE OR REPLACE TEMP MACRO consumed_hours_per_unit(unit) AS
    CAST(coalesce(nullif(regexp_extract(lower(trim(coalesce(unit, ''))),
                                        '^([1-9][0-9]{0,8})? ?[a-z]+$', 1), ''), '1') AS DOUBLE)
    * CASE regexp_extract(lower(trim(coalesce(unit, ''))), '^(?:[1-9][0-9]{0,8})? ?([a-z]+)$', 1)
        WHEN 'day' THEN 24.0 WHEN 'days' THEN 24.0
        WHEN 'hour' THEN 1.0 WHEN 'hours' THEN 1.0 WHEN 'hr' THEN 1.0 WHEN 'hrs' THEN 1.0
        WHEN 'h' THEN 1.0
        WHEN 'minute' THEN 1 / 60.0 WHEN 'minutes' THEN 1 / 60.0 WHEN 'min' THEN 1 / 60.0
        WHEN 'mins' THEN 1 / 60.0
        WHEN 'second' THEN 1 / 3600.0 WHEN 'seconds' THEN 1 / 3600.0 WHEN 'sec' THEN 1 / 3600.0
        WHEN 'secs' THEN 1 / 3600.0 WHEN 's' THEN 1 / 3600.0
        WHEN 'millisecond' THEN 1 / 3600e3 WHEN 'milliseconds' THEN 1 / 3600e3
        WHEN 'ms' THEN 1 / 3600e3
        WHEN 'microsecond' THEN 1 / 3600e6 WHEN 'microseconds' THEN 1 / 3600e6
    END;

-- gigabytes (10^9 bytes) per unit of a line's ConsumedUnit, for the data a network line moved
-- (egress.sql): CUR's and AWS FOCUS's `GB`, GCP's `gibibyte`, FOCUS's `GiB`, `TB`, `MB`,
-- bytes, Azure's `1 GB` / `10 GB`; NULL for another unit, and for bits (`Gb`: a capital
-- prefix before a small b, FOCUS's UnitFormat)
CREATE OR REPLACE TEMP MACRO gigabytes_per_unit(unit) AS
    CASE WHEN NOT regexp_full_match(trim(coalesce(unit, '')), '(?:[1-9][0-9]{0,8} ?)?(?:[KMGTP]i?)?b')
         THEN CAST(coalesce(nullif(regexp_extract(lower(trim(coalesce(unit, ''))),
                                                  '^([1-9][0-9]{0,8})? ?[a-z]+$', 1), ''), '1')
                   AS DOUBLE)
              * CASE regexp_extract(lower(trim(coalesce(unit, ''))),
                                    '^(?:[1-9][0-9]{0,8})? ?([a-z]+)$', 1)
                  WHEN 'b' THEN 1e-9 WHEN 'byte' THEN 1e-9 WHEN 'bytes' THEN 1e-9
                  WHEN 'kb' THEN 1e-6 WHEN 'kilobyte' THEN 1e-6 WHEN 'kilobytes' THEN 1e-6
                  WHEN 'mb' THEN 1e-3 WHEN 'megabyte' THEN 1e-3 WHEN 'megabytes' THEN 1e-3
                  WHEN 'gb' THEN 1.0 WHEN 'gigabyte' THEN 1.0 WHEN 'gigabytes' THEN 1.0
                  WHEN 'tb' THEN 1e3 WHEN 'terabyte' THEN 1e3 WHEN 'terabytes' THEN 1e3
                  WHEN 'pb' THEN 1e6 WHEN 'petabyte' THEN 1e6 WHEN 'petabytes' THEN 1e6
                  WHEN 'kib' THEN 1024 / 1e9 WHEN 'kibibyte' THEN 1024 / 1e9
                  WHEN 'kibibytes' THEN 1024 / 1e9
                  WHEN 'mib' THEN 1024 ^ 2 / 1e9 WHEN 'mebibyte' THEN 1024 ^ 2 / 1e9
                  WHEN 'mebibytes' THEN 1024 ^ 2 / 1e9
                  WHEN 'gib' THEN 1024 ^ 3 / 1e9 WHEN 'gibibyte' THEN 1024 ^ 3 / 1e9
                  WHEN 'gibibytes' THEN 1024 ^ 3 / 1e9
                  WHEN 'tib' THEN 1024 ^ 4 / 1e9 WHEN 'tebibyte' THEN 1024 ^ 4 / 1e9
                  WHEN 'tebibytes' THEN 1024 ^ 4 / 1e9
                  WHEN 'pib' THEN 1024 ^ 5 / 1e9 WHEN 'pebibyte' THEN 1024 ^ 5 / 1e9
                  WHEN 'pebibytes' THEN 1024 ^ 5 / 1e9
              END
    END;

-- whether a FOCUS line's text names a network resource no run can own (a NAT or transit
-- gateway, a VPC endpoint, a private link): billing_facts_focus.sql reads it in the line's
-- meter and in its resource id. The words run together, or apart by a blank, `_` or `-`:
-- a usage type's `TransitGateway`, a meter's `Transit Gateway`, an ARN's
-- `transit-gateway/tgw-…` and `vpc-endpoint/vpce-…`
CREATE OR REPLACE TEMP MACRO names_shared_network(text) AS
    regexp_matches(coalesce(text, ''),
                   '(?i)(nat[ _-]?gateway|transit[ _-]?gateway|vpc[ _-]?endpoint|private[ _-]?link|private[ _-]?endpoint)');

-- a training job's instances (SPEC §5; billing_facts_cur2.sql and billing_facts_focus.sql):
-- the most instance-hours per hour any of its rows shows (`instance_hours_per_hour`) rounded
-- up, at least 1 (1e-9 forgives a float's last bit)
CREATE OR REPLACE TEMP MACRO instance_hours_per_hour(amount, period_start, period_end) AS
    amount / (epoch(period_end - period_start) / 3600.0);
CREATE OR REPLACE TEMP MACRO job_instances_at_peak(peak_instance_hours) AS
    CASE WHEN peak_instance_hours > 1 + 1e-9
         THEN CAST(ceil(peak_instance_hours - 1e-9) AS INTEGER) ELSE 1 END;

-- a zoned timestamp (or a naive one, taken in the connection's zone: UTC) as the naive UTC
-- timestamp the tables hold: its epoch read back, exact, without timezone()'s calendar
-- arithmetic (~0.1 s per column per 2M rows); sources/__init__.py `utc_wall_clock_sql` writes
-- the same for the CUR and FOCUS readers, whose views need no macro
CREATE OR REPLACE TEMP MACRO utc_wall_clock(t) AS
    make_timestamp(epoch_us(CAST(t AS TIMESTAMPTZ)));

-- the key a resource is claimed by, the same on the bill's side and the run's: a SageMaker
-- training job's ARN is claimed by the job's name, lowercased as SageMaker writes it in ARNs
-- (`sagemaker:<name>`: no other id takes that form); an Azure resource id (`/subscriptions/…`)
-- is case-insensitive, and Azure's cost data writes it lowercased where a tracker has it as
-- created (`resourceGroups/ML-RG/…`): lowercased; any other id is matched as it is
CREATE OR REPLACE TEMP MACRO claim_key(resource_id) AS
    CASE WHEN resource_id LIKE 'arn:%:sagemaker:%:training-job/%'
         THEN 'sagemaker:' || lower(split_part(resource_id, ':training-job/', 2))
         WHEN resource_id ILIKE '/subscriptions/%' THEN lower(resource_id)
         ELSE resource_id END;

-- the vCPUs a GCP machine type's name states (`n2-standard-8` 8, `n2-custom-8-32768` 8,
-- `c3-highcpu-22-lssd` 22), as a DOUBLE; NULL for a name that states none (`g1-small`)
CREATE OR REPLACE TEMP MACRO vcpus_named(machine_type) AS
    TRY_CAST(coalesce(
        nullif(regexp_extract(coalesce(machine_type, ''), '^[a-z][a-z0-9]*-custom-(\d+)-\d+$', 1), ''),
        nullif(regexp_extract(coalesce(machine_type, ''), '^[a-z][a-z0-9]*-[a-z]+-(\d+)(-lssd|-metal)?$', 1), ''))
        AS DOUBLE);

-- a region as regions are compared (rule 5's transfer claims, egress): without the blanks
-- around it, in lower case — GCS reports a bucket's location in upper case (`US-EAST1`),
-- Compute a VM's region in lower case (`us-east1`), one region. The tables keep the regions as
-- written; only their comparisons read this
CREATE OR REPLACE TEMP MACRO region_key(region) AS
    lower(trim(region, ' ' || chr(9) || chr(10) || chr(11) || chr(12) || chr(13)));

-- the keys a run's listed id claims by: its claim_key and, for a bare name (no `:`, no `/`),
-- the training job of that name — SageMaker keeps a job's name as created (`LLM-SFT-0042`)
-- and bills it under its ARN, lowercased (`…:training-job/llm-sft-0042`); any other bare id
-- (an instance's) is still matched as it is
CREATE OR REPLACE TEMP MACRO claim_keys(listed) AS
    CASE WHEN contains(listed, ':') OR contains(listed, '/') THEN [claim_key(listed)]
         ELSE [claim_key(listed), 'sagemaker:' || lower(listed)] END;

-- a CUR 2.0 line's id (x_SourceLine): the source, the line item and its period, as the
-- export's identity columns give them (the period from the usage dates when the export lacks
-- identity_time_interval)
CREATE OR REPLACE TEMP MACRO cur_source_line(source, line_item_id, time_interval, s, e) AS
    source || ':' || line_item_id || ':' ||
        coalesce(time_interval,
                 strftime(s, '%Y-%m-%dT%H:%M:%SZ') || '/' || strftime(e, '%Y-%m-%dT%H:%M:%SZ'));

-- what a row of a split parent hour bills of `own` (its BilledCost or ListCost) once the pods'
-- split costs are moved out of the hour (billing_facts_cur2_split.sql): a pod's row, the
-- hour's `hour_amount` in the share the pods take (moved / cost) and of that its split cost's
-- share (split / split_cost); a parent's row, `own` less the moved share
CREATE OR REPLACE TEMP MACRO split_amount(pod, own, hour_amount, split, split_cost, moved,
                                          cost) AS
    CASE
        WHEN pod THEN
            CASE WHEN split_cost > 0 AND cost > 0
                 THEN hour_amount * (moved / cost) * (split / split_cost) ELSE 0 END
        WHEN moved > 0 THEN own * (1 - moved / cost)
        ELSE own
    END;

-- the FOCUS ServiceCategory of a cost component (x_CostComponent), as the normalizations
-- that derive it (CUR 2.0, the GCP export) and the CUR split give it
CREATE OR REPLACE TEMP MACRO service_category(component) AS
    CASE component
        WHEN 'gpu' THEN 'AI and Machine Learning' WHEN 'cpu' THEN 'Compute'
        WHEN 'storage' THEN 'Storage' WHEN 'network' THEN 'Networking' ELSE 'Other'
    END;

-- a list of {key, value} entries (a repeated key-value record) as a map of each key's first
-- entry, entries without a key left out: a map takes neither a repeated nor a NULL key
CREATE OR REPLACE TEMP MACRO first_entries_map(entries) AS
    map_from_entries(list_filter(list_filter(entries, lambda p: p.key IS NOT NULL),
        lambda p, i: list_position(list_transform(
            list_filter(entries, lambda q: q.key IS NOT NULL), lambda q: q.key), p.key) = i));

-- a line's tag `key` (the run tag, the team): under the key itself, or as CUR 2.0 (`user_…`) or
-- FOCUS-style exports (`user:…`) spell a user tag (docs/attribution.md). Most lines carry no
-- tags: tested first, the three lookups are skipped for them (at 5M lines, the compute lines'
-- run tags 0.095 → 0.035 s)
CREATE OR REPLACE TEMP MACRO user_tag(tags, key) AS
    CASE WHEN tags IS NOT NULL
         THEN coalesce(tags[key], tags['user_' || key], tags['user:' || key]) END;

-- rule 1: a run's share of a compute line before over-claimed lines are scaled down
CREATE OR REPLACE TEMP MACRO compute_share(s, e, g, d, rs, re, gpus) AS
    least(1.0, (epoch(least(e, re) - greatest(s, rs)) / 3600.0) / d)
      * CASE WHEN gpus IS NOT NULL AND g > 0 THEN least(gpus, g)::DOUBLE / g ELSE 1.0 END;

-- a currency as its ISO code: upper case, no blanks around it (Python's `str.strip()` in
-- report/money.py `symbol_of`: a CUR's `JPY\t` read `JPY\t 1,234.50` beside Python's JPY 1,235)
CREATE OR REPLACE TEMP MACRO currency_code(currency) AS
    upper(trim(currency, ' ' || chr(9) || chr(10) || chr(11) || chr(12) || chr(13)));

-- the decimals of a currency: ISO 4217's minor unit (report/money.py MINOR_UNITS, the same
-- list: a test holds them equal); 2 for any other code and for none. One lookup: the macro's
-- argument is spelled out once (fmt_money repeats it; a CASE of three lists made planning
-- the levers' 25 texts take a second)
CREATE OR REPLACE TEMP MACRO minor_digits(currency) AS
    coalesce(MAP {'BIF': 0, 'CLP': 0, 'DJF': 0, 'GNF': 0, 'ISK': 0, 'JPY': 0, 'KMF': 0,
                  'KRW': 0, 'PYG': 0, 'RWF': 0, 'UGX': 0, 'UYI': 0, 'VND': 0, 'VUV': 0,
                  'XAF': 0, 'XOF': 0, 'XPF': 0,
                  'BHD': 3, 'IQD': 3, 'JOD': 3, 'KWD': 3, 'LYD': 3, 'OMR': 3, 'TND': 3,
                  'CLF': 4, 'UYW': 4}[currency_code(currency)], 2);

-- an amount's magnitude to `digits` decimals as text (`1,234.50`), for `fmt_money`: rounded
-- half up once, from the amount's own digits (a DOUBLE's shortest text, as Python's `repr`:
-- DuckDB rounds that text to the DECIMAL exactly; a cast of the double to DECIMAL(38, 6)
-- first rounded 1234.4999996 to 1234.5, then to JPY 1,235 where report/money.py said 1,234);
-- beyond a DECIMAL(38, 4) (1e34), the double as it is (its cents are noise there); `∞` for
-- an infinite amount
CREATE OR REPLACE TEMP MACRO money_digits(amount, digits) AS
    CASE WHEN isinf(amount) THEN '∞'
         ELSE coalesce(format('{:,.{}f}', abs(CASE digits
             WHEN 0 THEN TRY_CAST(TRY_CAST(CAST(amount AS VARCHAR) AS DECIMAL(38, 0))
                                  AS DECIMAL(38, 4))
             WHEN 3 THEN TRY_CAST(TRY_CAST(CAST(amount AS VARCHAR) AS DECIMAL(38, 3))
                                  AS DECIMAL(38, 4))
             WHEN 4 THEN TRY_CAST(CAST(amount AS VARCHAR) AS DECIMAL(38, 4))
             ELSE TRY_CAST(TRY_CAST(CAST(amount AS VARCHAR) AS DECIMAL(38, 2))
                           AS DECIMAL(38, 4))
             END), digits),
             format('{:,.{}f}', abs(CAST(amount AS DOUBLE)), digits)) END;

-- an amount as text, in the bill's currency (BillingCurrency) to its smallest unit: `$1,234.50`
-- for USD (or no currency), `NOK 1,234.50`, `JPY 1,235`, `KWD 1,234.500` for any other, `−`
-- before a negative amount, `–` for none or NaN; the same rule as report/money.py
-- `in_currency`, so SQL evidence and Python output read alike
CREATE OR REPLACE TEMP MACRO fmt_money(amount, currency) AS
    CASE WHEN amount IS NULL OR isnan(amount) THEN '–' ELSE
        CASE WHEN amount < 0 AND regexp_matches(money_digits(amount, minor_digits(currency)),
                                                '[1-9∞]') THEN '−' ELSE '' END
        || CASE WHEN coalesce(nullif(currency_code(currency), ''), 'USD') = 'USD' THEN '$'
                ELSE currency_code(currency) || ' ' END
        || money_digits(amount, minor_digits(currency))
    END;

-- a figure over its policy limit: `excess` (the figure minus the limit), to 10 decimal places
-- (CUR's own precision for amounts), above 1e-12 of `size` (the larger of the figures): ones
-- equal within the doubles' precision are equal at any size, a cent over is over to $1e9
-- (docs/tables.md, "Policy boundaries"; cost_pipeline/report/limits.py `over_limit` in Python)
CREATE OR REPLACE TEMP MACRO over_limit(excess, size) AS
    round(excess, 10) > 1e-12 * size;

-- what a list shown to its first 10 leaves out, counted: `; … and 2 more models` after
-- `separator`, '' when nothing is left out (evidence texts name at most 10 of a kind)
CREATE OR REPLACE TEMP MACRO more_of(listed, separator, kind) AS
    CASE WHEN listed > 10
         THEN separator || '… and ' || format('{:,}', listed - 10) || ' more ' || kind
              || CASE WHEN listed - 10 = 1 THEN '' ELSE 's' END
         ELSE '' END;

-- a count and its noun, singular for one: `1 config`, `12 configs`
CREATE OR REPLACE TEMP MACRO counted(n, noun) AS
    format('{:,}', n) || ' ' || noun || CASE WHEN n = 1 THEN '' ELSE 's' END;

-- a byte count as the report writes it (cost_pipeline/report/render.py `size`): in the largest
-- binary unit it is at least 1,024 of below TiB (B, KiB, MiB, GiB, TiB), bytes whole and the
-- others to one decimal: 1,062,200 bytes are `1.0 MiB` (one decimal of GiB said `0.0 GiB`). A
-- unit is chosen by the figure as written: 1,048,575 bytes are `1.0 MiB`, not `1,024.0 KiB`
-- (a count of bytes over a power of two is a dyadic fraction, never a tie of `round`)
CREATE OR REPLACE TEMP MACRO byte_size(num_bytes) AS
    CASE WHEN coalesce(num_bytes, 0) < 1024
             THEN format('{:,.0f}', CAST(coalesce(num_bytes, 0) AS DOUBLE)) || ' B'
         WHEN round(num_bytes / 1024.0, 1) < 1024
             THEN format('{:,.1f}', num_bytes / 1024.0) || ' KiB'
         WHEN round(num_bytes / 1048576.0, 1) < 1024
             THEN format('{:,.1f}', num_bytes / 1048576.0) || ' MiB'
         WHEN round(num_bytes / 1073741824.0, 1) < 1024
             THEN format('{:,.1f}', num_bytes / 1073741824.0) || ' GiB'
         ELSE format('{:,.1f}', num_bytes / 1099511627776.0) || ' TiB' END;

-- a policy figure as the decimal the config wrote, never a double's exponent (1e-05 reads
-- 0.00001, 2.0 reads 2): the double's shortest text, as a decimal; from 1e19 on, and under
-- 1e-18 (18 decimals would read 0), that text
CREATE OR REPLACE TEMP MACRO plain_number(x) AS
    CASE WHEN abs(x) < 1e19 AND (x = 0 OR abs(x) >= 1e-18)
         THEN rtrim(rtrim(CAST(CAST(CAST(CAST(x AS DOUBLE) AS VARCHAR) AS DECIMAL(38, 18))
                               AS VARCHAR), '0'), '.')
         ELSE CAST(CAST(x AS DOUBLE) AS VARCHAR) END;

-- the month's BillingCurrency (one per month, SPEC §5; USD when the bill names none)
CREATE OR REPLACE TEMP MACRO bill_currency(for_month) AS
    (SELECT coalesce(min(BillingCurrency), 'USD') FROM billing_facts WHERE month = for_month);

-- each billed month's currency, from its row of `billing_months` (one a month, SPEC §5): what
-- sums across months check before adding amounts (two currencies do not add up). The
-- estimate's read-only query (queries/estimate_basis.sql) spells it out: it has no macros
CREATE OR REPLACE TEMP MACRO month_currencies() AS TABLE
    SELECT month, min(upper(trim(currency))) AS currency FROM billing_months GROUP BY month;

-- Table macros: blocks several SQL files read the same way. Parameters are named apart from
-- the columns (a macro parameter would shadow a column of the same name).

-- one row per run of a month's tracker snapshot: ingest writes a run once (a run two
-- tracker sources, or one source twice, report is kept as the first source by name tells it,
-- then by its earliest start: ingest/runs.py), so a dollar is never counted twice and no
-- reader needs to pick one row per run again
CREATE OR REPLACE TEMP MACRO month_runs(for_month) AS TABLE
    SELECT *
    FROM tracker_runs
    WHERE month = for_month;

-- each production run of the month's snapshot (purpose production, no search_id, a model)
-- with `previous`, its model's previous production run (SPEC §12: what a retrain's metric
-- change is measured against) as {run_id, metric_name, metric_value}, NULL when there is none:
-- the latest one started strictly before it, any month. Of runs started at that one instant,
-- the one that ended last (a run without a recorded end ended at its start), then the greatest
-- run id. A run started at the same instant as this one is never its previous run: two
-- retrains launched together each follow the run before them (ordered by start, then run id,
-- one was measured against the other, and which one followed the ids). One grouping of the
-- starts and an ASOF join: linear in the model's runs, where pairing them was not
-- (retrain_cadence.sql, cost_levers.sql)
CREATE OR REPLACE TEMP MACRO production_runs(for_month) AS TABLE
    WITH production AS (
        SELECT run_id, model, start_time, end_time, trigger, metric_name, metric_value
        FROM month_runs(for_month)
        WHERE purpose = 'production' AND search_id IS NULL AND model IS NOT NULL
    ),
    at_start AS (
        -- the run each start of a model stands for as a later run's previous one
        SELECT model, start_time,
               arg_max({'run_id': run_id, 'metric_name': metric_name,
                        'metric_value': metric_value},
                       (coalesce(end_time, start_time), run_id)) AS run
        FROM production
        GROUP BY model, start_time
    )
    SELECT p.*, s.run AS previous
    FROM production AS p
    ASOF LEFT JOIN at_start AS s ON s.model = p.model AND p.start_time > s.start_time;

-- a trial's seed as seeds are told apart: the tracker records text, and a number is its value
-- ("1", "01" and "1.0" one seed: "01" was another seed, and the first of its config by its
-- text), any other text as written (search_trials, search_shape, search_costs)
CREATE OR REPLACE TEMP MACRO seed_key(seed) AS coalesce(CAST(try_cast(seed AS DOUBLE) AS VARCHAR), seed);

-- the purpose class of a run's cost (SPEC §6): a search_id makes it search whatever the purpose
CREATE OR REPLACE TEMP MACRO run_purpose_class(purpose, search_id) AS
    CASE
        WHEN purpose = 'search' OR search_id IS NOT NULL THEN 'search'
        WHEN purpose = 'production' THEN 'production'
        WHEN purpose = 'preprocess' THEN 'preprocessing'
        ELSE 'other'
    END;

-- the 64-bit key that attribution_rows names a line (line_key, of its x_SourceLine) and a run
-- (run_hash, of its run_id) by: the text's hash combined with its reversed text's. DuckDB's
-- hash of a text alone is weak on texts that differ in a few digits: `sweep-10/trial-30` and
-- `sweep-17/trial-40` share one, as did 8,720 pairs of 100,000 such run ids and 664 of 5M GCP
-- line ids (`…/instances/vm-2101:2026-09-15T16:00:00Z:…`), and ingest refused those months.
-- With the reversed text none of those collide (5M of each shape). The view `attribution`
-- (schema.sql) and the read-only queries (queries/) spell it out: they have no macros.
CREATE OR REPLACE TEMP MACRO key_hash(id) AS hash(id, reverse(id));

-- the `run_hash` that attribution_rows names a run by: key_hash(run_id) (ingest refuses a
-- month where two run ids share one); NULL for no run, where key_hash(NULL) would be a number
CREATE OR REPLACE TEMP MACRO run_hash_of(id) AS CASE WHEN id IS NOT NULL THEN key_hash(id) END;

-- each run id of a month's tracker snapshot with its run_hash
CREATE OR REPLACE TEMP MACRO run_hashes(for_month) AS TABLE
    SELECT DISTINCT run_id, key_hash(run_id) AS run_hash
    FROM tracker_runs
    WHERE month = for_month;

-- the runs that claim compute and transfer (SPEC §6): RUNNING or ended, not a sweep parent;
-- `rs`/`re` their claim's start and end, a RUNNING run running until the month's end
CREATE OR REPLACE TEMP MACRO claimant_runs(for_month, end_of_month) AS TABLE
    SELECT r.*, r.start_time AS rs,
           CASE WHEN r.status = 'RUNNING' THEN CAST(end_of_month AS TIMESTAMP)
                ELSE r.end_time END AS re
    FROM tracker_runs AS r
    WHERE r.month = for_month
      AND (r.status = 'RUNNING' OR r.end_time IS NOT NULL)
      AND NOT EXISTS (SELECT 1 FROM tracker_runs AS child
                      WHERE child.month = for_month AND child.parent_run_id = r.run_id);

-- the resources a claimant lists that no billing line of the month shows (wrong ids, other
-- accounts), with the GPU-hours the run spent on them in the month (its GPUs, else 1):
-- `reconciliation.unbilled_claim_gpu_hours` and the `tracker_claims_billed` check. A run's
-- hours end where the month's bill reaches (`upto`: the latest ChargePeriodEnd of its Usage
-- lines of at most a day — hourly and daily lines; one stated for the whole month, a monthly
-- charge, says nothing of how far the bill reaches — at most the month's end; the month's
-- start when it has none): the bill cannot show a resource for hours it does not cover yet,
-- and a RUNNING run's claim runs to the month's end, so the open month counted its days to
-- come. A complete bill reaches the month's end. From the bill alone, so the same bill and
-- runs give the same figure on any day.
CREATE OR REPLACE TEMP MACRO unbilled_claims(for_month, start_of_month, end_of_month) AS TABLE
    -- the keys the month's bill claims by, read once (each distinct resource once: a month
    -- has far fewer resources than lines)
    WITH billed AS MATERIALIZED (
        SELECT claim_key(ResourceId) AS claimed
        FROM (SELECT DISTINCT ResourceId FROM billing_facts
              WHERE month = for_month AND ResourceId IS NOT NULL)
    ),
    horizon AS (
        SELECT least(coalesce((SELECT max(ChargePeriodEnd) FROM billing_facts
                               WHERE month = for_month AND ChargeCategory = 'Usage'
                                 AND ChargePeriodEnd <= ChargePeriodStart + INTERVAL 1 DAY),
                              CAST(start_of_month AS TIMESTAMP)),
                     CAST(end_of_month AS TIMESTAMP)) AS upto
    )
    SELECT DISTINCT
        c.run_id, c.start_time, c.re, c.gpus, c.listed AS resource_id,
        claim_key(c.listed) AS claim_key,
        epoch(least(c.re, h.upto)
              - greatest(c.start_time, CAST(start_of_month AS TIMESTAMP))) / 3600.0
            * coalesce(nullif(c.gpus, 0), 1) AS gpu_hours
    FROM (SELECT *, unnest(resource_ids) AS listed
          FROM claimant_runs(for_month, end_of_month)) AS c, horizon AS h
    -- hours of the run in the month that the bill covers (none: not listed)
    WHERE least(c.re, h.upto) > greatest(c.start_time, CAST(start_of_month AS TIMESTAMP))
      -- matched as the attribution matches them: by every key of `claim_keys` (its first is
      -- claim_key, its last the training job a bare name may be)
      AND claim_key(c.listed) NOT IN (SELECT claimed FROM billed)
      AND claim_keys(c.listed)[-1] NOT IN (SELECT claimed FROM billed);

-- the month's cost as the bill states it and as the attribution splits it, which must agree
-- to the cent (SPEC §6.6): the cost_conserved check and reconciliation's coverage and totals
CREATE OR REPLACE TEMP MACRO month_cost_totals(for_month) AS TABLE
    SELECT bill.*, split.*
    FROM (SELECT
              coalesce(fsum(EffectiveCost), 0)       AS total_effective_cost,
              coalesce(fsum(abs(EffectiveCost)), 0)  AS effective_cost_magnitude,
              any_value(BillingCurrency)            AS currency
          FROM billing_facts WHERE month = for_month) AS bill,
         (SELECT
              coalesce(fsum(cost) FILTER (WHERE run_hash IS NOT NULL), 0)             AS attributed_cost,
              coalesce(fsum(cost) FILTER (WHERE purpose_class = 'untracked'), 0)      AS untracked_cost,
              coalesce(fsum(cost) FILTER (WHERE purpose_class = 'unallocated'), 0)    AS unallocated_cost
          FROM attribution_rows WHERE month = for_month) AS split;

-- a bucket's dated snapshots of the month (a day may come more than once): the days its
-- objects were listed, and the days an S3 Inventory report of it listed none
-- (checkpoint_snapshots: that day's snapshot is empty). The attribution (SPEC §6 rule 4) and
-- `month_end_snapshot` read them.
CREATE OR REPLACE TEMP MACRO dated_snapshots(for_month) AS TABLE
    SELECT bucket, snapshot_date FROM checkpoint_inventory
    WHERE month = for_month AND snapshot_date IS NOT NULL
    UNION ALL
    SELECT bucket, snapshot_date FROM checkpoint_snapshots WHERE month = for_month;

-- the reports of each bucket that several S3 Inventory configurations report (AWS lets each
-- cover the whole bucket or a prefix of it, daily or weekly), from checkpoint_snapshots (a
-- row per report and listing, `source` the `inventory` entry, which reads one configuration;
-- reading each object's `source` instead tripled the time)
CREATE OR REPLACE TEMP MACRO configured_reports(for_month) AS TABLE
    SELECT DISTINCT bucket, source, snapshot_date
    FROM checkpoint_snapshots
    WHERE month = for_month
      AND bucket IN (SELECT bucket FROM checkpoint_snapshots WHERE month = for_month
                     GROUP BY bucket HAVING count(DISTINCT source) > 1);

-- the buckets dated reports (S3 Inventory, a plain CSV's snapshot_date days) and an undated
-- listing (`s3`, `local`, a plain CSV without snapshot_date: the bucket as it is now) both
-- list this month. Such a bucket is on a day the dated reports' snapshot plus the undated
-- objects no dated configuration covers (`undated_uncovered`)
CREATE OR REPLACE TEMP MACRO mixed_buckets(for_month) AS TABLE
    SELECT bucket FROM checkpoint_inventory
    WHERE month = for_month AND snapshot_date IS NULL
    GROUP BY bucket
    HAVING bucket IN (SELECT bucket FROM dated_snapshots(for_month));

-- the buckets where rule 4 reads the objects' `key` and `source` (the dated configurations'
-- scopes, `configuration_scopes`, and the keys they cover): those several configurations
-- report and those an undated listing lists too. attribution.py `_inputs` hashes their
-- objects' keys and sources
CREATE OR REPLACE TEMP MACRO scoped_buckets(for_month) AS TABLE
    SELECT bucket FROM configured_reports(for_month)
    UNION
    SELECT bucket FROM mixed_buckets(for_month);

-- the longest text both `a` and `b` start with
CREATE OR REPLACE TEMP MACRO common_prefix(a, b) AS
    left(a, coalesce(list_position(list_transform(range(1, least(length(a), length(b)) + 1),
                                                  lambda i: substr(a, i, 1) = substr(b, i, 1)),
                                   false) - 1,
                     least(length(a), length(b))));

-- the keys each dated configuration of such a bucket (`scoped_buckets`: several
-- configurations, or dated reports and an undated listing) covers, as far as its reports
-- show: a report names no prefix filter (AWS's manifest has none), but every key it lists
-- starts with the filter, so the configuration covers at least every key starting with the
-- text common to all the keys it listed in the month (that of the first and the last in
-- order): `checkpoints/` for one listing checkpoints only, '' (the whole bucket) once it
-- lists a checkpoint and a dataset, the key itself for one listing a single key. That may
-- be narrower than its filter, never wider. A configuration listing no object this month
-- covers no key. Reads the month's keys of such buckets (3.3M objects: 0.2 s)
CREATE OR REPLACE TEMP MACRO configuration_scopes(for_month) AS TABLE
    SELECT bucket, source, common_prefix(min(key), max(key)) AS scope
    FROM checkpoint_inventory
    WHERE month = for_month AND snapshot_date IS NOT NULL
      AND bucket IN (SELECT bucket FROM scoped_buckets(for_month))
    GROUP BY bucket, source;

-- the undated objects of the buckets dated reports list too (`mixed_buckets`) whose keys no
-- dated configuration covers (`configuration_scopes`): what the undated listing adds to the
-- dated snapshots. A key a dated configuration covers is read from its reports (the newest
-- covering it), not from the undated listing: the reports say when it was there, the
-- listing only that it is there now. Such an object is in the bucket on a day that ends
-- after its `last_modified` (at the month's end: modified before the next month), like an
-- undated listing's objects at the month's end. The undated objects of a bucket no dated
-- report lists do not come here (`month_end_snapshot` reads them as they are): the join
-- with `mixed_buckets` skips their rows unread. A bucket's few scopes are tested as one
-- list (1M undated objects: 0.19 s, where an anti join testing each scope took 0.34 s)
CREATE OR REPLACE TEMP MACRO undated_uncovered(for_month) AS TABLE
    WITH scopes AS (
        SELECT bucket, list(scope) AS scopes
        FROM configuration_scopes(for_month)
        GROUP BY bucket
    )
    SELECT i.*
    FROM checkpoint_inventory AS i
    JOIN mixed_buckets(for_month) AS m ON m.bucket = i.bucket
    LEFT JOIN scopes AS s ON s.bucket = i.bucket
    WHERE i.month = for_month AND i.snapshot_date IS NULL
      AND NOT coalesce(list_bool_or(list_transform(s.scopes,
                                                   lambda scope: starts_with(i.key, scope))),
                       false);

-- the objects of the buckets several configurations report, on `days` (a list of
-- {bucket, snapshot_date}; `day` in the rows): a key is in the bucket on a day when the
-- newest report by then among the configurations covering it (`configuration_scopes`) lists
-- it, with that report's size and time. Each configuration's latest report is read but its
-- keys that a configuration with a newer report covers: a checkpoint deleted on Tuesday is
-- gone from Wednesday, whose daily report of the whole bucket (or of `checkpoints/`) leaves
-- it out, though the weekly report of Sunday lists it; a dataset only the weekly
-- configuration lists stays. A key several of these reports list is so read from one date,
-- where checkpoint_inventory holds it once (`checkpoint_inventory.sql`): it counts once.
-- Read by month_end_snapshot and, for rule 4's days, attribution_claims.sql
CREATE OR REPLACE TEMP MACRO configured_snapshot(for_month, days) AS TABLE
    WITH wanted AS (
        SELECT unnest(days, recursive := true)  -- (SELECT DISTINCT unnest kept one row)
    ),
    latest AS (
        -- each configuration's latest report on or before each day (a day given twice once)
        SELECT d.bucket, d.snapshot_date AS day, r.source, max(r.snapshot_date) AS report_date
        FROM wanted AS d
        JOIN configured_reports(for_month) AS r
          ON r.bucket = d.bucket AND r.snapshot_date <= d.snapshot_date
        GROUP BY ALL
    ),
    newer AS (
        -- for each of them, the scopes of the configurations with a newer one
        SELECT l.bucket, l.day, l.source, s.scope
        FROM latest AS l
        JOIN latest AS n
          ON n.bucket = l.bucket AND n.day = l.day AND n.report_date > l.report_date
        JOIN configuration_scopes(for_month) AS s
          ON s.bucket = n.bucket AND s.source = n.source
    )
    SELECT i.*, l.day
    FROM checkpoint_inventory AS i
    JOIN latest AS l
      ON l.bucket = i.bucket AND l.source = i.source AND l.report_date = i.snapshot_date
    WHERE i.month = for_month
      AND NOT EXISTS (SELECT 1 FROM newer AS n
                      WHERE n.bucket = l.bucket AND n.day = l.day AND n.source = l.source
                        AND starts_with(i.key, n.scope));

-- the buckets as they stood at the month's end: a bucket with daily inventories by its last
-- snapshot of the month (none of its objects when that report listed none), else its
-- undated listings without what was written after the month ended. A bucket that several
-- configurations report is `configured_snapshot` on its last report's day (each
-- configuration's last report of the month, a key as the newest covering it lists it). A
-- bucket an undated listing lists too holds, besides its dated snapshot, the undated
-- objects no dated configuration covers written before the month ended
-- (`undated_uncovered`). The branches are inner joins: DuckDB then skips the row groups of
-- the other days (their snapshot dates), where one outer join read every object of every
-- day (10.8M objects listed daily: 1.8 s → 0.05 s)
CREATE OR REPLACE TEMP MACRO month_end_snapshot(for_month, end_of_month) AS TABLE
    WITH configured AS (
        SELECT bucket, max(snapshot_date) AS last_snapshot
        FROM configured_reports(for_month)
        GROUP BY bucket
    ),
    latest_dated AS (
        SELECT bucket, max(snapshot_date) AS last_snapshot
        FROM dated_snapshots(for_month)
        GROUP BY bucket
        HAVING bucket NOT IN (SELECT bucket FROM configured)
    )
    SELECT i.*
    FROM checkpoint_inventory AS i
    JOIN latest_dated AS d ON d.bucket = i.bucket AND d.last_snapshot = i.snapshot_date
    WHERE i.month = for_month
    UNION ALL
    SELECT * EXCLUDE (day)
    FROM configured_snapshot(for_month, (
        SELECT list({'bucket': bucket, 'snapshot_date': last_snapshot}) FROM configured))
    UNION ALL
    SELECT i.*
    FROM checkpoint_inventory AS i
    WHERE i.month = for_month AND i.snapshot_date IS NULL AND i.last_modified < end_of_month
      AND NOT EXISTS (SELECT 1 FROM latest_dated AS d WHERE d.bucket = i.bucket)
      AND NOT EXISTS (SELECT 1 FROM configured AS d WHERE d.bucket = i.bucket)
    UNION ALL
    SELECT * FROM undated_uncovered(for_month) WHERE last_modified < end_of_month;

-- a run's status at the month's end: the runs file or tracker is read as it is when the month
-- is materialized, so a run that had started before the month's end and ended after it (a
-- month materialized, restated or backfilled after its runs moved on) was RUNNING then; one
-- that ended at the month's end had ended (a run is [start, end), SPEC §6). A stopped run
-- with no end keeps its recorded status (when it ended is unknown), and so does a deleted
-- run: it is dead whatever it was then (the tracker keeps no time of the deletion)
CREATE OR REPLACE TEMP MACRO status_at_month_end(run_status, run_start, run_end, run_deleted,
                                                 end_of_month) AS
    CASE
        WHEN NOT coalesce(run_deleted, false)
             AND run_start < CAST(end_of_month AS TIMESTAMP)
             AND run_end > CAST(end_of_month AS TIMESTAMP) THEN 'RUNNING'
        ELSE run_status
    END;

-- the checkpoint objects the retention policy governs, at the month's end: objects in a run
-- folder under a checkpoint prefix (datasets and other data are not checkpoints), with the
-- state of the run that wrote them at the month's end (`status`: status_at_month_end) and
-- what they cost to keep for the month (the bucket's storage bill spread evenly over every
-- byte listed in it)
--   live       - the run was RUNNING at the month's end (its checkpoints are needed to
--                resume), though it may have ended since
--   production - a FINISHED production run, or one explicitly marked keep=true
--   dead       - every other run the tracker knows: FAILED, KILLED, deleted in the tracker
--                (even one RUNNING at the month's end: the tracker keeps no time of the
--                deletion), or a FINISHED experiment nobody asked to keep
--   orphan     - a run folder whose run the tracker does not know at all
CREATE OR REPLACE TEMP MACRO checkpoint_objects(for_month, end_of_month) AS TABLE
    WITH snapshot AS (
        SELECT * FROM month_end_snapshot(for_month, end_of_month)
    ),
    price AS (
        SELECT
            l.bucket,
            CASE WHEN l.listed_bytes > 0
                 THEN coalesce(c.storage_cost, 0) / l.listed_bytes
                 ELSE 0 END AS cost_per_byte
        FROM (SELECT bucket, sum(size) AS listed_bytes FROM snapshot GROUP BY bucket) AS l
        LEFT JOIN (SELECT ResourceId AS bucket, fsum(EffectiveCost) AS storage_cost
                   FROM billing_facts
                   WHERE month = for_month AND x_CostComponent = 'storage'
                   GROUP BY ResourceId) AS c
          ON c.bucket = l.bucket
    )
    SELECT
        o.bucket, o.key, o.size, o.last_modified, o.run_id, o.checkpoint,
        coalesce(o.checkpoint, o.key) AS checkpoint_name,
        r.status, r.purpose,
        CASE
            WHEN r.run_id IS NULL THEN 'orphan'
            WHEN r.status = 'RUNNING' AND NOT r.deleted THEN 'live'
            WHEN r.status = 'FINISHED' AND NOT r.deleted
                 AND (r.purpose = 'production' OR r.keep) THEN 'production'
            ELSE 'dead'
        END AS run_class,
        o.size * coalesce(p.cost_per_byte, 0) AS monthly_cost
    FROM snapshot AS o
    LEFT JOIN (SELECT * REPLACE (status_at_month_end(status, start_time, end_time, deleted,
                                                     end_of_month) AS status)
               FROM month_runs(for_month)) AS r ON r.run_id = o.run_id
    LEFT JOIN price AS p ON p.bucket = o.bucket
    WHERE o.prefix IS NOT NULL
      AND o.run_id IS NOT NULL;

-- ------------------------------------------------------------------ searches (SPEC §7, §12)
-- One home for what search_costs, search_trend and search_shape say about a search. `for_month`
-- is the month whose tracker snapshot is read, `metric_goal` the config's (max | min).
-- Every figure is as of the month's end: a run belongs to the month's view of its search when
-- it started before then (`search_runs`). The snapshot holds every run the
-- tracker knew when it was read: a month re-materialized later read trials started after it
-- (a February trial's 0.90 as December's best), and disagreed with the month closed on time.

-- the better of a list of metric values for the goal (NULLs ignored)
CREATE OR REPLACE TEMP MACRO best_metric_of(goal, metric_values) AS
    CASE WHEN goal = 'min' THEN list_min(metric_values) ELSE list_max(metric_values) END;

-- the runs other runs name as their parent: sweep controllers, which orchestrate; they are not
-- trials and their metrics are not a search's result. Whenever its children start: the
-- attribution's claimants leave a controller out so (SPEC §6), and a controller whose trials
-- start next month is no trial of this one either
CREATE OR REPLACE TEMP MACRO parent_runs(for_month) AS TABLE
    SELECT DISTINCT parent_run_id AS run_id FROM month_runs(for_month)
    WHERE parent_run_id IS NOT NULL;

-- every run of a search started by the month's end, with `is_parent` (`parent_runs`)
CREATE OR REPLACE TEMP MACRO search_runs(for_month) AS TABLE
    SELECT tr.*, (tr.run_id IN (SELECT run_id FROM parent_runs(for_month))) AS is_parent
    FROM month_runs(for_month) AS tr
    WHERE tr.search_id IS NOT NULL
      AND tr.start_time < CAST(for_month AS TIMESTAMP) + INTERVAL 1 MONTH;

-- one row per search: the model it tunes and the metric it optimizes (its trials' most common
-- ones), when it started (its first run, controller included) and its trials (all months
-- through this one)
CREATE OR REPLACE TEMP MACRO search_identity(for_month) AS TABLE
    WITH sr AS (SELECT * FROM search_runs(for_month)),
    model_pick AS (
        SELECT search_id, model
        FROM (SELECT search_id, model, count(*) AS n
              FROM sr WHERE NOT is_parent AND model IS NOT NULL GROUP BY search_id, model)
        QUALIFY row_number() OVER (PARTITION BY search_id ORDER BY n DESC, model) = 1
    ),
    metric_pick AS (
        SELECT search_id, metric_name
        FROM (SELECT search_id, metric_name, count(*) AS n
              FROM sr WHERE NOT is_parent AND metric_name IS NOT NULL
              GROUP BY search_id, metric_name)
        QUALIFY row_number() OVER (PARTITION BY search_id ORDER BY n DESC, metric_name) = 1
    )
    SELECT
        sr.search_id,
        any_value(mo.model)                                         AS model,
        any_value(mt.metric_name)                                   AS metric_name,
        min(sr.start_time)                                          AS search_start,
        count(DISTINCT sr.run_id) FILTER (WHERE NOT sr.is_parent)   AS runs
    FROM sr
    LEFT JOIN model_pick  AS mo ON mo.search_id = sr.search_id
    LEFT JOIN metric_pick AS mt ON mt.search_id = sr.search_id
    GROUP BY sr.search_id;

-- a search's result: its trials' best value of the search's own metric (a trial that logged
-- another metric is not comparable; one that names no metric is taken to use it)
CREATE OR REPLACE TEMP MACRO search_best(for_month, metric_goal) AS TABLE
    SELECT t.search_id, best_metric_of(any_value(metric_goal), list(t.metric_value)) AS best_metric
    FROM search_runs(for_month) AS t
    JOIN search_identity(for_month) AS s ON s.search_id = t.search_id
    WHERE NOT t.is_parent
      AND (t.metric_name IS NULL OR s.metric_name IS NULL OR t.metric_name = s.metric_name)
    GROUP BY t.search_id;

-- the model's best result before a search started: production runs (not part of any search)
-- and the trials of other searches that had finished by then, on the same metric. A run without
-- a recorded end finished at its start unless it is still RUNNING: a live run's metric is a
-- reading in flight, not a result the search had to beat. A search's sweep controller (a
-- parent of runs) is not a trial: its metric is no search's result (search_best), so it is
-- no previous best either. A search's own trials never count: they start at or after it
-- (`search_start` is its first run's start) and end no earlier than they start (the tracker
-- readers refuse a run that does). One row per search that has a previous best.
-- Each model's results and searches are put in one order of time, a search before a result
-- of the same instant (a result must have finished before the search started), and a
-- search's previous best is the running best up to it: one sort of the model's runs, where
-- pairing every search with every run of its model took 0.7 s at 1,000 searches and 9-11 s
-- at 4,400. Results run in lanes: every result in the lane `any` (a search naming no metric
-- reads it), and in its metric's lane or the lane of results naming none; a search naming a
-- metric reads that metric's lane and the unnamed one.
CREATE OR REPLACE TEMP MACRO search_previous_best(for_month, metric_goal) AS TABLE
    WITH results AS (
        SELECT model, metric_name, metric_value,
               coalesce(end_time, CASE WHEN status IS DISTINCT FROM 'RUNNING' THEN start_time END)
                   AS finished
        FROM month_runs(for_month)
        WHERE model IS NOT NULL AND metric_value IS NOT NULL
          AND ((purpose = 'production' AND search_id IS NULL)
               OR (search_id IS NOT NULL
                   AND run_id NOT IN (SELECT run_id FROM parent_runs(for_month))))
    ),
    events AS (
        SELECT r.model, l.lane, l.lane_metric, r.finished AS happened, 1 AS is_result,
               NULL AS search_id, r.metric_value
        FROM results AS r,
             (SELECT 'any' AS lane, NULL AS lane_metric
              UNION ALL
              SELECT CASE WHEN r.metric_name IS NULL THEN 'unnamed' ELSE 'named' END,
                     r.metric_name) AS l
        WHERE r.finished IS NOT NULL
        UNION ALL
        SELECT s.model, l.lane, l.lane_metric, s.search_start, 0, s.search_id, NULL
        FROM search_identity(for_month) AS s,
             (SELECT 'any' AS lane, NULL AS lane_metric WHERE s.metric_name IS NULL
              UNION ALL
              SELECT 'named', s.metric_name WHERE s.metric_name IS NOT NULL
              UNION ALL
              SELECT 'unnamed', NULL WHERE s.metric_name IS NOT NULL) AS l
        WHERE s.model IS NOT NULL
    ),
    running AS (
        SELECT search_id,
               CASE WHEN metric_goal = 'min' THEN min(metric_value) OVER lane_so_far
                    ELSE max(metric_value) OVER lane_so_far END AS best
        FROM events
        WINDOW lane_so_far AS (PARTITION BY model, lane, lane_metric ORDER BY happened, is_result
                               ROWS UNBOUNDED PRECEDING)
        QUALIFY is_result = 0
    )
    SELECT search_id, best_metric_of(any_value(metric_goal), list(best)) AS previous_best
    FROM running
    GROUP BY search_id
    HAVING previous_best IS NOT NULL;

-- improvement of `best` over `previous`, better = positive (higher for max, lower for min)
CREATE OR REPLACE TEMP MACRO metric_improvement(goal, best, previous) AS
    CASE WHEN goal = 'min' THEN previous - best ELSE best - previous END;

-- each search's latest approval (`cost-pipeline estimate … --approve`): its latest recorded
-- row of search_approvals, of the latest month when two were recorded at one instant. What
-- search_costs holds as the search's estimate, the check searches_within_estimate names the
-- currency of, and the report shows apart when it is in another currency (report/data.py)
CREATE OR REPLACE TEMP MACRO latest_approvals() AS TABLE
    SELECT *
    FROM search_approvals
    QUALIFY row_number() OVER (PARTITION BY search_id ORDER BY recorded_at DESC, month DESC) = 1;

-- the searches active in the month: billed in it, or one of their runs was running at some
-- point of it. A RUNNING run with no end yet is running until the month's end; a run that
-- stopped (FAILED, KILLED, FINISHED) without a recorded end is active only in the month it
-- started: it claims nothing (SPEC §6), and taking it as running forever kept its search
-- "active", at $0 and without an estimate, in every later month
CREATE OR REPLACE TEMP MACRO active_searches(for_month, start_of_month, end_of_month) AS TABLE
    SELECT s.search_id
    FROM attribution_runs AS a
    JOIN search_runs(for_month) AS s ON s.run_id = a.run_id
    WHERE a.month = for_month
    UNION
    SELECT search_id
    FROM search_runs(for_month)
    WHERE start_time < end_of_month
      AND CASE WHEN end_time IS NOT NULL THEN end_time > start_of_month
               WHEN status = 'RUNNING' THEN true
               ELSE start_time >= start_of_month END;

-- ------------------------------------------------------------- a run's exact sums (SPEC §12)
-- each per-run sum of attribution_runs with its amounts as DECIMAL(38, 10): `dollars` its
-- exact cost (`cost_exact`; the double cast when it is NULL), its hours cast alike. What
-- `run_costs` sums for the month and the `cost.*` tags over the months (run_cost_tags.sql),
-- exactly, as the reports sum: the doubles' Σ of five $0.011 is 0.05499999999999999
CREATE OR REPLACE TEMP MACRO exact_run_sums() AS TABLE
    SELECT * REPLACE (CAST(hours AS DECIMAL(38, 10)) AS hours,
                      CAST(accelerator_hours AS DECIMAL(38, 10)) AS accelerator_hours),
           coalesce(cost_exact, CAST(cost AS DECIMAL(38, 10))) AS dollars
    FROM attribution_runs
    WHERE run_id IS NOT NULL;

-- a grouping's exact sums (`exact_run_sums`: `amount` its `dollars`, `of_component` its
-- `component`) split by cost component, as run_costs splits a run's month and the `cost.*`
-- tags a run's months (run_cost_tags.sql): one field each of gpu, cpu, storage, network and
-- other (every other component), the type of `amount`'s Σ (DECIMAL(38, 10)), 0 for none
CREATE OR REPLACE TEMP MACRO component_split(amount, of_component) AS {
    'gpu':     coalesce(sum(amount) FILTER (WHERE of_component = 'gpu'), 0),
    'cpu':     coalesce(sum(amount) FILTER (WHERE of_component = 'cpu'), 0),
    'storage': coalesce(sum(amount) FILTER (WHERE of_component = 'storage'), 0),
    'network': coalesce(sum(amount) FILTER (WHERE of_component = 'network'), 0),
    'other':   coalesce(sum(amount) FILTER (WHERE of_component NOT IN ('gpu', 'cpu', 'storage',
                                                                       'network')), 0)
};

-- the first run of each chain of runs restarting one another (search_trials, preemption.sql):
-- `edge_table` names the relation (a CTE of the caller) of the runs that restart another, one
-- row each: `run_id` and `parent`, the run it restarts (never itself); `start_table` one of
-- `run_id` and `start_time` holding every run of those edges, either end. One row per run of
-- the edges: `root`, the run reached by following `parent` up while there is one, and of runs
-- restarting each other in a cycle, the cycle's earliest start, then lowest run id. Pointer
-- doubling: each walk takes log2 of the runs steps, where following one link at a time took a
-- chain's length
CREATE OR REPLACE TEMP MACRO chain_roots(edge_table, start_table) AS TABLE
    WITH RECURSIVE chain_edges AS (
        SELECT run_id, parent FROM query_table(edge_table)
    ),
    chain_nodes AS (
        -- the restarting runs and the runs they restart: each points at the run it restarts,
        -- a run that restarts none (a chain's first run) at itself
        SELECT run_id, parent, false AS first_run FROM chain_edges
        UNION ALL
        SELECT DISTINCT parent, parent, true FROM chain_edges
        WHERE parent NOT IN (SELECT run_id FROM chain_edges)
    ),
    chain_steps AS (
        -- 2^steps ≥ the nodes: the run that far up is a chain's first run, or a run of the
        -- cycle the runs restart into
        SELECT CAST(ceil(log2(greatest(count(*), 2))) AS INTEGER) AS steps FROM chain_nodes
    ),
    chain_jump USING KEY (run_id) AS (
        -- after step k, `ancestor` is the run 2^k steps up (a chain's first run stays at
        -- itself) and `earliest` the earliest start (then run id) of the 2^k runs from this one
        -- up. The walk takes up to `steps` steps, log2 of the nodes rounded up: a chain of any
        -- length reaches its first run, a cycle of any length goes round whole (no fixed bound
        -- on the steps splits a long chain or cycle into several). A run whose ancestor is a
        -- first run is done (`at_first`): its ancestor no longer moves, and short chains stop
        -- at once
        SELECT n.run_id, n.parent AS ancestor, p.first_run AS at_first,
               {'start': r.start_time, 'run_id': n.run_id} AS earliest, 0 AS step
        FROM chain_nodes AS n
        JOIN chain_nodes AS p ON p.run_id = n.parent
        JOIN query_table(start_table) AS r ON r.run_id = n.run_id
        UNION
        SELECT j.run_id, u.ancestor, u.at_first, least(j.earliest, u.earliest), j.step + 1
        FROM chain_jump AS j
        JOIN recurring.chain_jump AS u ON u.run_id = j.ancestor
        WHERE NOT j.at_first AND j.step < (SELECT steps FROM chain_steps)
    )
    -- the run 2^steps up is the chain's first run, whose 2^steps runs up are itself alone, or a
    -- run of a cycle, every run of which is among its 2^steps runs up: either way the earliest
    -- of those starts the chain
    SELECT j.run_id, u.earliest.run_id AS root
    FROM chain_jump AS j
    JOIN chain_jump AS u ON u.run_id = j.ancestor
    WHERE j.run_id IN (SELECT run_id FROM chain_edges);

-- each trial run (not a sweep controller, all months of the snapshot) of a search active in the
-- month, with its trial (SPEC §12): a run whose restart_of names another trial run of the search
-- with the same config_id and seed (both without one alike) continues that trial, along the
-- whole chain, whether it resumed from a checkpoint or started again from scratch (a KILLED
-- run resumed is one trial run in pieces, not a second seed of its config). A run repeating a
-- seed without restart_of, or restarting a run of another config or seed, is a trial of its
-- own. `trial_id`: the first run of the chain (of a cycle of runs restarting each other, the
-- earliest start, then the lowest run id), the run itself when it continues none. The one
-- grouping search_shape counts its trials by and search_costs its configs (trials ÷ seeds).
-- Only the searches active in the month (`active_searches`) are walked, the ones those tables
-- give a row: every chain of the snapshot took about 0.1 s at 4,400 searches of 10 runs, half
-- of them restarts, their 56 active searches' 0.02-0.05 s
CREATE OR REPLACE TEMP MACRO search_trials(for_month, start_of_month, end_of_month) AS TABLE
    WITH trial_runs AS (
        SELECT search_id, run_id, config_id, seed, restart_of, start_time
        FROM search_runs(for_month)
        WHERE NOT is_parent
          AND search_id IN (SELECT search_id
                            FROM active_searches(for_month, start_of_month, end_of_month))
    ),
    continued AS (
        -- the runs that continue a trial, each with the run it continues (`parent`)
        SELECT r.run_id, p.run_id AS parent
        FROM trial_runs AS r
        JOIN trial_runs AS p
          ON p.run_id = r.restart_of AND p.run_id <> r.run_id AND p.search_id = r.search_id
         AND p.config_id IS NOT DISTINCT FROM r.config_id
         AND seed_key(p.seed) IS NOT DISTINCT FROM seed_key(r.seed)
    )
    -- the trial of each continuing run: its chain's first run (a cycle's earliest start)
    SELECT r.search_id, r.run_id, coalesce(c.root, r.run_id) AS trial_id
    FROM trial_runs AS r
    LEFT JOIN chain_roots('continued', 'trial_runs') AS c ON c.run_id = r.run_id;
