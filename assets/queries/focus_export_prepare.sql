-- What the FOCUS export's slices (focus_export.sql) share, computed once over the whole month
-- as temp tables: the export builds and sorts a large month a slice of its lines at a time,
-- and these are facts of the month, not of a slice.
--   focus_services (service, category, subcategory): FOCUS wants one ServiceCategory and one
--     ServiceSubcategory per ServiceName: the ones most of the service's lines have (ties:
--     the first by name). A line's ServiceName is its own, else its provider's (the billing
--     source's name when the source gives none); its category is its ServiceCategory when
--     that is a FOCUS 1.2 value, else the one of its cost component (gpu/cpu → Compute,
--     storage → Storage, network → Networking, other → Other).
--   focus_invoicing (invoiced): whether every line of the month has a final-bill id (FOCUS
--     wants all rows invoiced or none).
--   focus_slice_starts (line_from): where each slice after the first starts, in x_SourceLine
--     order: the lines are cut into runs of about $slice_rows FOCUS rows (a line has a row per
--     attribution row; a bucket's storage line may have thousands, a box-hour one or two).
-- Parameters: $month, $slice_rows.
CREATE OR REPLACE TEMP TABLE focus_services AS
WITH lines AS (
    SELECT
        -- the slices' `service` (focus_export.sql `priced`), which joins on it
        coalesce(nullif(trim(ServiceName), ''), nullif(trim(ProviderName), ''),
                 split_part(x_SourceLine, ':', 1)) AS service,
        CASE WHEN ServiceCategory IN (
                 'AI and Machine Learning', 'Analytics', 'Business Applications', 'Compute',
                 'Databases', 'Developer Tools', 'Multicloud', 'Identity', 'Integration',
                 'Internet of Things', 'Management and Governance', 'Media', 'Migration',
                 'Mobile', 'Networking', 'Security', 'Storage', 'Web', 'Other')
             THEN ServiceCategory
             WHEN x_CostComponent IN ('gpu', 'cpu') THEN 'Compute'
             WHEN x_CostComponent = 'storage' THEN 'Storage'
             WHEN x_CostComponent = 'network' THEN 'Networking'
             ELSE 'Other' END AS line_category,
        x_InstanceUsage, x_ResourceKind
    FROM billing_facts
    WHERE month = $month
),
counted AS (
    SELECT
        service, line_category,
        CASE line_category
            WHEN 'Compute' THEN CASE
                WHEN x_InstanceUsage OR x_ResourceKind = 'instance' THEN 'Virtual Machines'
                WHEN x_ResourceKind = 'container' THEN 'Containers'
                ELSE 'Other (Compute)' END
            WHEN 'Storage' THEN CASE x_ResourceKind
                WHEN 'bucket' THEN 'Object Storage'
                WHEN 'volume' THEN 'Block Storage'
                ELSE 'Other (Storage)' END
            WHEN 'Networking' THEN 'Network Connectivity'
            WHEN 'AI and Machine Learning' THEN 'Machine Learning'
            ELSE 'Other (' || line_category || ')'
        END AS line_subcategory,
        count(*) AS lines
    FROM lines
    GROUP BY ALL
),
service_category AS (
    SELECT service, first(line_category ORDER BY lines DESC, line_category) AS category
    FROM (SELECT service, line_category, sum(lines) AS lines FROM counted GROUP BY ALL)
    GROUP BY service
)
SELECT
    c.service, c.category,
    -- the subcategory most of the lines of the service's category have
    first(n.line_subcategory ORDER BY n.lines DESC, n.line_subcategory) AS subcategory
FROM service_category c
JOIN counted n ON n.service = c.service AND n.line_category = c.category
GROUP BY c.service, c.category;

CREATE OR REPLACE TEMP TABLE focus_invoicing AS
SELECT count(x_InvoiceId) = count(*) AS invoiced FROM billing_facts WHERE month = $month;

CREATE OR REPLACE TEMP TABLE focus_slice_starts AS
WITH line_rows AS (
    SELECT b.x_SourceLine, coalesce(a.parts, 1) AS parts
    FROM billing_facts b
    LEFT JOIN (SELECT line_key, count(*) AS parts FROM attribution_rows
               WHERE month = $month GROUP BY line_key) a
      ON a.line_key = hash(b.x_SourceLine, reverse(b.x_SourceLine))
    WHERE b.month = $month
),
before AS (
    -- the rows of the lines before each line
    SELECT x_SourceLine,
           sum(parts) OVER (ORDER BY x_SourceLine ROWS UNBOUNDED PRECEDING) - parts AS rows_before
    FROM line_rows
)
SELECT min(x_SourceLine) AS line_from
FROM before
GROUP BY rows_before // $slice_rows
HAVING rows_before // $slice_rows > 0;
