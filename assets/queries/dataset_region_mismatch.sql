-- The datasets whose configured region the month's bill contradicts (the `egress` step's
-- warning and its `dataset_region_mismatch` metadata): the transfer lines (SPEC §6 rule 5,
-- macros.sql `attribution_rule`) on a dataset's bucket, matched as rule 5 matches it
-- (`claim_key`), whose region (RegionId: CUR's product_region_code, FOCUS's RegionId, GCP's
-- location) is another than the config's, compared as rule 5 compares regions
-- (`region_key`). The config stays what rule 5 and `egress` price by: this only says so.
-- Reads billing_facts and the temp table config_datasets. Parameter: the month.
WITH transfer AS (
    SELECT ResourceId, RegionId, EffectiveCost
    FROM billing_facts
    WHERE month = ? AND x_CostComponent = 'network'
      AND attribution_rule(ChargeCategory, CommitmentDiscountStatus, x_ResourceKind,
                           x_CostComponent) = 'bucket_transfer'
),
judged AS (
    SELECT ds.name, ds.bucket, ds.region, t.RegionId, t.EffectiveCost,
           -- a line without a region says nothing against the config
           coalesce(region_key(t.RegionId) <> ''
                    AND region_key(t.RegionId) <> region_key(ds.region), false) AS elsewhere
    FROM config_datasets AS ds
    JOIN transfer AS t ON claim_key(t.ResourceId) = claim_key(ds.bucket)
)
SELECT name, bucket, region,
       list(DISTINCT RegionId ORDER BY RegionId) FILTER (WHERE elsewhere),
       count(*) FILTER (WHERE elsewhere),
       coalesce(fsum(EffectiveCost) FILTER (WHERE elsewhere), 0),
       count(*), coalesce(fsum(EffectiveCost), 0)
FROM judged
GROUP BY name, bucket, region
HAVING bool_or(elsewhere)
ORDER BY name
