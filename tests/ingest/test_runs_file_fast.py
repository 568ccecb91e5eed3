"""The SQL path of a runs file (`read_runs_table`) gives exactly what the record-by-record
path (`read_runs`) gives, or steps aside for it: generated CSV and parquet files, plus fixed
cases (offsets, epoch seconds and milliseconds, blank cells, quoted fields, typed parquet)."""

from __future__ import annotations

import csv
import io
import json
import logging
import tempfile
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cost_pipeline.config import parse_config
from cost_pipeline.ingest.runs import runs_table
from cost_pipeline.ingest.sources import SourceError
from cost_pipeline.ingest.sources.runs_file import RUN_COLUMNS, RUN_SCHEMA, read_runs
from cost_pipeline.ingest.sources.runs_file_sql import (
    _PY_WHITESPACE,
    _fast_runs,
    _json_column,
    read_runs_table,
)

REQUIRED = {"run_id": "r1", "status": "FINISHED", "start_time": "2026-07-01T00:00:00Z"}


def record_by_record(path: Path) -> pa.Table | Exception:
    try:
        return pa.Table.from_pylist(read_runs(path, "runs_file"), schema=RUN_SCHEMA)
    except Exception as exc:        # whatever it raises, the SQL path must not answer
        return exc


def assert_same(fast: pa.Table, slow: pa.Table) -> None:
    assert fast.schema == slow.schema
    for column in RUN_COLUMNS:
        assert fast[column].to_pylist() == slow[column].to_pylist(), column
    assert fast.equals(slow)


def check(path: Path, *, fast_expected: bool | None = None) -> pa.Table | None:
    """The SQL answer equals the record-by-record one, or there is none; returns it."""
    slow, fast = record_by_record(path), _fast_runs(path, "runs_file")
    if isinstance(slow, Exception):
        assert fast is None, f"SQL accepted what read_runs refuses: {slow}"
    elif fast is not None:
        assert_same(fast, slow)
    if fast_expected is not None:
        assert (fast is not None) == fast_expected
    return fast


def write_csv(path: Path, rows: list[dict], **options) -> Path:
    columns = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, columns, **options)
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_the_whitespace_is_what_str_strip_removes():
    assert _PY_WHITESPACE == "".join(c for c in map(chr, range(0x110000)) if c.isspace())


@pytest.mark.parametrize(("column", "values"), [
    ("start_time", ["2026-07-01T12:00:00+02:00", "2026-07-01T12:00:00-07:30",
                    "2026-07-01T12:00:00+0530", "2026-07-01T12:00+05", "2026-07-01T12:00:00Z",
                    "2026-07-01 12:00:00 UTC", "2026-07-01T12:00:00.1Z", "2026-07-01T12:00:00.250",
                    "2026-07-01T12:00:00.123456-01:00", "2026-07-01", "2026-07-01T12:00",
                    "2024-02-29T23:59:59+23:59", "1782907200", "1782907200000", "1782907200123",
                    "100000000000", "100000000001", " 2026-07-01 \u3000"]),
    ("end_time", ["", "  ", "2026-07-02T00:00:00+14:00", "4102444800"]),
    ("resource_ids", ["i-1,i-2", "i-1, i-2 ", '["i-1","i-2"]', "['i-1', 'i-2']", "i-1;i-2",
                      " 'i-1' ;\"i-2\" ", '[" i-1 ", "", "vol-é"]', "[]", "", "'i-1',\"i-2\"",
                      "x]", "[['a'], 'b']", "[i-1, vol-2]", "[ i-1 ]", "[true, i-1]",
                      "[arn:aws:sagemaker:us-east-1:1:training-job/j1]",
                      # plain ids: split as they are (`_PLAIN_IDS`)
                      "i-1", "arn:aws:ec2:us-east-1:1:instance/i-1;vol-0a",
                      "//compute.googleapis.com/projects/p/zones/z/instances/vm-1,gs://b/k@v=1+x",
                      "I_1.2,A-b",
                      # blanks around the separators, Python's list repr, DuckDB's list: by
                      # pattern (`_SPACED_IDS`, `_REPR_LIST`, `_BARE_LIST`)
                      "i-1 , i-2", "i-1 ;vol-2", "[ 'i-1' , 'vol-2' ]", "['i-1']",
                      "[i-1,vol-2]", "[NaN, i-1]", "[Infinity1]", "[nullx]"]),
    ("gpus", ["4", "4.0", "4.", "0", "007", "", " 8 "]),
    ("metric_value", ["0.91", "-0.0", "1e-3", ".5", "5.", "+2", "", "0.1000000000000000055511"]),
    ("gpu_utilization", ["0", "100", "100.0", "47.5", ""]),
    ("keep", ["true", "True", "1", "yes", "Y", "t", "false", "0", "no", "N", "f", ""]),
    ("purpose", ["production", "Search", "EVAL", " adhoc ", "preprocess", ""]),
    ("status", ["FINISHED", "running", "Scheduled", " KILLED ", "failed", "crashed", "Preempted",
                "pending", "PREEMPTING"]),
    ("trigger", ["schedule", "Drift", " MANUAL ", "", "cron", "Alert", "data-drift",
                 "cron job", "drift!"]),
    ("restart_of", ["", "r0", " r1 "]),
    ("resumed_from", ["", "s3://ckpt/r0/step-100", " step 7 "]),
    ("model", ["", " a ", 'm"odel, -- ;\'s', "\u3000x\x85", "é", "3.0", "a\x00b"]),
])
def test_clean_csv_values_take_the_sql_path(tmp_path, column, values):
    rows = [REQUIRED | {"run_id": f"r{i}", column: v} for i, v in enumerate(values)]
    check(write_csv(tmp_path / "runs.csv", rows), fast_expected=True)


def test_csv_layouts_that_take_the_sql_path(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_bytes("\ufeffRun_ID , STATUS,start_time,model,,resource_ids\r\n"
                     "r1,FINISHED,2026-07-01,\"a, b\",,\"i-1, i-2\"\r\n"
                     "\r\n"
                     " , ,,\r\n"
                     "r2,RUNNING,2026-07-01\r\n"          # short: the rest is empty
                     "r1,FINISHED,2026-07-01,\"a, b\",,\"i-1, i-2\"\r\n"    # the same again
                     "r3,RUNNING,2026-07-01,,,,\r\n".encode())
    runs = check(path, fast_expected=True)
    assert runs["run_id"].to_pylist() == ["r1", "r2", "r3"]
    assert runs["model"].to_pylist() == ["a, b", None, None]


def test_times_to_the_second_without_a_zone_read_alike(tmp_path):
    # the commonest spelling (`_PLAIN_TIME`, read without the general pattern's captures):
    # every valid one of a grid of dates and times, both separators, as read_runs reads them
    days = [f"{y}-{m}-{d}" for y in ("1000", "1969", "2024", "2026", "8999")
            for m in ("01", "02", "12") for d in ("01", "28", "29", "31")]
    times = [f"{day}{sep}{h}:{mi}:{sec}" for day in days for sep in "T "
             for h in ("00", "09", "23") for mi in ("00", "59") for sec in ("00", "59")]
    valid = [t for t in times if not (t[5:7] == "02" and t[8:10] in ("29", "31")
                                      and not t.startswith("2024")) and t[5:10] != "02-31"]
    rows = [REQUIRED | {"run_id": f"r{i}", "start_time": t, "end_time": "8999-12-31 23:59:59"}
            for i, t in enumerate(valid)]
    runs = check(write_csv(tmp_path / "runs.csv", rows), fast_expected=True)
    assert runs.num_rows == len(valid) > 1000
    assert str(runs["start_time"][0].as_py()) == "1000-01-01 00:00:00"


@pytest.mark.parametrize("value", [
    "2026-07-01 24:00:00", "2026-07-01T23:60:00", "2026-07-01 23:59:60", "2026-07-01T99:99:99",
    "2026-02-29 00:00:00", "2026-02-30T12:00:00", "2026-13-01 00:00:00", "2026-00-10 00:00:00",
    "2026-07-00T00:00:00", "2026-07-32 00:00:00", "0000-01-01 00:00:00", "9999-12-31 23:59:59",
])
def test_impossible_times_to_the_second_are_read_record_by_record(tmp_path, value):
    path = write_csv(tmp_path / "runs.csv", [REQUIRED | {"start_time": value}])
    check(path, fast_expected=False)


@pytest.mark.parametrize("text", [
    'run_id,status,start_time,model\nr1,RUNNING,2026-07-01, "x"\n',      # quote after a blank
    'run_id,status,start_time,model\nr1,RUNNING,2026-07-01,"x" y\n',
    'run_id,status,start_time,model\nr1,RUNNING,2026-07-01,x"y\n',
    'run_id,status,start_time,model\nr1,RUNNING,2026-07-01,"two\nlines"\n',
    'run_id,status,start_time\rr1,RUNNING,2026-07-01\r',                  # old Mac lines
    'run_id,status,start_time,model,model\nr1,RUNNING,2026-07-01,a\n',    # a column twice
    "run_id,status,start_time\nr1,RUNNING,2026-07-01T12:00:00.1234567\n",
    "run_id,status,start_time\nr1,RUNNING,20260701\n",
    "run_id,status,start_time\nr1,RUNNING,2026-07-01t12:00\n",
    "run_id,status,start_time\nr1,RUNNING,0999-07-01\n",
    "run_id,status,start_time,metric_value\nr1,RUNNING,2026-07-01,nan\n",
    "run_id,status,start_time,gpus\nr1,RUNNING,2026-07-01,1_0\n",
    "run_id,status,start_time,resource_ids\nr1,RUNNING,2026-07-01,[1]\n",
    "run_id,status,start_time,resource_ids\nr1,RUNNING,2026-07-01,[true]\n",   # JSON
    "run_id,status,start_time,resource_ids\nr1,RUNNING,2026-07-01,[NaN]\n",    # to Python
    "run_id,status,start_time,resource_ids\nr1,RUNNING,2026-07-01,\"[Infinity, null]\"\n",
    "run_id,status,start_time,resource_ids\nr1,RUNNING,2026-07-01,i-1\u3000i-2\n",
    # a blank or `|` inside a part: kept whole (an Azure id) or ambiguous, never split
    "run_id,status,start_time,resource_ids\nr1,RUNNING,2026-07-01,/subscriptions/s/"
    "resourceGroups/rg/providers/microsoft.insights/metricAlerts/CPU Alert\n",
    "run_id,status,start_time,resource_ids\nr1,RUNNING,2026-07-01,i-1|i-2\n",
    "run_id,status,start_time,resource_ids\nr1,RUNNING,2026-07-01,i-1 i-2\n",
    "run_id,status,start_time,extra\nr1,RUNNING,2026-07-01,a,b\n",
])
def test_what_the_sql_path_cannot_vouch_for_goes_record_by_record(tmp_path, text):
    path = tmp_path / "runs.csv"
    path.write_bytes(text.encode())
    check(path, fast_expected=False)


@pytest.mark.parametrize(("column", "value"), [
    ("status", "DONE"), ("status", "RUNNİNG"), ("gpus", "-1"), ("gpus", "1.5"),
    ("start_time", "yesterday"), ("end_time", "2026-06-30"), ("end_time", "2026-13-01"),
    ("purpose", "training"), ("keep", "maybe"), ("metric_value", "high"),
    ("gpu_utilization", "150"), ("run_id", " "),
])
def test_a_bad_file_gets_the_same_error_as_before(tmp_path, column, value):
    path = write_csv(tmp_path / "runs.csv", [REQUIRED, REQUIRED | {"run_id": "r2", column: value}])
    with pytest.raises(SourceError) as before:
        read_runs(path, "runs_file")
    with pytest.raises(SourceError) as now:
        read_runs_table(path, "runs_file")
    assert str(now.value) == str(before.value)


def test_a_run_twice_with_different_values_is_still_an_error(tmp_path):
    path = write_csv(tmp_path / "runs.csv", [REQUIRED, REQUIRED, REQUIRED | {"status": "FAILED"}])
    with pytest.raises(SourceError, match=r"row 4: run_id 'r1' appears twice with different"):
        read_runs_table(path, "runs_file")


def test_typed_parquet_takes_the_sql_path(tmp_path):
    moment = datetime(2026, 7, 1, 12, 30, 15, 250000, tzinfo=UTC)
    table = pa.table({
        "run_id": pa.array(["a", " b ", "c"]).dictionary_encode(),
        "status": pa.array(["finished", "SCHEDULED", "Killed"], pa.large_string()),
        "start_time": pa.array([moment, moment, datetime(2026, 7, 3, tzinfo=UTC)],
                               pa.timestamp("ns", "Europe/Paris")),
        "end_time": pa.array([date(2026, 7, 2), None, date(2026, 7, 3)], pa.date32()),
        "seed": pa.array([3, None, -1], pa.int64()),
        "config_id": pa.array([3.0, float("nan"), -0.0]),
        "gpus": pa.array([8.0, None, float("nan")], pa.float32()),
        "metric_value": pa.array([0.1, -0.0, float("nan")], pa.float32()),
        "gpu_utilization": pa.array([None, 1, 100], pa.uint8()),
        "resource_ids": pa.array([[" i-1 ", "", None], None, []], pa.large_list(pa.string())),
        "keep": pa.array([1, 0, None], pa.int8()),
        "deleted": pa.array([None, True, False]),
        "team": pa.nulls(3),
        "search_id": pa.array(["s", None, ""]),
        "extra": pa.array([Decimal("1.5")] * 3),       # not read: no matter its type
    })
    pq.write_table(table, tmp_path / "runs.parquet")
    check(tmp_path / "runs.parquet", fast_expected=True)


@pytest.mark.parametrize(("column", "array"), [
    ("model", pa.array([True])),
    ("model", pa.array([1.5])),
    ("metric_value", pa.array([Decimal("1.5")])),
    ("start_time", pa.array([1782907200123456789], pa.timestamp("ns"))),
    ("start_time", pa.array([1782907200.5])),
    ("resource_ids", pa.array([1.0])),
])
def test_parquet_types_the_sql_path_leaves_alone(tmp_path, column, array):
    columns = {k: pa.array([v]) for k, v in REQUIRED.items()} | {column: array}
    pq.write_table(pa.table(columns), tmp_path / "runs.parquet")
    check(tmp_path / "runs.parquet", fast_expected=False)


def test_parquet_column_names_are_matched_exactly(tmp_path):
    path = tmp_path / "runs.parquet"
    pq.write_table(pa.table({"Run_ID": ["r1"], "status": ["FINISHED"],
                             "start_time": ["2026-07-01"]}), path)
    with pytest.raises(SourceError, match=r"missing required column\(s\) run_id$"):
        read_runs_table(path, "runs_file")


def test_trackers_merge_first_one_wins_with_a_warning(tmp_path, caplog):
    first = tmp_path / "a.parquet"
    pq.write_table(pa.table({"run_id": ["r1", "r2"], "status": ["FINISHED"] * 2,
                             "start_time": ["2026-07-01"] * 2, "source": ["wandb", None]}), first)
    write_csv(tmp_path / "b.csv", [REQUIRED | {"run_id": i, "model": "b"}
                                   for i in ("r3", "r2", "r1")])
    cfg = parse_config({"tracker": [{"kind": "runs_file", "path": "a.parquet"},
                                    {"kind": "runs_file", "path": "b.csv"}]}, tmp_path)
    with caplog.at_level(logging.WARNING, logger="test"):
        runs = runs_table(cfg, logging.getLogger("test"))
    assert runs.schema == RUN_SCHEMA
    assert list(zip(runs["run_id"].to_pylist(), runs["source"].to_pylist(), strict=True)) == [
        ("r1", "wandb"), ("r2", "runs_file"), ("r3", "runs_file2")]
    assert [r.getMessage() for r in caplog.records] == [
        "runs_file2: run r2 also comes from runs_file; the first one is kept",
        "runs_file2: run r1 also comes from wandb; the first one is kept"]


# ------------------------------------------------------------------------ generated files
# Each file is valid but for at most one odd cell: a value `read_runs` may or may not take,
# which the SQL path must read alike or leave to it.

MOMENTS = st.datetimes(datetime(1990, 1, 1), datetime(2100, 1, 1))
TIMES = MOMENTS.flatmap(lambda d: st.sampled_from([
    d.isoformat(), d.isoformat(" "), f"{d:%Y-%m-%d}", f"{d:%Y-%m-%dT%H:%M}", d.isoformat() + "Z",
    d.isoformat(" ") + " UTC", d.isoformat() + "+05:30", d.isoformat() + "-0800",
    f"{d:%Y-%m-%dT%H:%M:%S.%f}"[:-3] + "+01", str(int(d.timestamp())),
    str(int(d.timestamp() * 1000)), f" {d:%Y-%m-%d} ",
    f"{d:%Y-%m-%d %H:%M:%S.%f}"[:-3] + " +0000", d.isoformat(" ") + " -07:00",
    d.isoformat(" ") + " Z"]))
ODD_TIMES = st.one_of(MOMENTS.flatmap(lambda d: st.sampled_from([
    f"{d:%Y-%m-%dT%H}", f"{d:%Y%m%d}", f"{d:%Y-%m-%dt%H:%M}", d.isoformat() + "z",
    f"{d.timestamp():.1f}", f"{d:%Y-%m-%dT%H:%M:%S}.1234567", f"{d:%Y-%m-%d}+02:00",
    d.isoformat() + "+02:00:30", f"{d.timestamp() * 1000:.0f}0", d.isoformat() + "+0260"])),
    st.sampled_from(["2026-02-30", "2026-07-01T24:00", "2026-07-01T12:00:60", "99999999",
                     "999999999", "5000000000000", "2026-07-01T12:00:00+24:00", "0001-01-01",
                     "9999-12-31T23:59:59-01:00", "١٧٨٢٩٠٧٢٠٠", "yesterday", "True"]))
TEXT = st.text(st.sampled_from(list("ab ,\"';|[]\t1.0-\\#") + ["\u3000", "\x85", "é", "\r", "\n",
                                                                 "\x00"]), max_size=5)
VALID = {
    "status": st.sampled_from(["FINISHED", "running", "Scheduled", " KILLED ", "failed"]),
    "purpose": st.sampled_from(["production", "Search", " eval", "", "PREPROCESS", "adhoc"]),
    "start_time": TIMES,
    "end_time": st.sampled_from(["", " ", "2200-01-01T00:00:00+01:00", "7258118400"]),
    "resource_ids": st.sampled_from(["i-1, i-2", '["a", " b ", ""]', "['a', 'b']", "a;b,c",
                                     "", "[]", "x]", "[' a ']", '"a"; b', "[a, b1]",
                                     "a ; b"]),
    "gpus": st.sampled_from(["4", "4.0", "0", " 8 ", "", "007", "16."]),
    "metric_value": st.one_of(st.floats(allow_nan=False, allow_infinity=False).map(repr),
                              st.sampled_from(["0.91", "-0.0", "1e-3", ".5", "", " 3 "])),
    "gpu_utilization": st.sampled_from(["0", "100", "100.0", "47.5", "", "1e1"]),
    "keep": st.sampled_from(["true", "1", "Yes", "t", "false", "0", "N", ""]),
    "trigger": st.sampled_from(["schedule", "Drift", " manual", ""]),
}
ODD = {
    "status": st.sampled_from(["DONE", "", "ﬁnished", "RUNNİNG", "run ning"]),
    "purpose": st.sampled_from(["training", "ＥＶＡＬ", "Eval\u3000"]),
    "start_time": ODD_TIMES, "end_time": ODD_TIMES,
    "resource_ids": st.sampled_from(["[a]", "[1, 2]", '["a\\u0041"]', "[\"a\", 'b']",
                                     "a\u3000b", "[true, null]", '["a",]', "[\"a\"] x",
                                     "a;b|c", '"a" b', "i-1 i-2", "x/CPU Alert"]),
    "gpus": st.sampled_from(["-1", "-0", "1.5", "1e0", "+4", "two", "1_0", "99999999999",
                             "\u0664"]),
    "metric_value": st.sampled_from(["nan", "inf", "-Infinity", "1e400", "1_0", "0x10", "-",
                                     "١", "1e", "--1"]),
    "gpu_utilization": st.sampled_from(["150", "-1", "nan", "100.0000000000001", "-0"]),
    "keep": st.sampled_from(["maybe", "ｙ", "TRUE ", "2", "1.0"]),
    "trigger": st.sampled_from(["cron", "ＤＲＩＦＴ", "drift\u3000x", "re train"]),
}
for name in ("deleted",):
    VALID[name], ODD[name] = VALID["keep"], ODD["keep"]
OPTIONAL = ["model", "search_id", "seed", "purpose", "end_time", "resource_ids", "gpus",
            "metric_value", "gpu_utilization", "keep", "deleted", "source", "team", "trigger",
            "restart_of", "resumed_from"]


@st.composite
def csv_files(draw) -> bytes:
    columns = draw(st.permutations(["run_id", "status", "start_time"] + draw(
        st.lists(st.sampled_from(OPTIONAL), unique=True, max_size=6))))
    rows = []
    for i in range(draw(st.integers(0, 5))):
        if rows and draw(st.integers(0, 4)) == 0:
            rows.append(list(draw(st.sampled_from(rows))))      # a run listed twice alike
            continue
        rows.append([f"r{i}" if c == "run_id" else draw(VALID.get(c, TEXT)) for c in columns])
    if rows and draw(st.booleans()):
        row, column = draw(st.integers(0, len(rows) - 1)), draw(st.sampled_from(columns))
        rows[row][columns.index(column)] = draw(ODD.get(column, st.sampled_from(["", " r0"])))
    header = [draw(st.sampled_from([c, c.upper(), f" {c} "])) for c in columns]
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    if draw(st.integers(0, 3)):      # written as a CSV writer writes
        buffer = io.StringIO()
        quoting = draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL]))
        csv.writer(buffer, lineterminator=newline, quoting=quoting).writerows([header, *rows])
        text = buffer.getvalue()
    else:                            # by hand: stray quotes, short rows, blank lines
        lines = [",".join(r[: draw(st.integers(0, len(r)))] if draw(st.booleans()) else r)
                 for r in [header, *rows]]
        text = newline.join(lines) + draw(st.sampled_from(["", newline]))
    return (b"\xef\xbb\xbf" if draw(st.booleans()) else b"") + text.encode()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(csv_files())
def test_generated_csv_files_read_alike(data):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "runs.csv"
        path.write_bytes(data)
        check(path)


LINE = st.text(st.characters(exclude_characters="\r\n", exclude_categories=["Cs"]), max_size=5)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_generated_valid_csv_files_take_the_sql_path(data):
    columns = ["run_id", "status", "start_time"] + data.draw(
        st.lists(st.sampled_from(OPTIONAL), unique=True, max_size=8))
    rows = [{c: f"r{i}" if c == "run_id" else data.draw(VALID.get(c, LINE)) for c in columns}
            for i in range(data.draw(st.integers(1, 5)))]
    with tempfile.TemporaryDirectory() as folder:
        check(write_csv(Path(folder) / "runs.csv", rows), fast_expected=True)


# per column, the Arrow types it comes in (besides text and null) and their values
INTS, WHOLE = st.integers(0, 64), st.integers(0, 64).map(float)
INT64 = st.integers(-2**63, 2**63 - 1)
TYPED = {
    "run_id": {},
    "status": {},
    "start_time": {"time": MOMENTS, "date": st.dates(date(1990, 1, 1), date(2100, 1, 1)),
                   "int": MOMENTS.map(lambda d: int(d.timestamp())),
                   "float": MOMENTS.map(lambda d: float(int(d.timestamp() * 1000)))},
    "end_time": {"time": st.just(datetime(2200, 1, 1)), "date": st.just(date(2200, 1, 1))},
    "resource_ids": {"list": st.lists(st.one_of(st.none(), TEXT), max_size=3),
                     "float": st.just(float("nan"))},
    "gpus": {"int": INTS, "float": WHOLE},
    "metric_value": {"int": INT64, "float": st.floats(allow_infinity=False)},
    "gpu_utilization": {"int": st.integers(0, 100), "float": st.floats(0, 100)},
    "keep": {"bool": st.booleans(), "int": st.integers(0, 1), "float": st.sampled_from(
        [0.0, 1.0, float("nan")])},
    "seed": {"int": INT64, "float": st.one_of(WHOLE, st.just(float("nan")))},
}
ODD_TYPED = {"int": INT64, "float": st.floats(),
             "time": st.datetimes(datetime(1, 1, 1), datetime(9999, 12, 31)),
             "date": st.dates(), "bool": st.booleans(), "list": st.lists(TEXT, max_size=2)}
ARROW = {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), "date": pa.date32(),
         "list": pa.large_list(pa.large_string()), "text": pa.string()}


@st.composite
def parquet_tables(draw) -> pa.Table:
    n = draw(st.integers(0, 4))
    odd = draw(st.integers(0, 2 * n)) if n else None    # which row may get an odd value
    columns = {}
    for column in ["run_id", "status", "start_time"] + draw(st.lists(
            st.sampled_from(OPTIONAL), unique=True, max_size=5)):
        typed = TYPED.get(column, TYPED["seed"] if column in ("model", "team") else {})
        typed = TYPED["keep"] if column == "deleted" else typed
        kinds = [*typed, "text"] + (["null"] if column not in ("run_id", "status") else [])
        kind = draw(st.sampled_from(kinds))
        valid = typed[kind] if kind in typed else VALID.get(column, TEXT)
        cells = [f"r{i}" if column == "run_id" else draw(valid) for i in range(n)]
        if odd is not None and odd < n and draw(st.booleans()):
            cells[odd] = draw(ODD_TYPED[kind] if kind in ODD_TYPED else ODD.get(column, TEXT))
        if kind == "null":
            columns[column] = pa.nulls(n)
        elif kind == "time":
            unit, zone = draw(st.sampled_from(["s", "ms", "us", "ns"])), draw(st.sampled_from(
                [None, "UTC", "Europe/Paris", "-03:30"]))
            cells = [c.replace(tzinfo=UTC) if c and zone else c for c in cells]
            columns[column] = pa.array(cells, pa.timestamp("us", zone)).cast(
                pa.timestamp(unit, zone), safe=False)
        else:
            columns[column] = pa.array(cells, ARROW[kind])
    return pa.table(columns)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parquet_tables())
def test_generated_parquet_files_read_alike(table):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "runs.parquet"
        pq.write_table(table, path)
        check(path)


# ------------------------------------------------------------------------ JSONL and JSON
# The records json reads, column by column in the Arrow types a parquet file would hold them
# in (text, 64-bit integers, floats, booleans, lists of text): the parquet rules then apply.

def write_jsonl(path: Path, records: list, *, array: bool = False) -> Path:
    if array:
        path.write_text(json.dumps(records), encoding="utf-8")
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_a_clean_jsonl_file_takes_the_sql_path(tmp_path):
    records = [{"run_id": f"r{i}", "status": "FINISHED", "model": "m", "seed": i,
                "start_time": "2026-07-01T00:00:00.000Z", "end_time": 1782950400000 + i,
                "resource_ids": ["i-1", " vol-2 ", None, ""], "gpus": 8, "keep": False,
                "deleted": i == 1, "metric_value": [0.5, 1, None][i], "search_id": None}
               for i in range(3)]
    records[2].pop("model")                               # a key missing: NULL
    runs = check(write_jsonl(tmp_path / "runs.jsonl", records), fast_expected=True)
    assert runs["metric_value"].to_pylist() == [0.5, 1.0, None]
    assert runs["resource_ids"].to_pylist() == [["i-1", "vol-2"]] * 3
    assert runs["seed"].to_pylist() == ["0", "1", "2"]
    check(write_jsonl(tmp_path / "runs.json", records, array=True), fast_expected=True)
    check(write_jsonl(tmp_path / "runs.ndjson", records + records[:1]), fast_expected=True)


@pytest.mark.parametrize("value", [
    {"a": 1}, [1, "i-1"], True, 2**63, -2**63 - 1, 2**64 + 1, 1e19, "\udcff", float("inf"),
])
def test_json_values_the_sql_path_leaves_alone(tmp_path, value):
    records = [REQUIRED | {"resource_ids": "i-1", "model": value},
               REQUIRED | {"run_id": "r2", "model": "m", "resource_ids": value}]
    check(write_jsonl(tmp_path / "runs.jsonl", records), fast_expected=False)


def test_nan_as_pythons_json_writes_it_takes_the_sql_path(tmp_path):
    # json.dumps writes a missing metric as NaN, which orjson refuses: json parses the file
    nan = float("nan")
    records = [REQUIRED | {"run_id": f"r{i}", "metric_value": m, "gpu_utilization": u,
                           "seed": seed}
               for i, (m, u, seed) in enumerate([(0.5, 50, 7), (nan, nan, nan), (None,) * 3])]
    runs = check(write_jsonl(tmp_path / "runs.jsonl", records), fast_expected=True)
    assert runs["metric_value"].to_pylist() == [0.5, None, None]
    assert runs["seed"].to_pylist() == ["7", None, None]


def test_orjson_reads_what_json_reads_or_nothing():
    # orjson parses the SQL path's JSON; an integer beyond 64 bits becomes a float there (an
    # integer to json), so a float of 2^63 or more is not vouched for
    assert orjson.loads("-9223372036854775809") == float(-2**63 - 1)
    assert _json_column([1.5, 2**53 - 1, None])[0] == "float"
    assert _json_column([2**63 - 1, -2**63])[0] == "int"
    assert _json_column([float(2**63)]) is None and _json_column([-1e19, 1]) is None
    for text in ("NaN", "1e400", '"\\udcff"'):
        json.loads(text)
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(text)


@pytest.mark.parametrize("text", [
    '{"run_id": "r1", "status": "RUNNING", "start_time": "2026-07-01"} {"run_id": "r2"}\n',
    '{"run_id": "r1", "status": "RUNNING",\n "start_time": "2026-07-01"}\n',
    '{"run_id": "r1", "status": "RUNNING", "start_time": "2026-07-01", "model": "a\u2028b"}\n',
    '["r1", "RUNNING", "2026-07-01"]\n',
    '{"run_id": "r1", "status": "RUNNING"}\n',
    '{"run_id": "r1", "status": "RUNNING", "start_time": "2026-07-01", "gpus": 1}\n'
    '{"run_id": "r2", "status": "RUNNING", "start_time": "2026-07-01", "gpus": "1"}\n',
    "",
])
def test_json_files_the_sql_path_leaves_to_read_runs(tmp_path, text):
    path = tmp_path / "runs.jsonl"
    path.write_text(text, encoding="utf-8")
    check(path, fast_expected=False)


JSON_VALUES = st.one_of(
    st.none(), TEXT, st.integers(-2**64, 2**64), st.floats(), st.booleans(),
    st.lists(st.one_of(st.none(), TEXT), max_size=3), st.just({"k": 1}),
    st.sampled_from([[1], [True], "\udcff"]))


@st.composite
def json_files(draw) -> tuple[str, bytes]:
    columns = ["run_id", "status", "start_time"] + draw(
        st.lists(st.sampled_from(OPTIONAL), unique=True, max_size=6))
    # one type per column mostly (as a writer of typed runs has it), at times any value
    typed = {c: draw(st.sampled_from(list(TYPED.get(c, {})) + ["text", "text"]
                                     + (["null"] if c in OPTIONAL else [])))
             if draw(st.integers(0, 7)) else "any" for c in columns}
    records = []
    for i in range(draw(st.integers(1, 5))):
        if records and draw(st.integers(0, 4)) == 0:
            records.append(dict(draw(st.sampled_from(records))))   # a run listed twice alike
            continue
        record = {}
        for c in columns:
            kind = typed[c]
            if c in OPTIONAL and draw(st.integers(0, 5)) == 0:
                continue                                            # the key left out
            if c == "run_id":
                record[c] = f"r{i}"
            elif kind == "any":
                record[c] = draw(JSON_VALUES)
            elif kind == "null":
                record[c] = None
            elif kind == "text":
                record[c] = draw(VALID.get(c, TEXT))
            else:
                value = draw(TYPED[c][kind])
                record[c] = value.isoformat() if isinstance(value, datetime | date) else value
        records.append(record)
    if draw(st.booleans()):
        return "runs.json", json.dumps(records).encode()
    ascii_only = draw(st.booleans())
    return "runs.jsonl", "".join(
        json.dumps(r, ensure_ascii=ascii_only) + "\n" for r in records).encode(
        "utf-8", "surrogatepass")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_files())
def test_generated_json_files_read_alike(file):
    name, data = file
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        check(path)


# ------------------------------------------------------------------- zoned ISO 8601 times

def test_times_with_a_fraction_or_a_zone_read_alike(tmp_path):
    # `_COMMON_TIME` (read by place, not by the general pattern): fractions of 1-6 digits,
    # `Z` and ±hh:mm offsets up to a day, both separators, as read_runs reads them
    days = ["1000-01-02", "2024-02-29", "2026-07-01", "2026-12-31", "8999-12-31"]
    clocks = ["00:00:00", "09:05:07", "23:59:59"]
    tails = ["", ".1", ".05", ".123", ".1234", ".12345", ".123456", ".000"]
    zones = ["", "Z", "+00:00", "-00:00", "+05:30", "-07:45", "+23:59", "-23:59", "+14:00"]
    times = [f"{d}{sep}{c}{f}{z}" for d in days for sep in "T " for c in clocks
             for f in tails for z in zones]
    rows = [REQUIRED | {"run_id": f"r{i}", "start_time": t} for i, t in enumerate(times)]
    runs = check(write_csv(tmp_path / "runs.csv", rows), fast_expected=True)
    assert runs.num_rows == len(times) > 2000
    read = dict(zip(times, runs["start_time"].to_pylist(), strict=True))
    assert read["2026-07-01T09:05:07.05+05:30"] == datetime(2026, 7, 1, 3, 35, 7, 50000)
    assert read["1000-01-02 00:00:00-23:59"] == datetime(1000, 1, 2, 23, 59)


@pytest.mark.parametrize("value", [
    "2026-07-01T12:00:00+24:00", "2026-07-01T12:00:00+05:60", "2026-07-01T24:00:00Z",
    "2026-07-01T12:60:00.5Z", "2026-02-29T12:00:00Z", "2026-07-01T12:00:00.1234567Z",
    "2026-07-01T12:00:00z", "2026-07-01T12:00:00.Z", "2026-07-01T12:00:00+05:30:00",
])
def test_odd_zoned_times_are_read_record_by_record(tmp_path, value):
    path = write_csv(tmp_path / "runs.csv", [REQUIRED | {"start_time": value}])
    check(path, fast_expected=False)


def test_a_trigger_outside_the_vocabulary_is_kept_as_written_by_both_readers(tmp_path):
    # `cron`, `drift!`: counted as unknown by retrain_cadence; they refused the whole file
    path = write_csv(tmp_path / "runs.csv", [REQUIRED | {"trigger": "Cron"},
                                             REQUIRED | {"run_id": "r2", "trigger": "drift!"}])
    for read in (read_runs, read_runs_table):
        table = read(path, "runs_file")
        table = table if isinstance(table, pa.Table) else pa.Table.from_pylist(table)
        assert sorted(table.column("trigger").to_pylist()) == ["cron", "drift!"]


@pytest.mark.parametrize("header", ["run_id,status,start_time,model,dataset,model",
                                    "run_id,status,start_time,model,dataset, MODEL "])
def test_a_column_named_twice_is_refused_by_both_readers(tmp_path, header):
    """The SQL path stepped aside and the record-by-record one read the last copy."""
    path = tmp_path / "runs.csv"
    path.write_text(f"{header}\nr1,FINISHED,2026-07-01,churn,churn-events,churn-events\n")
    _refused_as_model_twice(path, "columns 4 and 6")


def _refused_as_model_twice(path, columns: str) -> None:
    """Neither reader takes `path`, each naming `model`'s two `columns`."""
    assert _fast_runs(path, "runs_file") is None
    for read in (read_runs, read_runs_table):
        with pytest.raises(SourceError) as error:
            read(path, "runs_file")
        assert str(error.value) == (f"runs_file: {path}: column model appears twice in the "
                                    f"header ({columns}): keep one")


def test_a_parquet_runs_file_naming_a_column_twice_is_refused_as_a_csv_is(tmp_path):
    """A parquet file with `model` twice read "unreadable: Multiple matches for
    FieldRef.Name(model) …", pyarrow's words; it is refused as the CSV is."""
    path = tmp_path / "runs.parquet"
    pq.write_table(pa.Table.from_arrays(
        [pa.array(["r1"]), pa.array(["FINISHED"]), pa.array(["2026-07-01"]),
         pa.array(["churn"]), pa.array(["churn-events"])],
        names=["run_id", "status", "start_time", "model", "model"]), path)
    _refused_as_model_twice(path, "columns 4 and 5")
