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

-- the key a resource is claimed by, the same on the bill's side and the run's: a SageMaker
-- training job's ARN counts as the job's name, lowercased as SageMaker writes it in ARNs
CREATE OR REPLACE TEMP MACRO claim_key(resource_id) AS
    CASE WHEN resource_id LIKE 'arn:%:sagemaker:%:training-job/%'
         THEN lower(split_part(resource_id, ':training-job/', 2))
         ELSE resource_id END;

-- rule 1: a run's share of a compute line before over-claimed lines are scaled down
CREATE OR REPLACE TEMP MACRO compute_share(s, e, g, d, rs, re, gpus) AS
    least(1.0, (epoch(least(e, re) - greatest(s, rs)) / 3600.0) / d)
      * CASE WHEN gpus IS NOT NULL AND g > 0 THEN least(gpus, g)::DOUBLE / g ELSE 1.0 END;
