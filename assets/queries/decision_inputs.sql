-- What a decision table that reads the runs' costs is computed from (decisions.py), as one
-- text: every month's bill, runs and attribution as their writers noted them in
-- input_tokens (the same runs, attribution or bill lines written again give the same
-- token), the search approvals, the config's datasets, and what
-- the month's decision tables it reads were computed from (their decision_basis rows,
-- written before it in the run). Every month, not only this one: the searches' costs to date
-- read the earlier months. decision_basis keeps it beside the rows the table wrote.
-- Parameters: $month, $parents (the decision tables the table reads, comma-separated).
SELECT concat_ws(' ',
    (SELECT count(*) || ':'
            || coalesce(string_agg(month || '/' || input || '=' || token, ','
                                   ORDER BY month, input), '')
     FROM input_tokens),
    -- (a row's hash with its text reversed: DuckDB's hash of a text alone is equal for
    -- texts such as `sweep-10/trial-30` and `sweep-17/trial-40`, warehouse.py `row_hash`)
    (SELECT count(*) || ':' || coalesce(sum(hash(a, reverse(a::VARCHAR))), 0)
     FROM search_approvals AS a),
    (SELECT count(*) || ':' || coalesce(sum(hash(d, reverse(d::VARCHAR))), 0)
     FROM config_datasets AS d),
    (SELECT count(*) || ':'
            || coalesce(string_agg(table_name || '=' || inputs || '/' || rows, ','
                                   ORDER BY table_name), '')
     FROM decision_basis WHERE month = $month AND list_contains(string_split($parents, ','), table_name))
) AS inputs
