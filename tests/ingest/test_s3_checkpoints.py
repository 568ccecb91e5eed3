"""Checkpoint listings from S3 (moto on 127.0.0.1): the `s3` kind lists the whole bucket
page by page; `inventory` reads real S3 Inventory reports (CSV.gz, Parquet or ORC, on S3
or local), one snapshot per report."""

from __future__ import annotations

import gzip
import json
import logging
import os
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cost_pipeline.config import parse_config
from cost_pipeline.ingest.checkpoints import build_checkpoint_inventory
from cost_pipeline.ingest.sources import SourceError, s3
from cost_pipeline.ingest.sources.listing_inventory import _Inventory, read_inventory
from tests.support.s3_server import FlakyProxy, new_bucket, put

JULY = date(2026, 7, 1)
LOG = logging.getLogger("test")
CSV_SCHEMA = ("Bucket, Key, VersionId, IsLatest, IsDeleteMarker, Size, LastModifiedDate, "
              "ETag, StorageClass")
CONFIG_FOLDER = "inventory/ml-checkpoints/daily"


@pytest.fixture
def con():
    connection = duckdb.connect()
    yield connection
    connection.close()


def build(con, base: Path, *entries: dict, month: date = JULY) -> list[tuple]:
    build_checkpoint_inventory(con, parse_config({"checkpoints": list(entries)}, base), month,
                               LOG)
    return con.execute(
        "SELECT bucket, key, size, snapshot_date, run_id, checkpoint FROM checkpoint_inventory "
        "WHERE month = ? ORDER BY snapshot_date, key", [month]).fetchall()


def test_s3_listing_reads_every_page_of_the_whole_bucket(tmp_path, s3_server, con):
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    keys = [f"checkpoints/run-{r}/step-{s}/model.pt" for r in "abc" for s in range(7)]
    keys += ["datasets/churn/part-0.parquet", "checkpoints/README.md", "loose.bin", "x/y/z"]
    for key in keys:
        put(endpoint, bucket, key, b"0123456789")
    # folders the S3 console's "Create folder" writes: zero-byte objects, no checkpoint
    for folder in ("checkpoints/", "checkpoints/run-a/", "checkpoints/run-a/step-9/"):
        put(endpoint, bucket, folder, b"")
    with FlakyProxy(endpoint, failures=1) as proxy:  # one SlowDown: boto3 retries it
        listed = list(s3.list_bucket(s3.client(proxy.endpoint_url), bucket, "test",
                                     page_size=10))
    pages = [p for p in proxy.paths if "list-type=2" in p]
    assert len(pages) == 3 + 1 and proxy.failed == 1  # 28 keys / 10 per page, one retry
    assert len(listed) == len(keys) + 3
    # a listing is the bucket as it is now: the objects were written this month
    this_month = datetime.now(UTC).date().replace(day=1)
    rows = build(con, tmp_path, {"kind": "s3", "bucket": bucket, "prefix": "checkpoints/",
                                 "endpoint_url": endpoint, "region": "us-east-1"},
                 month=this_month)
    # the whole bucket but its folder markers; the prefix only locates run ids
    assert sorted(row[1] for row in rows) == sorted(keys)
    runs = {(key, run, ckpt) for _b, key, _s, _d, run, ckpt in rows}
    assert ("checkpoints/run-b/step-3/model.pt", "run-b", "step-3") in runs
    assert ("datasets/churn/part-0.parquet", None, None) in runs


def test_s3_listing_of_a_missing_bucket(tmp_path, s3_server, con):
    with pytest.raises(SourceError, match=r"^checkpoints\[0\] s3: s3://nope-missing: "
                                          "the bucket does not exist"):
        build(con, tmp_path, {"kind": "s3", "bucket": "nope-missing",
                              "endpoint_url": s3_server.endpoint_url})


def _csv_report(rows: list[list[str]]) -> bytes:
    text = "".join(",".join(f'"{v}"' for v in row) + "\n" for row in rows)
    return gzip.compress(text.encode())


def _manifest(day: str, file_format: str, keys: list[str], schema: str = CSV_SCHEMA) -> str:
    created = int(datetime.fromisoformat(f"{day}T01:00:00+00:00").timestamp() * 1000)
    return json.dumps({
        "sourceBucket": "ml-checkpoints", "destinationBucket": "arn:aws:s3:::inventory-dest",
        "version": "2016-11-30", "creationTimestamp": str(created), "fileFormat": file_format,
        "fileSchema": schema,
        "files": [{"key": k, "size": 1, "MD5checksum": "x"} for k in keys],
    })


def _objects(day: str) -> list[list[str]]:
    """The bucket on `day`: two checkpoints of run-a (one key URL-encoded), an object deleted
    (its delete marker) and a noncurrent version."""
    stamp = f"{day}T00:30:00.000Z"
    return [
        ["ml-checkpoints", "checkpoints/run-a/step-1/model.pt", "", "true", "false", "100",
         stamp, "e1", "STANDARD"],
        ["ml-checkpoints", "checkpoints/run-a/step%202/model+v2.pt", "", "true", "false",
         "200", stamp, "e2", "STANDARD"],
        ["ml-checkpoints", "checkpoints/run-b/gone.pt", "v2", "true", "true", "", stamp, "",
         ""],
        ["ml-checkpoints", "checkpoints/run-b/old.pt", "v1", "false", "false", "999", stamp,
         "e3", "STANDARD"],
    ]


def test_inventory_reports_csv_gz_on_s3_give_daily_snapshots(tmp_path, s3_server, con):
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    dest = f"dest-prefix/{CONFIG_FOLDER}"
    for day in ("2026-07-30", "2026-07-31", "2026-08-01"):
        key = f"{dest}/data/{day}-part0.csv.gz"
        put(endpoint, bucket, key, _csv_report(_objects(day)))
        put(endpoint, bucket, f"{dest}/{day}T01-00Z/manifest.json", _manifest(day, "CSV", [key]))
    # a report of another month is not opened at all (this one is not even JSON)
    put(endpoint, bucket, f"{dest}/2026-09-15T01-00Z/manifest.json", "not json")
    rows = build(con, tmp_path, {"kind": "inventory", "path": f"s3://{bucket}/{dest}",
                                 "prefix": "checkpoints/", "endpoint_url": endpoint})
    by_day: dict[date, list] = {}
    for bucket_name, key, size, day, run, ckpt in rows:
        assert bucket_name == "ml-checkpoints"
        by_day.setdefault(day, []).append((key, size, run, ckpt))
    assert sorted(by_day) == [date(2026, 7, 30), date(2026, 7, 31)]
    for objects in by_day.values():
        assert objects == [("checkpoints/run-a/step 2/model v2.pt", 200, "run-a", "step 2"),
                           ("checkpoints/run-a/step-1/model.pt", 100, "run-a", "step-1")]
    august = build(con, tmp_path, {"kind": "inventory", "path": f"s3://{bucket}/{dest}",
                                   "endpoint_url": endpoint}, month=date(2026, 8, 1))
    assert {row[3] for row in august} == {date(2026, 8, 1)}



@pytest.mark.parametrize(("data", "problem"), [
    (_csv_report(_objects("2026-07-30"))[:-30], "broken gzip: truncated (its compressed "
     "stream ends early)"),
    (b"Bucket,Key,Size\nml-checkpoints,checkpoints/run-a/step-1/model.pt,100\n",
     "broken gzip: not a gzip file"),
])
def test_a_broken_gzip_data_file_on_s3_is_named_and_read_once(tmp_path, s3_server, con,
                                                               data, problem):
    """A report's data file cut short, or not gzip at all, read as `S3 error after up to 5
    attempts: Truncated compressed stream` and was downloaded a second time by the row
    reader: the bytes are broken, no transfer failed, and every read gets the same bytes."""
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    dest = f"dest-prefix/{CONFIG_FOLDER}"
    key = f"{dest}/data/2026-07-30-part0.csv.gz"
    put(endpoint, bucket, key, data)
    put(endpoint, bucket, f"{dest}/2026-07-30T01-00Z/manifest.json",
        _manifest("2026-07-30", "CSV", [key]))
    with FlakyProxy(endpoint, failures=0) as proxy, pytest.raises(SourceError) as err:
        build(con, tmp_path, {"kind": "inventory", "path": f"s3://{bucket}/{dest}",
                              "endpoint_url": proxy.endpoint_url})
    assert str(err.value) == f"checkpoints[0] inventory: s3://{bucket}/{key}: {problem}"
    assert [p for p in proxy.paths if p.startswith(f"GET /{bucket}/{key}")] == [
        f"GET /{bucket}/{key}"]  # read once: not again by the row reader


def test_inventory_report_parquet_local_folder(tmp_path, con):
    folder = tmp_path / "inv" / CONFIG_FOLDER
    stamp = datetime(2026, 7, 15, 0, 30, tzinfo=UTC)
    table = pa.table({
        "bucket": ["ml-checkpoints"] * 3,
        "key": ["checkpoints/run-z/ck-1/a.pt", "checkpoints/run-z/ck-1/b.pt", "other/x"],
        "is_latest": [True, True, True], "is_delete_marker": [False, False, False],
        "size": pa.array([10, 20, 30], pa.int64()),
        "last_modified_date": pa.array([stamp] * 3, pa.timestamp("ms", tz="UTC")),
    })
    data = folder / "data" / "abc.parquet"
    data.parent.mkdir(parents=True)
    pq.write_table(table, data)
    (folder / "2026-07-15T01-00Z").mkdir()
    manifest = folder / "2026-07-15T01-00Z" / "manifest.json"
    manifest.write_text(_manifest("2026-07-15", "Parquet",
                                  [f"elsewhere/{CONFIG_FOLDER}/data/abc.parquet"],
                                  schema="message s3.inventory { … }"))
    expected = [("ml-checkpoints", "checkpoints/run-z/ck-1/a.pt", 10, date(2026, 7, 15),
                 "run-z", "ck-1"),
                ("ml-checkpoints", "checkpoints/run-z/ck-1/b.pt", 20, date(2026, 7, 15),
                 "run-z", "ck-1"),
                ("ml-checkpoints", "other/x", 30, date(2026, 7, 15), None, None)]
    for path in ("inv/" + CONFIG_FOLDER, str(manifest)):  # the folder or one manifest
        assert build(con, tmp_path, {"kind": "inventory", "path": path,
                                     "prefix": "checkpoints/"}) == expected


def test_inventory_report_size_out_of_range_names_the_file(tmp_path):
    folder = tmp_path / "inv" / CONFIG_FOLDER
    rows = _objects("2026-07-15")
    rows[0][5] = "99999999999999999999"  # over 2^63: no byte count
    data = folder / "data" / "part0.csv.gz"
    data.parent.mkdir(parents=True)
    data.write_bytes(_csv_report(rows))
    (folder / "2026-07-15T01-00Z").mkdir()
    (folder / "2026-07-15T01-00Z" / "manifest.json").write_text(
        _manifest("2026-07-15", "CSV", [f"elsewhere/{CONFIG_FOLDER}/data/part0.csv.gz"]))
    with pytest.raises(SourceError, match=r"part0\.csv\.gz row 1: Size: 99999999999999999999 "
                                          r"is not a byte count"):
        list(read_inventory(str(folder), "inv", date(2026, 7, 1)))


def test_orc_and_parquet_inventories_read_alike(tmp_path, monkeypatch):
    """AWS writes S3 Inventory as CSV, Parquet or ORC (the same snake_case columns; ORC reads
    its times in nanoseconds): the two columnar formats give the same objects, vectorized and
    row by row, the delete marker and the non-current version left out. Another fileFormat
    is refused, naming the three."""
    import pyarrow.orc as paorc

    stamp = datetime(2026, 7, 15, 0, 30, 1, 123456, tzinfo=UTC)
    table = pa.table({
        "bucket": ["ml-checkpoints"] * 4,
        "key": ["checkpoints/run-z/ck 1/a+b.pt", "checkpoints/run-z/ck-2/b.pt", "gone", "old"],
        "version_id": ["", "", "v2", "v1"],
        "is_latest": [True, True, True, False], "is_delete_marker": [False, False, True, False],
        "size": pa.array([10, 20, None, 30], pa.int64()),
        "last_modified_date": pa.array([stamp] * 4, pa.timestamp("ns", tz="UTC")),
        "e_tag": ["e1", "e2", None, "e3"], "storage_class": ["STANDARD"] * 4,
    })
    got = {}
    for file_format, write in (("ORC", paorc.write_table), ("Parquet", pq.write_table)):
        folder = tmp_path / file_format / CONFIG_FOLDER
        data = folder / "data" / f"part0.{file_format.lower()}"
        data.parent.mkdir(parents=True)
        write(table if file_format == "ORC" else table.set_column(
            6, "last_modified_date", table["last_modified_date"].cast(pa.timestamp("us", "UTC"))),
            str(data))
        (folder / "2026-07-15T01-00Z").mkdir()
        (folder / "2026-07-15T01-00Z" / "manifest.json").write_text(
            _manifest("2026-07-15", file_format, [f"x/{CONFIG_FOLDER}/data/{data.name}"],
                      schema="message s3.inventory { … }"))
        got[file_format, False] = pa.Table.from_batches(list(read_inventory(
            str(folder), "inv", JULY, vectorized=False))).to_pylist()
        with monkeypatch.context() as patch:  # the vectorized reader, with no fallback
            patch.setattr(_Inventory, "_columnar_rows", pytest.fail)
            got[file_format, True] = pa.Table.from_batches(list(read_inventory(
                str(folder), "inv", JULY))).to_pylist()
    expected = [{"bucket": "ml-checkpoints", "key": key, "size": size,
                 "last_modified": datetime(2026, 7, 15, 0, 30, 1, 123456),
                 "snapshot_date": date(2026, 7, 15)}
                for key, size in (("checkpoints/run-z/ck 1/a+b.pt", 10),
                                  ("checkpoints/run-z/ck-2/b.pt", 20))]
    assert [{k: row[k] for k in expected[0]} for row in got["ORC", True]] == expected
    assert all(rows == got["ORC", True] for rows in got.values())
    with monkeypatch.context() as patch:  # a pyarrow built without ORC
        patch.setitem(__import__("sys").modules, "pyarrow.orc", None)
        with pytest.raises(SourceError, match=r"part0\.orc: this pyarrow cannot read ORC"):
            list(read_inventory(str(tmp_path / "ORC" / CONFIG_FOLDER), "inv", JULY))
    manifest = tmp_path / "2026-07-16T01-00Z" / "manifest.json"
    manifest.parent.mkdir()
    manifest.write_text(_manifest("2026-07-16", "JSON", ["data/x.json"]))
    with pytest.raises(SourceError, match="fileFormat 'JSON' is not an S3 Inventory format: "
                                          "CSV, Parquet or ORC"):
        list(read_inventory(str(manifest), "inv", JULY))


def test_plain_inventory_csv_on_s3(tmp_path, s3_server, con):
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    put(endpoint, bucket, "listing/inventory.csv",
        "bucket,key,size,last_modified\nml-ckpt,checkpoints/run-a/s1/x.pt,5,2026-07-02T00:00:00Z\n")
    rows = build(con, tmp_path, {"kind": "inventory", "prefix": "checkpoints/",
                                 "path": f"s3://{bucket}/listing/inventory.csv",
                                 "endpoint_url": endpoint})
    assert rows == [("ml-ckpt", "checkpoints/run-a/s1/x.pt", 5, None, "run-a", "s1")]


def _daily_reports(folder: Path, days: dict[str, list[list[str]] | None]) -> None:
    """A daily CSV configuration on disk: a report per day; None writes a manifest listing
    no data file, [] one whose data file holds no row (both how an empty bucket reports)."""
    for day, objects in days.items():
        keys = []
        if objects is not None:
            data = folder / "data" / f"{day}.csv.gz"
            data.parent.mkdir(parents=True, exist_ok=True)
            data.write_bytes(_csv_report(objects))
            keys = [f"{CONFIG_FOLDER}/data/{day}.csv.gz"]
        (folder / f"{day}T01-00Z").mkdir(parents=True)
        (folder / f"{day}T01-00Z" / "manifest.json").write_text(_manifest(day, "CSV", keys))


def test_a_report_listing_no_object_is_an_empty_snapshot_of_its_bucket(tmp_path):
    """SPEC §6 rule 4 reads a storage line's day in the snapshot of that day when daily
    snapshots exist, and a bucket with no listed bytes is all untracked. A day whose report
    lists nothing (the bucket was empty) is such a day: without its report, the day would
    read the latest snapshot instead, and the month's end would show the objects of the last
    report that listed some."""
    from cost_pipeline.attribution import build_attribution
    from cost_pipeline.warehouse import month_params
    from tests.support.sql_backend import loaded, table_rows

    def stamped(key: str, size: int) -> list[str]:
        return ["ml-checkpoints", key, "", "true", "false", str(size),
                "2026-06-30T00:30:00.000Z", "e", "STANDARD"]

    folder = tmp_path / "inv" / CONFIG_FOLDER
    # the 1st lists run-a's checkpoint (300 B) and a dataset (100 B); the 2nd and the 3rd
    # list nothing; the 4th has no report
    _daily_reports(folder, {"2026-07-01": [stamped("checkpoints/run-a/ck-1/m.pt", 300),
                                           stamped("datasets/d.parquet", 100)]})
    cfg = parse_config({"checkpoints": [{"kind": "inventory", "path": "inv/" + CONFIG_FOLDER,
                                         "prefix": "checkpoints/"}]}, tmp_path)

    def storage(day: int) -> dict:
        return {"x_SourceLine": f"s{day}", "ResourceId": "ml-checkpoints",
                "ChargePeriodStart": datetime(2026, 7, day), "ChargeCategory": "Usage",
                "ChargePeriodEnd": datetime(2026, 7, day + 1), "BilledCost": 10.0,
                "EffectiveCost": 10.0, "x_CostComponent": "storage", "x_ResourceKind": "bucket"}

    run_a = {"run_id": "run-a", "status": "FINISHED", "purpose": "experiment",
             "start_time": datetime(2026, 6, 29), "end_time": datetime(2026, 6, 30)}
    con = loaded([storage(day) for day in (1, 2, 3, 4)], [run_a], [], JULY)
    params = month_params(cfg, JULY)

    def attributed() -> tuple[str, dict[str, float]]:
        build_checkpoint_inventory(con, cfg, JULY, LOG)
        mode = build_attribution(con, JULY, params, keep_unchanged=True).mode
        to_run = {row["x_SourceLine"]: 0.0 for row in table_rows(con, "attribution")}
        for row in table_rows(con, "attribution"):
            if row["run_id"] == "run-a":
                to_run[row["x_SourceLine"]] += row["cost"]
        ((end_objects,),) = con.execute(
            "SELECT count(*) FROM month_end_snapshot(?, ?)",
            [JULY, datetime(2026, 8, 1)]).fetchall()
        return mode, {**to_run, "month end objects": end_objects}

    # one report: every day reads the 1st's snapshot, 3/4 of each line to run-a
    assert attributed() == ("full", {"s1": 7.5, "s2": 7.5, "s3": 7.5, "s4": 7.5,
                                     "month end objects": 2})
    _daily_reports(folder, {"2026-07-02": None, "2026-07-03": []})
    mode, figures = attributed()
    # the empty reports are read (the attribution's inputs changed), the 2nd and 3rd are
    # empty days, the 4th reads the latest snapshot (the 3rd's): untracked, and so is the
    # month's end
    assert mode == "full"
    assert figures == {"s1": 7.5, "s2": 0.0, "s3": 0.0, "s4": 0.0, "month end objects": 0}
    assert con.execute("SELECT source, bucket, snapshot_date FROM checkpoint_snapshots "
                       "ORDER BY snapshot_date").fetchall() == [
        ("checkpoints[0] inventory", "ml-checkpoints", date(2026, 7, d)) for d in (1, 2, 3)]
    (conserved,) = con.execute("SELECT sum(cost) FROM attribution").fetchone()
    assert conserved == pytest.approx(40.0)


def _without_source_bucket(folder: Path, day: str) -> None:
    """The manifest of `day`'s report in `folder` written again without its sourceBucket."""
    manifest = folder / f"{day}T01-00Z" / "manifest.json"
    doc = json.loads(manifest.read_text())
    del doc["sourceBucket"]
    manifest.write_text(json.dumps(doc))


def test_a_report_without_source_bucket_takes_the_entrys_bucket(tmp_path, con):
    """A manifest naming no sourceBucket (AWS's always name it; one written by hand may
    not): its objects name their bucket, but an empty snapshot has only the manifest's. It
    takes the entry's `bucket:`; without one, a report listing no object is refused, naming
    it, rather than its day silently reading another day's objects."""
    folder = tmp_path / "inv" / CONFIG_FOLDER
    _daily_reports(folder, {"2026-07-01": [["ml-checkpoints", "checkpoints/run-a/c/m.pt", "",
                                            "true", "false", "300",
                                            "2026-06-30T00:30:00.000Z", "e", "STD"]],
                            "2026-07-02": None})
    for day in ("2026-07-01", "2026-07-02"):
        _without_source_bucket(folder, day)
    entry = {"kind": "inventory", "path": "inv/" + CONFIG_FOLDER, "prefix": "checkpoints/"}
    with pytest.raises(SourceError, match=r"^checkpoints\[0\] inventory: .*2026-07-02T01-00Z/"
                       r"manifest\.json: the report of 2026-07-02 lists no object and names "
                       r"no sourceBucket: set `bucket:`"):
        build(con, tmp_path, entry)
    rows = build(con, tmp_path, {**entry, "bucket": "ml-checkpoints"})
    assert [(b, k, d) for b, k, _s, d, _r, _c in rows] == [
        ("ml-checkpoints", "checkpoints/run-a/c/m.pt", date(2026, 7, 1))]
    assert con.execute("SELECT bucket, snapshot_date FROM checkpoint_snapshots ORDER BY 2"
                       ).fetchall() == [("ml-checkpoints", date(2026, 7, 1)),
                                        ("ml-checkpoints", date(2026, 7, 2))]


def test_a_report_without_source_bucket_is_its_objects_buckets_snapshot(tmp_path, con):
    """A manifest naming no sourceBucket, without the entry's `bucket:`, whose report lists
    objects: its snapshot is the bucket its objects name (`checkpoint_snapshots` has the
    day, as it has every report's)."""
    folder = tmp_path / "inv" / CONFIG_FOLDER
    _daily_reports(folder, {day: [["ml-checkpoints", f"checkpoints/run-a/c{n}/m.pt", "", "true",
                                   "false", "300", "2026-06-30T00:30:00.000Z", "e", "STD"]]
                            for n, day in enumerate(("2026-07-01", "2026-07-02"))})
    _without_source_bucket(folder, "2026-07-02")
    rows = build(con, tmp_path, {"kind": "inventory", "path": "inv/" + CONFIG_FOLDER,
                                 "prefix": "checkpoints/"})
    assert [(b, d) for b, _k, _s, d, _r, _c in rows] == [("ml-checkpoints", date(2026, 7, 1)),
                                                        ("ml-checkpoints", date(2026, 7, 2))]
    assert con.execute("SELECT bucket, snapshot_date FROM checkpoint_snapshots ORDER BY 2"
                       ).fetchall() == [("ml-checkpoints", date(2026, 7, 1)),
                                        ("ml-checkpoints", date(2026, 7, 2))]


# a bucket inventoried by two configurations, each covering a prefix: `checkpoints/` daily
# (CSV) and `datasets/` weekly (Parquet), their reports in folders of their own
DAILY_FOLDER, WEEKLY_FOLDER = "inventory/ml-checkpoints/daily", "inventory/ml-checkpoints/weekly"
STORAGE_BILL_DAYS = {31: 6.0}


def _weekly_parquet_reports(folder: Path, days: dict[str, list[tuple[str, int]]]) -> None:
    """A weekly Parquet configuration on disk: a report per day of its (key, size) objects."""
    stamp = datetime(2026, 6, 30, 0, 30, tzinfo=UTC)
    for day, objects in days.items():
        data = folder / "data" / f"{day}.parquet"
        data.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({
            "bucket": ["ml-checkpoints"] * len(objects), "key": [k for k, _ in objects],
            "is_latest": [True] * len(objects), "is_delete_marker": [False] * len(objects),
            "size": pa.array([s for _, s in objects], pa.int64()),
            "last_modified_date": pa.array([stamp] * len(objects), pa.timestamp("ms", tz="UTC")),
        }), data)
        (folder / f"{day}T01-00Z").mkdir(parents=True)
        (folder / f"{day}T01-00Z" / "manifest.json").write_text(_manifest(
            day, "Parquet", [f"dest/{WEEKLY_FOLDER}/data/{day}.parquet"],
            schema="message s3.inventory { … }"))


LIVE, DEAD = "checkpoints/live-1/step-1/m.pt", "checkpoints/dead-1/step-1/m.pt"


def _listed(key: str, size: int) -> list[str]:
    """A current object of ml-checkpoints as a CSV report's row."""
    return ["ml-checkpoints", key, "", "true", "false", str(size), "2026-06-30T00:30:00.000Z",
            "e", "STANDARD"]


def _configured_bucket(tmp_path: Path, lines: dict[int, float], *, weekly: bool = True,
                       weekly_checkpoint: int | None = None) -> duckdb.DuckDBPyConnection:
    """The bucket's July listed, attributed and its storage by run status computed. The daily
    configuration (`checkpoints/`) reports the 1st (live-1 6,000 B), the 15th (live-1
    6,000 B, dead-1 9,000 B) and the 31st (live-1 14,000 B, dead-1 9,000 B, a loose README
    300 B: 23,300 B); the weekly one (`weekly`: `datasets/`) the 20th and the 27th, each
    datasets/ds.bin 50,000 B. With `weekly_checkpoint` the weekly configuration covers the
    whole bucket instead, and its 27th also lists live-1 (6,000 B, as the 15th) and dead-1's
    checkpoint at `weekly_checkpoint` bytes. `lines`: the bucket's storage bill, {day: cost}."""
    _daily_reports(tmp_path / "inv" / DAILY_FOLDER, {
        "2026-07-01": [_listed(LIVE, 6_000)],
        "2026-07-15": [_listed(LIVE, 6_000), _listed(DEAD, 9_000)],
        "2026-07-31": [_listed(LIVE, 14_000), _listed(DEAD, 9_000),
                       _listed("checkpoints/README.md", 300)]})
    entries = [{"kind": "inventory", "path": f"inv/{DAILY_FOLDER}", "prefix": "checkpoints/"}]
    if weekly:
        on_27th = [("datasets/ds.bin", 50_000)]
        if weekly_checkpoint is not None:
            on_27th += [(LIVE, 6_000), (DEAD, weekly_checkpoint)]
        _weekly_parquet_reports(tmp_path / "inv" / WEEKLY_FOLDER, {
            "2026-07-20": [("datasets/ds.bin", 50_000)], "2026-07-27": on_27th})
        entries.append({"kind": "inventory", "path": f"inv/{WEEKLY_FOLDER}",
                        "prefix": "checkpoints/"})
    return _priced(parse_config({"checkpoints": entries}, tmp_path), lines)


def _priced(cfg, lines: dict[int, float], runs: list[dict] | None = None
            ) -> duckdb.DuckDBPyConnection:
    """July's listing of `cfg` written, attributed and its storage by run status and
    retention violations computed, the runs being `runs`, by default dead-1 (FAILED) and
    live-1 (RUNNING). `lines`: ml-checkpoints' storage bill, {day: cost}."""
    from cost_pipeline.attribution import build_attribution
    from cost_pipeline.warehouse import month_params, replace_month, sql_text
    from tests.support.sql_backend import loaded

    storage = [{"x_SourceLine": f"s{day}", "ResourceId": "ml-checkpoints",
                "ChargePeriodStart": datetime(2026, 7, day), "ChargeCategory": "Usage",
                "ChargePeriodEnd": datetime(2026, 7, day) + timedelta(days=1),
                "BilledCost": cost, "EffectiveCost": cost, "x_CostComponent": "storage",
                "x_ResourceKind": "bucket"} for day, cost in lines.items()]
    runs = runs or [{"run_id": "dead-1", "status": "FAILED", "purpose": "adhoc",
                     "start_time": datetime(2026, 6, 29), "end_time": datetime(2026, 6, 30)},
                    {"run_id": "live-1", "status": "RUNNING", "purpose": "adhoc",
                     "start_time": datetime(2026, 7, 1)}]
    con = loaded(storage, runs, [], JULY)
    build_checkpoint_inventory(con, cfg, JULY, LOG)
    params = month_params(cfg, JULY)
    build_attribution(con, JULY, params)
    for table in ("storage_by_run_status", "retention_violations"):
        replace_month(con, table, JULY, sql_text(table), params)
    return con


def _by_run_status(con) -> list[tuple]:
    return [(status, objects, size, round(cost, 4)) for status, objects, size, cost
            in con.execute("SELECT run_status, objects, bytes, cost FROM storage_by_run_status "
                           "ORDER BY run_status").fetchall()]


def _line_split(con, line: str) -> dict[str | None, float]:
    return {run: round(cost, 4) for run, cost in con.execute(
        "SELECT run_id, sum(cost) FROM attribution WHERE x_SourceLine = ? GROUP BY run_id",
        [line]).fetchall()}


def test_a_bucket_of_two_inventory_configurations_is_priced_from_both(tmp_path):
    """SPEC §6 rule 4 and §7: a bucket's storage is split by all its listed bytes. Read from
    the last report of the month alone (the daily one's, 23,300 B), the weekly
    configuration's 50,000 B of datasets dropped out of the bucket: dead-1's 9,000 B cost
    9,000 × $6.00 / 23,300 = $2.3176 where it is 9,000 × 6 / 73,300 = $0.7367. The bucket at
    the month's end is each configuration's last report: the 31st's and the 27th's."""
    con = _configured_bucket(tmp_path, STORAGE_BILL_DAYS)
    assert _by_run_status(con) == [("dead", 1, 9_000, 0.7367), ("live", 1, 14_000, 1.146)]
    # the line of the 31st: 9,000 and 14,000 of 73,300 B
    assert _line_split(con, "s31") == {"dead-1": 0.7367, "live-1": 1.146, None: 4.1173}


def test_a_bucket_of_one_inventory_configuration_keeps_its_figures(tmp_path):
    """One configuration: the month's end is its last report (23,300 B), as it was."""
    con = _configured_bucket(tmp_path, STORAGE_BILL_DAYS, weekly=False)
    assert _by_run_status(con) == [("dead", 1, 9_000, 2.3176), ("live", 1, 14_000, 3.6052)]
    assert _line_split(con, "s31") == {"dead-1": 2.3176, "live-1": 3.6052, None: 0.0773}


def test_a_key_two_configurations_list_counts_once(tmp_path):
    """Configurations whose scopes overlap (the daily one's `checkpoints/`, a weekly one of
    the whole bucket) list an object twice: it counts once, as the latest report lists it.
    At the month's end dead-1's checkpoint is the 31st's 9,000 B (not also the 27th's
    8,000 B: 81,300 B listed); on the 27th it is that day's 8,000 B (not also the 15th's
    9,000 B). The weekly report adds no key of the daily one's scope that the daily
    report of the 31st left out, and the daily one's take no dataset away."""
    con = _configured_bucket(tmp_path, {27: 6.4, 31: 6.0}, weekly_checkpoint=8_000)
    # the bill of the month, $12.40, over the 73,300 B listed at its end
    assert _by_run_status(con) == [("dead", 1, 9_000, 1.5225), ("live", 1, 14_000, 2.3683)]
    assert _line_split(con, "s31") == {"dead-1": 0.7367, "live-1": 1.146, None: 4.1173}
    # the 27th: live-1 6,000 + dead-1 8,000 + datasets 50,000, all the 27th's
    assert _line_split(con, "s27") == {"dead-1": 0.8, "live-1": 0.6, None: 5.0}


def test_a_line_of_a_day_one_configuration_reported_reads_the_others_latest(tmp_path):
    """The 27th only the weekly configuration reported: the bucket that day is its report and
    the daily one's latest before it, the 15th's (live-1 6,000 B, dead-1 9,000 B): 65,000 B.
    Read alone, the 27th's report gave the runs nothing. On the 15th the weekly one had not
    reported yet: that day is the daily report alone (15,000 B)."""
    con = _configured_bucket(tmp_path, {15: 3.0, 27: 6.5})
    assert _line_split(con, "s27") == {"dead-1": 0.9, "live-1": 0.6, None: 5.0}
    assert _line_split(con, "s15") == {"dead-1": 1.8, "live-1": 1.2}


@pytest.mark.parametrize("daily_scope", ["whole bucket", "checkpoints/"])
def test_a_checkpoint_deleted_after_the_weekly_report_is_gone_from_the_daily_snapshots(
        tmp_path, s3_server, daily_scope):
    """Two configurations on S3 cover dead-1's checkpoint: a weekly one of the whole bucket
    reports Sunday the 26th (live-1 6,000 B, dead-1 9,000 B, datasets/ds.bin 50,000 B), a
    daily one, of the whole bucket or of `checkpoints/`, the 27th to the 31st. dead-1's
    checkpoint is deleted on Tuesday the 28th: the daily report lists it the 27th, not
    after. An object is in the bucket on a day when the newest report by then among the
    configurations covering its key lists it: the 27th has 65,000 B (a $18.20 line: dead-1
    9,000 × 18.2 / 65,000 = $2.52, live-1 $1.68), the 29th and the 31st 56,000 B ($5.60
    lines: live-1 6,000 × 5.6 / 56,000 = $0.60, the rest untracked), and so has the month's
    end: live-1 alone, 6,000 × $29.40 / 56,000 = $3.15, no dead checkpoint. The union of
    the latest reports kept the weekly report's 9,000 B in every day after the deletion:
    dead-1 took $0.78 of each $5.60 line and $4.07 at the month's end."""
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    dataset = ("datasets/ds.bin", 50_000)
    _weekly_parquet_reports(tmp_path / "inv" / WEEKLY_FOLDER,
                            {"2026-07-26": [(LIVE, 6_000), (DEAD, 9_000), dataset]})
    whole = daily_scope == "whole bucket"
    _daily_reports(tmp_path / "inv" / DAILY_FOLDER, {
        f"2026-07-{day}": [_listed(LIVE, 6_000)] + ([_listed(DEAD, 9_000)] if day < 28 else [])
        + ([_listed(*dataset)] if whole else []) for day in range(27, 32)})
    for file in (tmp_path / "inv").rglob("*"):
        if file.is_file():
            put(endpoint, bucket, file.relative_to(tmp_path / "inv").as_posix(),
                file.read_bytes())
    cfg = parse_config({"checkpoints": [
        {"kind": "inventory", "path": f"s3://{bucket}/{folder}", "prefix": "checkpoints/",
         "endpoint_url": endpoint} for folder in (DAILY_FOLDER, WEEKLY_FOLDER)]}, tmp_path)
    con = _priced(cfg, {27: 18.2, 29: 5.6, 31: 5.6})
    assert _line_split(con, "s27") == {"dead-1": 2.52, "live-1": 1.68, None: 14.0}
    assert _line_split(con, "s29") == {"live-1": 0.6, None: 5.0}
    assert _line_split(con, "s31") == {"live-1": 0.6, None: 5.0}
    assert _by_run_status(con) == [("live", 1, 6_000, 3.15)]
    ((objects, size),) = con.execute("SELECT count(*), sum(size) FROM month_end_snapshot(?, ?)",
                                     [JULY, datetime(2026, 8, 1)]).fetchall()
    assert (objects, size) == (2, 56_000)


def _violations(con) -> list[tuple]:
    return [(key, run, reason, size, round(cost, 4)) for key, run, reason, size, cost
            in con.execute("SELECT key, run_id, reason, bytes, monthly_cost "
                           "FROM retention_violations ORDER BY key").fetchall()]


def _plain_csv(path: Path, rows: list[str], *, dated: bool) -> None:
    """A plain inventory CSV of ml-checkpoints, with a `snapshot_date` column when `dated`."""
    header = "bucket,key,size,last_modified" + (",snapshot_date" if dated else "")
    path.write_text("\n".join([header, *(f"ml-checkpoints,{row}" for row in rows)]) + "\n",
                    encoding="utf-8")


DEAD_RUNS = [{"run_id": run, "status": "FAILED", "purpose": "adhoc",
              "start_time": datetime(2026, 6, 1), "end_time": datetime(2026, 6, 1, 5)}
             for run in ("dead1", "dead2")]


def test_a_bucket_listed_dated_and_undated_holds_both_listings_objects(tmp_path):
    """SPEC §3: an undated listing is the bucket as it is now. A bucket a dated listing (a
    plain CSV with snapshot_date, here of the 31st: dead1's 1,000 B) and an undated one
    (dead2's 2,000 B, written in June) both list holds the objects of both: the $30.00 line
    of the 31st is split over 3,000 B, dead1 1,000 × 30 / 3,000 = $10.00 and dead2 $20.00,
    and at the month's end both dead runs' checkpoints break the policy. The dated snapshot
    alone was read: dead1 took the $30.00 and dead2's checkpoint was in no table."""
    _plain_csv(tmp_path / "daily.csv",
               ["checkpoints/dead1/step-1/a,1000,2026-06-01T01:00:00Z,2026-07-31"], dated=True)
    _plain_csv(tmp_path / "undated.csv", ["checkpoints/dead2/step-1/a,2000,2026-06-01T01:00:00Z"],
               dated=False)
    cfg = parse_config({"checkpoints": [
        {"kind": "inventory", "path": name, "prefix": "checkpoints/"}
        for name in ("daily.csv", "undated.csv")]}, tmp_path)
    con = _priced(cfg, {31: 30.0}, DEAD_RUNS)
    assert _line_split(con, "s31") == {"dead1": 10.0, "dead2": 20.0}
    assert _violations(con) == [
        ("checkpoints/dead1/step-1/a", "dead1", "dead_run", 1_000, 10.0),
        ("checkpoints/dead2/step-1/a", "dead2", "dead_run", 2_000, 20.0)]
    assert _by_run_status(con) == [("dead", 2, 3_000, 30.0)]


def test_an_undated_object_counts_from_the_day_it_was_written_and_a_dated_key_once(tmp_path):
    """A dated listing reports the 10th and the 20th (dead-1's checkpoint, 1,000 B); an
    undated one lists that key too, rewritten since (5,000 B), and live-1's checkpoint,
    written on the 15th (2,000 B). A key a dated report covers is read from it: dead-1's
    1,000 B. An undated object is in the bucket on the days ending after it was written:
    the 10th holds dead-1's 1,000 B alone (its $3.00 line all dead-1's), the 20th 3,000 B
    (dead-1 $1.00, live-1 $2.00), and so does the month's end ($6.00 over 3,000 B)."""
    dead, live = "checkpoints/dead-1/step-1/m.pt", "checkpoints/live-1/step-1/m.pt"
    _plain_csv(tmp_path / "daily.csv", [f"{dead},1000,2026-06-30T00:30:00Z,2026-07-{day}"
                                        for day in (10, 20)], dated=True)
    _plain_csv(tmp_path / "undated.csv", [f"{dead},5000,2026-07-25T00:00:00Z",
                                          f"{live},2000,2026-07-15T12:00:00Z"], dated=False)
    cfg = parse_config({"checkpoints": [
        {"kind": "inventory", "path": name, "prefix": "checkpoints/"}
        for name in ("daily.csv", "undated.csv")]}, tmp_path)
    con = _priced(cfg, {10: 3.0, 20: 3.0})
    assert _line_split(con, "s10") == {"dead-1": 3.0}
    assert _line_split(con, "s20") == {"dead-1": 1.0, "live-1": 2.0}
    assert _by_run_status(con) == [("dead", 1, 1_000, 2.0), ("live", 1, 2_000, 4.0)]
    assert _violations(con) == [(dead, "dead-1", "dead_run", 1_000, 2.0)]


def test_a_bucket_of_two_configurations_and_an_undated_listing_holds_all_three(tmp_path):
    """The bucket of two inventory configurations (`checkpoints/` daily, `datasets/`
    weekly: 73,300 B on the 31st) is also a local folder standing in for it, listing
    dead-1's older checkpoints under `runs/` (26,700 B) and the dataset the weekly
    configuration covers (read from its report, once). The 31st holds 100,000 B: of its
    $6.00, dead-1 9,000 + 26,700 B = $2.142, live-1 14,000 B = $0.84."""
    older = tmp_path / "folder" / "runs" / "dead-1" / "step-0" / "m.pt"
    older.parent.mkdir(parents=True)
    older.write_bytes(b"\0" * 26_700)
    dataset = tmp_path / "folder" / "datasets" / "ds.bin"
    dataset.parent.mkdir(parents=True)
    dataset.write_bytes(b"\0" * 1_000)
    stamp = datetime(2026, 6, 30, tzinfo=UTC).timestamp()
    for path in (older, dataset):
        os.utime(path, (stamp, stamp))
    _daily_reports(tmp_path / "inv" / DAILY_FOLDER, {
        "2026-07-31": [_listed(LIVE, 14_000), _listed(DEAD, 9_000),
                       _listed("checkpoints/README.md", 300)]})
    _weekly_parquet_reports(tmp_path / "inv" / WEEKLY_FOLDER,
                            {"2026-07-27": [("datasets/ds.bin", 50_000)]})
    cfg = parse_config({"checkpoints": [
        {"kind": "inventory", "path": f"inv/{DAILY_FOLDER}", "prefix": "checkpoints/"},
        {"kind": "inventory", "path": f"inv/{WEEKLY_FOLDER}", "prefix": "checkpoints/"},
        {"kind": "local", "path": "folder", "bucket": "ml-checkpoints", "prefix": "runs/"}]},
        tmp_path)
    con = _priced(cfg, STORAGE_BILL_DAYS)
    assert _line_split(con, "s31") == {"dead-1": 2.142, "live-1": 0.84, None: 3.018}
    assert _by_run_status(con) == [("dead", 2, 35_700, 2.142), ("live", 1, 14_000, 0.84)]


def test_an_invalid_bucket_name_is_said_with_botocores_reason(tmp_path, s3_server, con):
    """An `s3` entry whose bucket is no bucket name read `S3 error after up to 5 attempts:
    Parameter validation failed:`, the reason cut off after its first line and retries
    claimed though botocore refused the request before sending it: botocore's reason is
    said whole, no request reaches the server and no attempt is counted."""
    with FlakyProxy(s3_server.endpoint_url, failures=0) as proxy, \
            pytest.raises(SourceError) as err:
        build(con, tmp_path, {"kind": "s3", "bucket": "Bad_Bucket!",
                              "endpoint_url": proxy.endpoint_url})
    assert str(err.value).startswith(
        'checkpoints[0] s3: s3://Bad_Bucket!: invalid request (not sent): Invalid bucket '
        'name "Bad_Bucket!": Bucket name must match the regex "^[a-zA-Z0-9.\\-_]{1,255}$" or '
        'be an ARN matching the regex ')
    assert "attempts" not in str(err.value) and "\n" not in str(err.value)
    assert proxy.requests == 0


@pytest.mark.parametrize(("data_file", "file_format"), [("p.csv.gz", "CSV"),
                                                        ("p.parquet", "Parquet")])
def test_a_missing_data_file_on_s3_is_named_as_its_local_copy(tmp_path, s3_server, con,
                                                              data_file, file_format):
    """A data file its manifest lists but absent on S3 read `S3 error after up to 5
    attempts: [Errno 2] Path does not exist …`, a transfer failure: S3 answered, the object
    is not there. It reads as the local case: not found, listed by its manifest."""
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    dest = "missingdata"
    manifest = f"{dest}/2026-07-15T01-00Z/manifest.json"
    put(endpoint, bucket, manifest, _manifest("2026-07-15", file_format,
                                              [f"{dest}/data/{data_file}"],
                                              schema=CSV_SCHEMA if file_format == "CSV"
                                              else "message s3.inventory { … }"))
    with pytest.raises(SourceError) as err:
        build(con, tmp_path, {"kind": "inventory", "path": f"s3://{bucket}/{dest}",
                              "endpoint_url": endpoint})
    assert str(err.value) == (f"checkpoints[0] inventory: s3://{bucket}/{dest}/data/"
                              f"{data_file}: not found (listed by s3://{bucket}/{manifest})")
