"""A `runs_file` tracker (CSV, parquet, JSONL) → `tracker_runs` (SPEC §4, §11)."""

from __future__ import annotations

import csv
import json
import logging
from datetime import UTC, date, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cost_pipeline.config import parse_config
from cost_pipeline.ingest.runs import build_tracker_runs
from cost_pipeline.ingest.sources import SourceError

JULY = date(2026, 7, 1)
LOG = logging.getLogger("test")
EVIL_ID = "x'; DROP TABLE tracker_runs; --"
EVIL_MODEL = 'm"odel -- ;\'s'

# the same three runs as a CSV writes them (text) ...
CSV_RUNS = [
    {"run_id": "churn-001", "status": "FINISHED", "start_time": "2026-07-01T12:00:00+02:00",
     "end_time": "2026-07-01T14:00:00Z", "experiment": "churn", "model": "churn",
     "purpose": "production", "resource_ids": "i-0a, i-0b", "gpus": "4",
     "region": "us-east-1", "dataset": "churn-events", "metric_name": "val_auc",
     "metric_value": "0.91", "keep": "true", "deleted": "", "trigger": "Schedule"},
    {"run_id": "churn-s1-7", "status": "SCHEDULED", "start_time": "2026-07-02 08:30:00",
     "end_time": "", "experiment": "churn", "model": "churn", "purpose": "",
     "search_id": "s-1", "seed": "3", "config_id": "cfg-7",
     "resource_ids": '["i-0c", "vol-0d"]', "gpus": "", "keep": "", "deleted": "false"},
    {"run_id": EVIL_ID, "status": "killed", "start_time": "2026-07-03T00:00:00Z",
     "end_time": "2026-07-03T01:00:00Z", "experiment": "exp'1", "model": EVIL_MODEL,
     "purpose": "adhoc", "resource_ids": "", "gpus": "0", "keep": "no", "deleted": "TRUE",
     "parent_run_id": "churn-001", "restart_of": "churn-001", "resumed_from": " "},
]
# ... and typed, as parquet and JSONL carry them
TYPED_RUNS = [
    {"run_id": "churn-001", "status": "FINISHED",
     "start_time": datetime(2026, 7, 1, 10, tzinfo=UTC),
     "end_time": datetime(2026, 7, 1, 14, tzinfo=UTC), "experiment": "churn",
     "model": "churn", "purpose": "production", "resource_ids": ["i-0a", "i-0b"], "gpus": 4,
     "region": "us-east-1", "dataset": "churn-events", "metric_name": "val_auc",
     "metric_value": 0.91, "keep": True, "deleted": None, "trigger": "schedule"},
    {"run_id": "churn-s1-7", "status": "SCHEDULED",
     "start_time": datetime(2026, 7, 2, 8, 30, tzinfo=UTC), "end_time": None,
     "experiment": "churn", "model": "churn", "purpose": None, "search_id": "s-1",
     "seed": "3", "config_id": "cfg-7", "resource_ids": ["i-0c", "vol-0d"], "gpus": None,
     "keep": None, "deleted": False},
    {"run_id": EVIL_ID, "status": "killed", "start_time": datetime(2026, 7, 3, tzinfo=UTC),
     "end_time": datetime(2026, 7, 3, 1, tzinfo=UTC), "experiment": "exp'1",
     "model": EVIL_MODEL, "purpose": "adhoc", "resource_ids": [], "gpus": 0, "keep": False,
     "deleted": True, "parent_run_id": "churn-001", "restart_of": "churn-001",
     "resumed_from": None},
]

_NONE = dict.fromkeys(
    ("search_id", "seed", "config_id", "region", "dataset", "dataset_region", "input_hash",
     "transform_version", "metric_name", "metric_value", "parent_run_id", "team", "gpus",
     "experiment", "model", "purpose", "end_time", "gpu_utilization", "trigger", "restart_of",
     "resumed_from"))
EXPECTED = {
    "churn-001": {**_NONE, "month": JULY, "run_id": "churn-001", "source": "runs_file",
                  "experiment": "churn", "model": "churn", "purpose": "production",
                  "status": "FINISHED", "start_time": datetime(2026, 7, 1, 10),
                  "end_time": datetime(2026, 7, 1, 14), "resource_ids": ["i-0a", "i-0b"],
                  "gpus": 4, "region": "us-east-1", "dataset": "churn-events",
                  "metric_name": "val_auc", "metric_value": 0.91, "keep": True,
                  "deleted": False, "trigger": "schedule"},
    "churn-s1-7": {**_NONE, "month": JULY, "run_id": "churn-s1-7", "source": "runs_file",
                   "experiment": "churn", "model": "churn", "purpose": "search",
                   "search_id": "s-1", "seed": "3", "config_id": "cfg-7", "status": "RUNNING",
                   "start_time": datetime(2026, 7, 2, 8, 30), "resource_ids": ["i-0c", "vol-0d"],
                   "keep": False, "deleted": False},
    EVIL_ID: {**_NONE, "month": JULY, "run_id": EVIL_ID, "source": "runs_file",
              "experiment": "exp'1", "model": EVIL_MODEL, "purpose": "adhoc",
              "status": "KILLED", "start_time": datetime(2026, 7, 3),
              "end_time": datetime(2026, 7, 3, 1), "resource_ids": [], "gpus": 0,
              "keep": False, "deleted": True, "parent_run_id": "churn-001",
              "restart_of": "churn-001"},
}


@pytest.fixture
def con():
    connection = duckdb.connect()
    yield connection
    connection.close()


def write_csv(path: Path, rows: list[dict], columns: list[str] | None = None) -> Path:
    columns = columns or list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    def encode(value):
        return value.isoformat().replace("+00:00", "Z") if isinstance(value, datetime) else value

    path.write_text("".join(json.dumps({k: encode(v) for k, v in r.items()}) + "\n"
                            for r in rows), encoding="utf-8")
    return path


def write_parquet(path: Path, rows: list[dict]) -> Path:
    types = {"start_time": pa.timestamp("us", tz="UTC"), "end_time": pa.timestamp("us", tz="UTC"),
             "resource_ids": pa.list_(pa.string()), "gpus": pa.int32(),
             "metric_value": pa.float64(), "keep": pa.bool_(), "deleted": pa.bool_()}
    columns = list(dict.fromkeys(k for r in rows for k in r))
    schema = pa.schema([(c, types.get(c, pa.string())) for c in columns])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def load(con, base: Path, *paths: Path, month: date = JULY) -> dict[str, dict]:
    cfg = parse_config({"tracker": [{"kind": "runs_file", "path": p.name} for p in paths]}, base)
    build_tracker_runs(con, cfg, month, LOG)
    cur = con.execute("SELECT * FROM tracker_runs WHERE month = ? ORDER BY run_id", [month])
    names = [d[0] for d in cur.description]
    rows = {row[1]: dict(zip(names, row, strict=True)) for row in cur.fetchall()}
    # the MLflow run id each month records: a runs file has none
    assert all(row.pop("tracker_run_uuid") is None for row in rows.values())
    return rows


@pytest.mark.parametrize("kind", ["csv", "parquet", "jsonl"])
def test_every_format_gives_the_same_runs(tmp_path, con, kind):
    path = tmp_path / f"runs.{kind}"
    {"csv": lambda: write_csv(path, CSV_RUNS), "parquet": lambda: write_parquet(path, TYPED_RUNS),
     "jsonl": lambda: write_jsonl(path, TYPED_RUNS)}[kind]()
    runs = load(con, tmp_path, path)
    assert runs == EXPECTED


def test_jsonl_with_text_values_like_a_csv(tmp_path, con):
    assert load(con, tmp_path, write_jsonl(tmp_path / "runs.jsonl", CSV_RUNS)) == EXPECTED


def test_only_the_required_columns(tmp_path, con):
    path = write_csv(tmp_path / "runs.csv", [
        {"run_id": "r1", "status": "FINISHED", "start_time": "2026-07-05T00:00:00"}])
    assert load(con, tmp_path, path)["r1"] == {
        **_NONE, "month": JULY, "run_id": "r1", "source": "runs_file", "status": "FINISHED",
        "start_time": datetime(2026, 7, 5), "resource_ids": [], "keep": False,
        "deleted": False}


@pytest.mark.parametrize("missing", ["run_id", "status", "start_time"])
def test_a_missing_required_column_is_named(tmp_path, con, missing):
    row = {"run_id": "r1", "status": "FINISHED", "start_time": "2026-07-05T00:00:00"}
    del row[missing]
    path = write_csv(tmp_path / "runs.csv", [row])
    with pytest.raises(SourceError) as err:
        load(con, tmp_path, path)
    assert str(err.value).startswith("runs_file: ") and str(path) in str(err.value)
    assert f"missing required column(s) {missing}" in str(err.value)


@pytest.mark.parametrize(("value", "utc"), [
    ("2026-07-01T12:00:00+02:00", datetime(2026, 7, 1, 10)),
    ("2026-07-01T12:00:00-07:30", datetime(2026, 7, 1, 19, 30)),
    ("2026-07-01T12:00:00Z", datetime(2026, 7, 1, 12)),
    ("2026-07-01T12:00:00.250Z", datetime(2026, 7, 1, 12, 0, 0, 250000)),
    ("2026-07-01 12:00:00", datetime(2026, 7, 1, 12)),
    ("2026-07-01", datetime(2026, 7, 1)),
    ("1782907200", datetime(2026, 7, 1, 12)),        # epoch seconds
    ("1782907200000", datetime(2026, 7, 1, 12)),     # epoch milliseconds
    # compact `%Y%m%d%H%M[%S]`: read as epoch ms they were 2612 and 1976, the run's cost
    # untracked without a word
    ("20260701120000", datetime(2026, 7, 1, 12)),
    ("202607011200", datetime(2026, 7, 1, 12)),
    # a blank before the offset, as Snowflake writes a TIMESTAMP_TZ
    ("2026-07-01 12:00:00.000 +0000", datetime(2026, 7, 1, 12)),
    ("2026-07-01 05:00:00 -07:00", datetime(2026, 7, 1, 12)),
    ("2026-07-01 12:00:00 Z", datetime(2026, 7, 1, 12)),
])
def test_time_zones(tmp_path, con, value, utc):
    path = write_csv(tmp_path / "runs.csv", [
        {"run_id": "r1", "status": "RUNNING", "start_time": value}])
    assert load(con, tmp_path, path)["r1"]["start_time"] == utc


@pytest.mark.parametrize("delimiter", [";", "\t", "|"])
def test_a_runs_csv_separated_otherwise_reads_like_commas(tmp_path, con, delimiter):
    # a spreadsheet saves CSV with semicolons where the decimal mark is a comma (a resource
    # list's commas then need no quotes): both readers take the delimiter that splits the
    # header into run columns (the file was refused: "2 fields, the header has 1")
    from cost_pipeline.ingest.sources.runs_file import read_runs
    from cost_pipeline.ingest.sources.runs_file_sql import read_runs_table

    rows = [{"run_id": "r1", "status": "FINISHED", "start_time": "2026-07-01T00:00:00Z",
             "end_time": "2026-07-01T02:00:00Z", "resource_ids": "i-1,i-2", "gpus": "4"},
            {"run_id": "r2", "status": "RUNNING", "start_time": "2026-07-02", "resource_ids": "",
             "gpus": ""}]
    (tmp_path / "commas").mkdir()
    commas = write_csv(tmp_path / "commas" / "runs.csv", rows)
    path = tmp_path / "runs.csv"
    path.write_text("\n".join(delimiter.join(row) for row in
                              [list(rows[0]), *([r.get(c, "") for c in rows[0]] for r in rows)])
                    + "\n", encoding="utf-8")
    want = load(con, tmp_path / "commas", commas)
    assert load(con, tmp_path, path) == want and want["r1"]["resource_ids"] == ["i-1", "i-2"]
    assert read_runs(path, "runs") == read_runs(commas, "runs")
    assert read_runs_table(path, "runs").to_pylist() == read_runs_table(commas, "runs").to_pylist()


def test_a_resource_list_in_every_spelling(tmp_path, con):
    path = write_csv(tmp_path / "runs.csv", [
        {"run_id": f"r{i}", "status": "RUNNING", "start_time": "2026-07-01", "resource_ids": text}
        for i, text in enumerate(["i-1,i-2", "i-1, i-2 ", '["i-1","i-2"]', "['i-1', 'i-2']",
                                  "i-1;i-2"])])
    assert {r["resource_ids"] == ["i-1", "i-2"] for r in load(con, tmp_path, path).values()} \
        == {True}


def test_end_before_start_names_file_row_and_field(tmp_path, con):
    path = write_csv(tmp_path / "runs.csv", [
        {"run_id": "ok", "status": "FINISHED", "start_time": "2026-07-01T00:00:00Z",
         "end_time": "2026-07-01T01:00:00Z"},
        {"run_id": "bad", "status": "FINISHED", "start_time": "2026-07-01T02:00:00Z",
         "end_time": "2026-07-01T03:00:00+02:00"},
    ])
    with pytest.raises(SourceError) as err:
        load(con, tmp_path, path)
    message = str(err.value)
    assert f"{path} row 3:" in message and "end_time" in message
    assert "before start_time" in message and "\n" not in message
    # the instants as read, in UTC, with the zone said: 03:00+02:00 is 01:00Z
    assert ("end_time '2026-07-01T03:00:00+02:00' (2026-07-01T01:00:00Z) is before start_time "
            "'2026-07-01T02:00:00Z' (2026-07-01T02:00:00Z)") in message


def test_end_half_a_second_before_start_says_the_fraction(tmp_path, con):
    path = write_csv(tmp_path / "runs.csv", [
        {"run_id": "bad", "status": "FINISHED", "start_time": "2026-07-31T22:00:00.5Z",
         "end_time": "2026-07-31T22:00:00"}])
    with pytest.raises(SourceError) as err:
        load(con, tmp_path, path)
    assert ("end_time '2026-07-31T22:00:00' (2026-07-31T22:00:00Z) is before start_time "
            "'2026-07-31T22:00:00.5Z' (2026-07-31T22:00:00.500Z)") in str(err.value)


@pytest.mark.parametrize(("column", "value", "expected"), [
    ("status", "DONE", "status: 'DONE' is not one of"),
    ("gpus", "two", "gpus: 'two' is not a whole number"),
    ("gpus", "1.5", "gpus: '1.5' is not a whole number"),
    ("gpus", "-1", "gpus: '-1' is negative"),
    ("start_time", "yesterday", "start_time: 'yesterday' is not a timestamp"),
    ("end_time", "2026-13-01", "end_time: '2026-13-01' is not a timestamp"),
    ("purpose", "training", "purpose: 'training' is not one of"),
    ("keep", "maybe", "keep: 'maybe' is not true/false"),
    ("metric_value", "high", "metric_value: 'high' is not a number"),
])
def test_a_bad_value_names_row_and_field(tmp_path, con, column, value, expected):
    good = {"run_id": "r1", "status": "FINISHED", "start_time": "2026-07-01T00:00:00Z"}
    path = write_csv(tmp_path / "runs.csv", [good, good | {"run_id": "r2", column: value}],
                     columns=["run_id", "status", "start_time", "end_time", "gpus", "purpose",
                              "keep", "metric_value", "trigger"])
    with pytest.raises(SourceError) as err:
        load(con, tmp_path, path)
    assert str(err.value).startswith(f"runs_file: {path} row 3: {expected}")


def test_bad_values_in_jsonl_and_parquet_name_the_row(tmp_path, con):
    jsonl = tmp_path / "runs.jsonl"
    jsonl.write_text('{"run_id": "a", "status": "RUNNING", "start_time": "2026-07-01"}\n\n'
                     '{"run_id": "b", "status": "RUNNING", "start_time": true}\n')
    with pytest.raises(SourceError, match=r"runs.jsonl line 3: start_time: True is not"):
        load(con, tmp_path, jsonl)
    jsonl.write_text('{"run_id": "a", "status": "RUNNING", "start_time": "2026-07-01"}\n'
                     '{"run_id": "b", "status": \n')
    with pytest.raises(SourceError, match=r"runs.jsonl line 2: bad JSON"):
        load(con, tmp_path, jsonl)
    parquet = write_parquet(tmp_path / "runs.parquet", [
        TYPED_RUNS[0], {**TYPED_RUNS[1], "gpus": -2}])
    with pytest.raises(SourceError, match=r"runs.parquet row 2: gpus: '-2' is negative"):
        load(con, tmp_path, parquet)


def test_bad_json_is_placed_by_the_files_line_and_the_column(tmp_path, con):
    """The parser counts lines within the one it is handed: `runs.jsonl line 2: bad JSON: …
    line 1 column 36` named two lines. The file's line stays, the parser's column with it."""
    jsonl = tmp_path / "runs.jsonl"
    jsonl.write_text('{"run_id":"r1","status":"FINISHED","start_time":"2026-07-01T00:00:00Z"}\n'
                     '{"run_id":"r2","status":"FINISHED",\n')
    with pytest.raises(SourceError) as error:
        load(con, tmp_path, jsonl)
    assert str(error.value) == (f"runs_file: {jsonl} line 2: bad JSON: Expecting property "
                                "name enclosed in double quotes at column 36")
    array = tmp_path / "runs.json"
    array.write_text('[\n  {"run_id": "r1", "status": "FINISHED",\n   "start_time": }\n]\n')
    with pytest.raises(SourceError) as error:
        load(con, tmp_path, array)
    assert str(error.value) == (f"runs_file: {array} line 3: bad JSON: Expecting value at "
                                "column 18")


def test_non_utf8_bytes(tmp_path, con):
    path = tmp_path / "runs.csv"
    path.write_bytes(b"run_id,status,start_time,model\nr1,RUNNING,2026-07-01,caf\xe9\n")
    with pytest.raises(SourceError) as err:
        load(con, tmp_path, path)
    message = str(err.value)
    assert message.startswith(f"runs_file: {path} line 2: not UTF-8")
    assert "\n" not in message


def test_csv_rows_are_numbered_by_the_line_they_start_on(tmp_path, con):
    path = tmp_path / "runs.csv"
    path.write_text('run_id,status,start_time,model\n'
                    'r1,RUNNING,2026-07-01,"two\nlines"\n'
                    'r2,RUNNING,2026-07-01,m\n'
                    'r3,PAUSED,2026-07-01,m\n')
    with pytest.raises(SourceError, match=r"runs.csv row 5: status: 'PAUSED'"):
        load(con, tmp_path, path)


def test_csv_row_with_more_fields_than_the_header(tmp_path, con):
    path = tmp_path / "runs.csv"
    path.write_text("run_id,status,start_time\nr1,RUNNING,2026-07-01,extra\n")
    with pytest.raises(SourceError, match=r"runs.csv row 2: 4 fields, the header has 3"):
        load(con, tmp_path, path)


def test_duplicate_run_ids(tmp_path, con):
    row = {"run_id": "r1", "status": "FINISHED", "start_time": "2026-07-01T00:00:00Z"}
    path = write_csv(tmp_path / "runs.csv", [row, dict(row)])
    assert list(load(con, tmp_path, path)) == ["r1"]          # identical: kept once
    path = write_csv(tmp_path / "runs.csv", [row, row | {"status": "FAILED"}])
    with pytest.raises(SourceError) as err:
        load(con, tmp_path, path)
    assert "row 3" in str(err.value) and "'r1' appears twice with different values" in str(
        err.value)


def test_the_same_run_from_two_trackers_is_kept_once(tmp_path, con, caplog):
    first = write_csv(tmp_path / "a.csv", [
        {"run_id": "r1", "status": "FINISHED", "start_time": "2026-07-01", "model": "churn"}])
    second = write_csv(tmp_path / "b.csv", [
        {"run_id": "r1", "status": "FAILED", "start_time": "2026-07-01", "model": "fraud"},
        {"run_id": "r2", "status": "FAILED", "start_time": "2026-07-01"}])
    with caplog.at_level(logging.WARNING, logger="test"):
        runs = load(con, tmp_path, first, second)
    assert (runs["r1"]["model"], runs["r1"]["source"]) == ("churn", "runs_file")
    assert runs["r2"]["source"] == "runs_file2"
    assert "r1" in caplog.text


def test_the_table_holds_a_run_once_whoever_hands_it_over(con):
    """Every reader takes tracker_runs as one row per run (SPEC §4): runs handed over twice
    are written once, the first source by name, then the earliest start."""
    from cost_pipeline.ingest.sources.runs_file import RUN_SCHEMA

    def run(source, start, model):
        return {"run_id": "r1", "source": source, "status": "FINISHED", "start_time": start,
                "model": model, "keep": False, "deleted": False}

    runs = pa.Table.from_pylist(
        [run("wandb", datetime(2026, 7, 1, tzinfo=UTC), "b"),
         run("mlflow", datetime(2026, 7, 2, tzinfo=UTC), "c"),
         run("mlflow", datetime(2026, 7, 1, 12, tzinfo=UTC), "a"),
         run("mlflow", datetime(2026, 7, 3, tzinfo=UTC), "d") | {"run_id": "r2"}],
        schema=RUN_SCHEMA)
    cfg = parse_config({"tracker": []}, Path("."))
    assert build_tracker_runs(con, cfg, JULY, LOG, runs=runs) == 2
    assert con.execute("SELECT run_id, source, model FROM tracker_runs ORDER BY run_id"
                       ).fetchall() == [("r1", "mlflow", "a"), ("r2", "mlflow", "d")]


def test_the_same_runs_again_stay_unwritten_and_a_change_rewrites_them(tmp_path, con):
    """An MLflow tracker is read on every run: runs read again unchanged are neither deleted
    nor inserted again (their row ids stay) and their token stays; one changed metric
    rewrites the month, as a first write of the new runs writes it."""
    from cost_pipeline.ingest.runs import write_tracker_runs

    def state(connection):
        return connection.execute(
            "SELECT (SELECT list(rowid ORDER BY rowid) FROM tracker_runs WHERE month = $m), "
            "(SELECT token FROM input_tokens WHERE month = $m AND input = 'tracker'), "
            "(SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE 'tracker_runs_staged%')",
            {"m": JULY}).fetchall()[0]

    path = write_csv(tmp_path / "runs.csv", CSV_RUNS)
    cfg = parse_config({"tracker": [{"kind": "runs_file", "path": path.name}]}, tmp_path)
    first = load(con, tmp_path, path)
    before = state(con)
    assert write_tracker_runs(con, cfg, JULY, LOG) == (3, True)
    assert load(con, tmp_path, path) == first and state(con) == before
    assert write_tracker_runs(con, cfg, JULY, LOG, keep_identical=False) == (3, False)
    rewritten = state(con)
    assert rewritten[0] != before[0] and rewritten[1:] == before[1:]  # the same runs
    write_csv(tmp_path / "runs.csv", [{**CSV_RUNS[0], "metric_value": "0.95"}, *CSV_RUNS[1:]])
    assert write_tracker_runs(con, cfg, JULY, LOG) == (3, False)
    after = state(con)
    assert after[0] != rewritten[0] and after[1] != before[1] and after[2] == 0
    with duckdb.connect() as fresh:  # the new runs written into an empty warehouse
        assert load(fresh, tmp_path, path) == load(con, tmp_path, path)
        assert state(fresh)[1] == after[1]
    assert load(con, tmp_path, path)["churn-001"]["metric_value"] == 0.95


def test_a_few_changed_runs_are_written_again_alone(tmp_path, con):
    """Of sixteen runs, one changed, one gone and one new are deleted or written; the
    other fourteen keep their rows (their row ids) and the month is what a first write of
    the new runs writes. More changed runs than `REWRITE_CHANGED_MAX_SHARE` of the month's,
    and the month is written whole."""
    from cost_pipeline.ingest.runs import write_tracker_runs
    from cost_pipeline.warehouse import REWRITE_CHANGED_MAX_SHARE

    def rowids(connection) -> dict[str, int]:
        return dict(connection.execute("SELECT run_id, rowid FROM tracker_runs "
                                       "WHERE month = ?", [JULY]).fetchall())

    runs = [{**CSV_RUNS[0], "run_id": f"r{i}"} for i in range(16)]
    path = write_csv(tmp_path / "runs.csv", runs)
    cfg = parse_config({"tracker": [{"kind": "runs_file", "path": path.name}]}, tmp_path)
    load(con, tmp_path, path)
    before = rowids(con)
    later = [{**runs[0], "metric_value": "0.5"}, *runs[1:15], {**runs[0], "run_id": "r99"}]
    write_csv(tmp_path / "runs.csv", later)
    assert write_tracker_runs(con, cfg, JULY, LOG) == (16, False)
    after = rowids(con)
    assert {r: after[r] for r in after if after.get(r) == before.get(r)} == {
        f"r{i}": before[f"r{i}"] for i in range(1, 15)}
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE "
                       "'tracker_runs_staged%'").fetchall() == [(0,)]
    with duckdb.connect() as fresh:
        assert load(fresh, tmp_path, path) == load(con, tmp_path, path)
        tokens = "SELECT token FROM input_tokens WHERE input = 'tracker'"
        assert fresh.execute(tokens).fetchall() == con.execute(tokens).fetchall()
    # five of sixteen changed: more than the share, every row written again
    assert 5 > REWRITE_CHANGED_MAX_SHARE * 16
    write_csv(tmp_path / "runs.csv", [{**r, "metric_value": "0.6"} if r["run_id"] in
                                      ("r1", "r2", "r3", "r4", "r5") else r for r in later])
    kept = rowids(con)
    assert write_tracker_runs(con, cfg, JULY, LOG) == (16, False)
    assert not set(kept.values()) & set(rowids(con).values())


def test_a_rebuild_replaces_the_snapshot(tmp_path, con):
    path = write_csv(tmp_path / "runs.csv", CSV_RUNS)
    load(con, tmp_path, path)
    write_csv(tmp_path / "runs.csv", CSV_RUNS[:1])
    assert list(load(con, tmp_path, path)) == ["churn-001"]
    assert load(con, tmp_path, path, month=date(2026, 8, 1)).keys() == {"churn-001"}
    (n,) = con.execute("SELECT count(*) FROM tracker_runs").fetchone()
    assert n == 2                                               # one per month snapshot


def test_empty_files(tmp_path, con):
    (tmp_path / "runs.jsonl").write_text("\n")
    assert load(con, tmp_path, tmp_path / "runs.jsonl") == {}
    path = write_csv(tmp_path / "runs.csv", [], columns=["run_id", "status", "start_time"])
    assert load(con, tmp_path, path) == {}


def test_a_tracker_emptied_where_the_month_holds_its_runs_is_refused(tmp_path, con):
    """A runs file cut to its header (an export interrupted, a path moved to an empty one)
    replaced the month's runs by none: every line untracked, the reconciliation failing at
    100 %. As an emptied bill is, it is refused naming the source and how many runs the
    month keeps; the other trackers' runs do not count for it, and `--force`
    (keep_identical false) empties it."""
    from cost_pipeline.ingest.runs import write_tracker_runs

    path = write_csv(tmp_path / "runs.csv", CSV_RUNS)
    other = write_csv(tmp_path / "other.csv", [{**CSV_RUNS[0], "run_id": "elsewhere"}])
    before = load(con, tmp_path, path, other)
    held = sum(1 for r in before.values() if r["source"] == "runs_file")
    write_csv(tmp_path / "runs.csv", [], columns=["run_id", "status", "start_time"])
    with pytest.raises(SourceError) as error:
        load(con, tmp_path, path, other)
    assert str(error.value) == (
        f"runs_file: 2026-07: the tracker holds no run, where the warehouse holds {held} of "
        "the month's from it: its file emptied or a path moved? The month keeps its runs; "
        "`materialize --force` empties them")
    cfg = parse_config({"tracker": [{"kind": "runs_file", "path": "runs.csv"},
                                    {"kind": "runs_file", "path": "other.csv"}]}, tmp_path)
    assert write_tracker_runs(con, cfg, JULY, LOG, keep_identical=False) == (1, False)


def test_an_empty_csv_is_said_to_have_no_header(tmp_path, con):
    """A 0-byte runs.csv was "missing required column(s) run_id, status, start_time"."""
    path = tmp_path / "runs.csv"
    for text in ("", "\n\n"):
        path.write_text(text)
        with pytest.raises(SourceError) as error:
            load(con, tmp_path, path)
        assert str(error.value) == f"runs_file: {path}: empty file: no header"


def test_missing_file(tmp_path, con):
    with pytest.raises(SourceError, match="runs.csv: file not found"):
        load(con, tmp_path, tmp_path / "runs.csv")


def test_pandas_style_parquet_with_nan(tmp_path, con):
    path = tmp_path / "runs.parquet"
    pq.write_table(pa.table({
        "run_id": ["r1"], "status": ["FINISHED"], "start_time": ["2026-07-01T00:00:00Z"],
        "gpus": pa.array([float("nan")]), "metric_value": pa.array([float("nan")]),
        "keep": pa.array([None], pa.bool_()), "resource_ids": pa.array([float("nan")])}), path)
    run = load(con, tmp_path, path)["r1"]
    assert (run["gpus"], run["metric_value"], run["keep"], run["resource_ids"]) == (
        None, None, False, [])


def test_the_runs_transaction_does_not_keep_the_runs(tmp_path):
    """As the listing: the runs reach the run's transaction as a stream, and their run ids
    are checked on a connection of their own, so the runs' Arrow memory goes once the
    caller drops them, not at the commit (a million runs: ~240 MiB)."""
    import gc

    from cost_pipeline.ingest.runs import write_tracker_runs
    from cost_pipeline.ingest.sources.runs_file import RUN_SCHEMA
    from cost_pipeline.warehouse import begin_run_transaction, ensure_schema

    warehouse = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    ensure_schema(warehouse)
    begin_run_transaction(warehouse)
    before = pa.total_allocated_bytes()
    n = 50_000
    runs = pa.table({name: pa.nulls(n, RUN_SCHEMA.field(name).type) for name in RUN_SCHEMA.names}
                    ).set_column(RUN_SCHEMA.get_field_index("run_id"), "run_id",
                                 pa.array([f"run-{i:07d}" for i in range(n)]))
    for name, value in (("status", "FINISHED"), ("source", "runs.csv"),
                        ("start_time", datetime(2026, 7, 2)), ("end_time", datetime(2026, 7, 3)),
                        ("keep", False), ("deleted", False)):
        runs = runs.set_column(RUN_SCHEMA.get_field_index(name), name,
                               pa.array([value] * n, RUN_SCHEMA.field(name).type))
    rows, kept = write_tracker_runs(warehouse, parse_config({}, tmp_path), date(2026, 7, 1),
                                    logging.getLogger("test"), runs=runs)
    assert (rows, kept) == (n, False)
    held = pa.total_allocated_bytes() - before
    assert held > 0.9 * runs.nbytes > 5_000_000
    del runs
    gc.collect()
    assert pa.total_allocated_bytes() - before < held / 10
    warehouse.execute("COMMIT")
    assert warehouse.execute("SELECT count(DISTINCT run_id) FROM tracker_runs").fetchone() == (n,)
    warehouse.close()


def test_a_postgres_array_and_a_nan_metric_twice_read_as_meant(tmp_path, con):
    """`{i-0a,i-0b}` (psql's and COPY's text[]) was split into `{i-0a` and `i-0b}`, claiming
    nothing; the same row twice with `metric_value` nan was refused as conflicting (nan is
    no nan to Python's ==)."""
    path = tmp_path / "runs.csv"
    path.write_text("run_id,status,start_time,resource_ids,metric_value\n"
                    'r1,RUNNING,2026-07-01,"{i-0a,i-0b}",nan\n'
                    'r1,RUNNING,2026-07-01,"{i-0a,i-0b}",nan\n'
                    'r2,RUNNING,2026-07-01,"{""vm a"",i-0c}",0.5\n')
    runs = load(con, tmp_path, path)
    assert runs["r1"]["resource_ids"] == ["i-0a", "i-0b"] and runs["r1"]["metric_value"] is None
    assert runs["r2"]["resource_ids"] == ["vm a", "i-0c"]


def test_the_states_of_a_wandb_export_read_as_the_four_they_mean(tmp_path, con):
    """A W&B export's states (SPEC §3 names W&B exports as a runs_file) were refused:
    `crashed` is FAILED, `preempted` KILLED, `pending` and `preempting` RUNNING."""
    states = {"w1": "crashed", "w2": "preempted", "w3": "pending", "w4": "preempting",
              "w5": "finished", "w6": "Crashed"}
    path = write_csv(tmp_path / "runs.csv", [
        {"run_id": run_id, "status": state, "start_time": "2026-07-01"}
        for run_id, state in states.items()])
    runs = load(con, tmp_path, path)
    assert {run_id: run["status"] for run_id, run in runs.items()} == {
        "w1": "FAILED", "w2": "KILLED", "w3": "RUNNING", "w4": "RUNNING", "w5": "FINISHED",
        "w6": "FAILED"}


def test_a_column_named_twice_in_the_header_is_refused(tmp_path, con):
    """`dataset` renamed `model`: the last copy won without a word, the run's model read as
    its dataset ("churn-events"); `parent_run_id` renamed `gpus` was refused for a run id
    that "is not a whole number". Names are compared as the reader reads them, lower case."""
    path = tmp_path / "runs.csv"
    path.write_text("run_id,status,model,start_time,Model\n"
                    "r1,FINISHED,churn,2026-07-01,churn-events\n")
    with pytest.raises(SourceError) as error:
        load(con, tmp_path, path)
    assert str(error.value) == (f"runs_file: {path}: column model appears twice in the "
                                "header (columns 3 and 5): keep one")
    path.write_text("run_id,gpus,status,start_time,gpus,gpus\n"
                    "r1,4,FINISHED,2026-07-01,s2607-sweep,2\n")
    with pytest.raises(SourceError) as error:
        load(con, tmp_path, path)
    assert str(error.value) == (f"runs_file: {path}: column gpus appears 3 times in the "
                                "header (columns 2, 5 and 6): keep one")


def test_a_column_the_reader_does_not_read_may_be_named_twice(tmp_path, con):
    path = tmp_path / "runs.csv"
    path.write_text("run_id,notes,status,start_time,model,notes,,\n"
                    "r1,a,FINISHED,2026-07-01,churn,b,,\n")
    assert load(con, tmp_path, path)["r1"]["model"] == "churn"


def test_trials_under_a_search_parent_without_a_search_id_are_warned_of(tmp_path, con,
                                                                         caplog):
    """A nested sweep written to a runs file as MLflow logs it: `search_id` on the parent
    only. The trials are no runs of the search (SPEC §4: no column is inherited); that is said
    once, the first five searches named, and no run changes."""
    start = "2026-07-01T00:00:00Z"
    parents = [{"run_id": f"sweep-{n}", "status": "FINISHED", "start_time": start,
                "search_id": f"s{n}", "parent_run_id": ""} for n in range(7)]
    trials = [{"run_id": f"sweep-{n}-t{t}", "status": "FINISHED", "start_time": start,
               "search_id": "", "parent_run_id": f"sweep-{n}"}
              for n in range(7) for t in range(2)]
    tagged = {"run_id": "sweep-0-t9", "status": "FINISHED", "start_time": start,
              "search_id": "s0", "parent_run_id": "sweep-0"}
    adhoc = {"run_id": "nb-child", "status": "FINISHED", "start_time": start,
             "search_id": "", "parent_run_id": "nb"}
    path = write_csv(tmp_path / "runs.csv", [*parents, *trials, tagged, adhoc])
    with caplog.at_level(logging.WARNING, logger="test"):
        runs = load(con, tmp_path, path)
    said = [r.getMessage() for r in caplog.records
            if "whose parent has a search_id" in r.getMessage()]
    assert said == [
        "runs_file: 14 runs whose parent has a search_id (s0, s1, s2, s3, s4, … and 2 more) "
        "carry none themselves: they are not counted as its trials; tag each trial with its "
        "search_id (and model)"]
    assert len(runs) == 7 + 14 + 2
    assert all((runs[t["run_id"]]["search_id"], runs[t["run_id"]]["purpose"]) == (None, None)
               for t in trials)
    assert (runs["sweep-0-t9"]["search_id"], runs["sweep-0-t9"]["purpose"]) == ("s0", "search")
