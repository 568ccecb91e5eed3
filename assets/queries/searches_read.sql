-- What a month's searches (search_trend) are computed from, as one digest: every month's bill,
-- runs and attribution up to $last as their writers noted them (input_tokens). Kept when the
-- month's search_trend is written, as its decision_basis row `search_trend:read`
-- (decisions.py); a report of the month compares it with the digest now: a month up to it
-- changed since (a run's metric restated moves a search's best, improvement and saturation,
-- which no cost shows; period_searches.sql `stale` compares the costs). Later months are not
-- read: their materialization changes nothing here. Parameters: $last.
SELECT sha256(count(*) || ':' || coalesce(string_agg(month || '/' || input || '=' || token, ','
                                                     ORDER BY month, input), '')) AS digest
FROM input_tokens
WHERE month <= $last
