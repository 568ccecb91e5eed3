"""Checkpoint listings (inventory CSV, local folder) → `checkpoint_inventory` (SPEC §3)."""

from __future__ import annotations

import logging
import os
from datetime import UTC, date, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from cost_pipeline.config import parse_config
from cost_pipeline.ingest.checkpoints import build_checkpoint_inventory
from cost_pipeline.ingest.sources import SourceError

JULY = date(2026, 7, 1)
LOG = logging.getLogger("test")
HEADER = "bucket,key,size,last_modified"


@pytest.fixture
def con():
    connection = duckdb.connect()
    yield connection
    connection.close()


def build(con, base: Path, *entries: dict, month: date = JULY) -> list[tuple]:
    """(bucket, key, size, last_modified, snapshot_date, prefix, run_id, checkpoint, source)"""
    build_checkpoint_inventory(con, parse_config({"checkpoints": list(entries)}, base), month,
                               LOG)
    return con.execute(
        "SELECT bucket, key, size, last_modified, snapshot_date, prefix, run_id, checkpoint, "
        "source FROM checkpoint_inventory WHERE month = ? ORDER BY bucket, key, snapshot_date",
        [month]).fetchall()


def write(path: Path, text: str) -> Path:
    path.write_text(text.lstrip("\n"), encoding="utf-8")
    return path


INVENTORY = f"""
{HEADER}
ml-ckpt,checkpoints/run-a/step-100/shard-0.pt,100,2026-07-10T00:00:00Z
ml-ckpt,checkpoints/run-a/step-100/shard-1.pt,150,2026-07-10T00:00:05.000Z
ml-ckpt,checkpoints/run-a/final.pt,300,2026-07-11T12:00:00+02:00
ml-ckpt,checkpoints/README.md,5,2026-01-01T00:00:00Z
ml-ckpt,datasets/churn/part-0.parquet,1000,2026-06-01T00:00:00Z
ml-ckpt,checkpoints/run-b/step-1/x.pt,10,2026-08-01T00:00:00Z
ml-ckpt,checkpoints/run-c/step-9/x.pt,20,2026-07-31T23:59:59Z
"""


def test_inventory_csv_runs_and_checkpoints(tmp_path, con):
    write(tmp_path / "inv.csv", INVENTORY)
    rows = build(con, tmp_path, {"kind": "inventory", "path": "inv.csv",
                                 "prefix": "checkpoints/"})
    src = "checkpoints[0] inventory"
    assert rows == [
        ("ml-ckpt", "checkpoints/README.md", 5, datetime(2026, 1, 1), None, "checkpoints/",
         None, None, src),  # under the prefix, in no run folder
        ("ml-ckpt", "checkpoints/run-a/final.pt", 300, datetime(2026, 7, 11, 10), None,
         "checkpoints/", "run-a", "final.pt", src),
        ("ml-ckpt", "checkpoints/run-a/step-100/shard-0.pt", 100, datetime(2026, 7, 10), None,
         "checkpoints/", "run-a", "step-100", src),
        ("ml-ckpt", "checkpoints/run-a/step-100/shard-1.pt", 150, datetime(2026, 7, 10, 0, 0, 5),
         None, "checkpoints/", "run-a", "step-100", src),
        # run-b's object was written after July's end: not in July's snapshot
        ("ml-ckpt", "checkpoints/run-c/step-9/x.pt", 20, datetime(2026, 7, 31, 23, 59, 59), None,
         "checkpoints/", "run-c", "step-9", src),
        ("ml-ckpt", "datasets/churn/part-0.parquet", 1000, datetime(2026, 6, 1), None, None,
         None, None, src),
    ]
    august = build(con, tmp_path, {"kind": "inventory", "path": "inv.csv",
                                   "prefix": "checkpoints/"}, month=date(2026, 8, 1))
    assert [r[1] for r in august if r[6] == "run-b"] == ["checkpoints/run-b/step-1/x.pt"]
    assert len(build(con, tmp_path, {"kind": "inventory", "path": "inv.csv",
                                     "prefix": "checkpoints/"}, month=date(2026, 6, 1))) == 2
    # months are separate partitions
    (n,) = con.execute("SELECT count(*) FROM checkpoint_inventory WHERE month = ?",
                       [JULY]).fetchone()
    assert n == 6


def test_bucket_from_the_config_and_snapshot_dates(tmp_path, con):
    write(tmp_path / "inv.csv", """
key,size,last_modified,snapshot_date
ckpt/run-a/s1/x.pt,10,2026-06-29T00:00:00Z,2026-06-30
ckpt/run-a/s1/x.pt,10,2026-06-29T00:00:00Z,2026-07-01
ckpt/run-a/s1/x.pt,10,2026-06-29T00:00:00Z,2026-07-31
ckpt/run-a/s2/x.pt,20,2026-07-31T12:00:00Z,2026-07-31
ckpt/run-a/s2/x.pt,20,2026-07-31T12:00:00Z,2026-08-01
""")
    rows = build(con, tmp_path, {"kind": "inventory", "path": "inv.csv", "prefix": "ckpt/",
                                 "bucket": "ml-ckpt"})
    assert [(r[0], r[1], r[4], r[6], r[7]) for r in rows] == [
        ("ml-ckpt", "ckpt/run-a/s1/x.pt", date(2026, 7, 1), "run-a", "s1"),
        ("ml-ckpt", "ckpt/run-a/s1/x.pt", date(2026, 7, 31), "run-a", "s1"),
        ("ml-ckpt", "ckpt/run-a/s2/x.pt", date(2026, 7, 31), "run-a", "s2"),
    ]
    # its days are snapshots of its source, as an S3 Inventory configuration's reports are
    assert con.execute("SELECT source, bucket, snapshot_date FROM checkpoint_snapshots "
                       "ORDER BY snapshot_date").fetchall() == [
        ("checkpoints[0] inventory", "ml-ckpt", date(2026, 7, d)) for d in (1, 31)]


def test_no_bucket_anywhere_is_an_error(tmp_path, con):
    write(tmp_path / "inv.csv", "key,size,last_modified\nckpt/a/b,1,2026-07-01\n")
    with pytest.raises(SourceError, match="no bucket column: set `bucket:`"):
        build(con, tmp_path, {"kind": "inventory", "path": "inv.csv"})
    write(tmp_path / "inv.csv", f"{HEADER}\nb,k1,1,2026-07-01\n,k2,1,2026-07-01\n")
    with pytest.raises(SourceError, match=r"inv.csv row 3: bucket: empty"):
        build(con, tmp_path, {"kind": "inventory", "path": "inv.csv"})


@pytest.mark.parametrize(("size", "problem"), [
    ("12kB", "size: '12kB' is not a whole number of bytes"),
    ("1.5", "size: '1.5' is not a whole number of bytes"),
    ("-3", "size: -3 is negative"),
    ("99999999999999999999", "size: 99999999999999999999 is too large for a byte count"),
])
def test_bad_size_names_the_row(tmp_path, con, size, problem):
    path = write(tmp_path / "inv.csv", f"{HEADER}\nb,ok,1,2026-07-01\nb,bad,{size},2026-07-01\n")
    with pytest.raises(SourceError) as err:
        build(con, tmp_path, {"kind": "inventory", "path": "inv.csv"})
    assert str(err.value) == f"checkpoints[0] inventory: {path} row 3: {problem}"


def test_bad_timestamp_and_header(tmp_path, con):
    path = write(tmp_path / "inv.csv", f"{HEADER}\nb,k,1,last tuesday\n")
    with pytest.raises(SourceError) as err:
        build(con, tmp_path, {"kind": "inventory", "path": "inv.csv"})
    assert str(err.value) == (f"checkpoints[0] inventory: {path} row 2: "
                              "last_modified: 'last tuesday' is not a timestamp")
    write(tmp_path / "inv.csv", "bucket,key,last_modified\nb,k,2026-07-01\n")
    with pytest.raises(SourceError, match="missing column size"):
        build(con, tmp_path, {"kind": "inventory", "path": "inv.csv"})
    (tmp_path / "inv.csv").write_bytes(b"bucket,key,size,last_modified\nb,k\xff,1,2026-07-01\n")
    with pytest.raises(SourceError, match="unreadable"):
        build(con, tmp_path, {"kind": "inventory", "path": "inv.csv"})


def test_a_row_of_more_cells_than_its_header_names_the_row(tmp_path, con):
    # a key holding an unquoted comma: read by its first four cells, the row was another
    # object (`runs/a` of 7 bytes here), or refused for a size that is no number. A trailing
    # empty cell is no cell
    path = write(tmp_path / "inv.csv", f"{HEADER}\nb,ok,1,2026-07-01,\n"
                                       "b,runs/a,7,2026-07-01,b/ckpt.pt,2026-07-02\n")
    with pytest.raises(SourceError) as err:
        build(con, tmp_path, {"kind": "inventory", "path": "inv.csv"})
    assert str(err.value) == (f"checkpoints[0] inventory: {path} row 3: 6 cells where the "
                              "header has 4: a key holding a comma must be quoted")
    write(tmp_path / "inv.csv",
          f'{HEADER}\nb,ok,1,2026-07-01,\nb,"runs/a,b/ckpt.pt",7,2026-07-01\n')
    rows = build(con, tmp_path, {"kind": "inventory", "path": "inv.csv"})
    assert [(r[1], r[2]) for r in rows] == [("ok", 1), ("runs/a,b/ckpt.pt", 7)]


def test_keys_differing_in_a_few_digits_are_not_counted_as_repeats():
    # DuckDB's hash of these two keys alone is one number: the listing was deduplicated (a
    # window over every object) though no object repeats
    from cost_pipeline.ingest.checkpoints import _repeats_an_object

    keys = ["sweep-10/trial-30", "sweep-17/trial-40"]
    listing = pa.table({"bucket": ["b", "b"], "key": keys, "snapshot_date": [None, None]})
    with duckdb.connect() as con:
        assert con.execute("SELECT hash(?) = hash(?)", keys).fetchone() == (True,)
    assert not _repeats_an_object(listing)
    assert _repeats_an_object(pa.concat_tables([listing, listing.slice(0, 1)]))


def _file(root: Path, key: str, size: int, modified: datetime) -> None:
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\0" * size)
    stamp = modified.replace(tzinfo=UTC).timestamp()
    os.utime(path, (stamp, stamp))


def test_local_folder(tmp_path, con):
    root = tmp_path / "bucket"
    _file(root, "checkpoints/run-a/step-1/model.pt", 64, datetime(2026, 7, 2, 3, 4, 5))
    _file(root, "checkpoints/run-a/log.txt", 7, datetime(2026, 7, 2))
    _file(root, "checkpoints/run-z/step-9/model.pt", 32, datetime(2026, 8, 1))
    _file(root, "raw/data.csv", 3, datetime(2026, 5, 1))
    rows = build(con, tmp_path, {"kind": "local", "path": "bucket", "bucket": "ml-ckpt",
                                 "prefix": "checkpoints/"})
    src = "checkpoints[0] local"
    assert rows == [
        ("ml-ckpt", "checkpoints/run-a/log.txt", 7, datetime(2026, 7, 2), None, "checkpoints/",
         "run-a", "log.txt", src),
        ("ml-ckpt", "checkpoints/run-a/step-1/model.pt", 64, datetime(2026, 7, 2, 3, 4, 5), None,
         "checkpoints/", "run-a", "step-1", src),
        ("ml-ckpt", "raw/data.csv", 3, datetime(2026, 5, 1), None, None, None, None, src),
    ]
    assert len(build(con, tmp_path, {"kind": "local", "path": "bucket", "bucket": "ml-ckpt",
                                      "prefix": "checkpoints/"}, month=date(2026, 8, 1))) == 4
    with pytest.raises(SourceError, match="checkpoint folder not found"):
        build(con, tmp_path, {"kind": "local", "path": "nowhere", "bucket": "b"})


def test_a_local_path_naming_a_file_is_said_to_be_a_file(tmp_path, con):
    """A `local` path at a file was "checkpoint folder not found": it is there, and is no
    folder."""
    write(tmp_path / "runs.csv", "run_id\n")
    with pytest.raises(SourceError) as error:
        build(con, tmp_path, {"kind": "local", "path": "runs.csv", "bucket": "b"})
    assert str(error.value) == (f"checkpoints[0] local: {tmp_path / 'runs.csv'}: a file, not "
                                "a folder: a `local` path names the folder standing in for the "
                                "bucket")


def violations(con, month: date = JULY, **runs: str) -> list[tuple]:
    """The month's `retention_violations` (SPEC §7, default policy) of the
    `checkpoint_inventory` written, the tracker knowing `runs` (run id=status, started the
    month before): (key, run_id, checkpoint, reason) by key."""
    from cost_pipeline.warehouse import month_params, replace_month, sql_text

    con.execute("DELETE FROM tracker_runs WHERE month = ?", [month])
    for run_id, status in runs.items():
        con.execute("INSERT INTO tracker_runs BY NAME SELECT ? AS month, ? AS run_id, "
                    "? AS status, ?::TIMESTAMP AS start_time, false AS keep, "
                    "false AS deleted", [month, run_id, status, datetime(2026, 6, 1)])
    replace_month(con, "retention_violations", month, sql_text("retention_violations"),
                  month_params(parse_config({}, Path()), month))
    return con.execute("SELECT key, run_id, checkpoint, reason FROM retention_violations "
                       "WHERE month = ? ORDER BY key", [month]).fetchall()


def test_prefix_spellings(tmp_path, con):
    write(tmp_path / "inv.csv", f"""
{HEADER}
b,checkpoints/run-a/s1/x.pt,1,2026-07-01
b,top.txt,1,2026-07-01
""")
    # without the trailing slash the run folders are the same: the prefix is that folder
    rows = build(con, tmp_path, {"kind": "inventory", "path": "inv.csv",
                                 "prefix": "checkpoints"})
    assert [(r[1], r[5], r[6], r[7]) for r in rows] == [
        ("checkpoints/run-a/s1/x.pt", "checkpoints/", "run-a", "s1"),
        ("top.txt", None, None, None)]
    # an empty prefix: the first segment is the run id; a top-level file is in no run folder
    rows = build(con, tmp_path, {"kind": "inventory", "path": "inv.csv"})
    assert [(r[1], r[5], r[6], r[7]) for r in rows] == [
        ("checkpoints/run-a/s1/x.pt", "", "checkpoints", "run-a"),
        ("top.txt", "", None, None)]


def test_a_prefix_ending_in_a_letter_or_digit_is_a_folder(tmp_path, con):
    """`prefix: checkpoints` is the folder `checkpoints/`: a sibling folder whose name
    starts alike (`checkpoints-old/`) is outside it, where it was read as run `-old` and its
    archive reported as an orphan. A prefix ending in another character is the start of
    the key as written (SPEC §3 `<prefix><run_id>/`): `ckpt-r1/…` is run `r1`."""
    write(tmp_path / "inv.csv", f"""
{HEADER}
b,checkpoints/r1/step-1/m.pt,10,2026-06-01
b,checkpoints-old/archive/step-1/m.pt,20,2026-06-01
b,checkpoints,3,2026-06-01
b,checkpoints//r2/step-1/m.pt,4,2026-06-01
b,ckpt-r1/step-1/m.pt,30,2026-06-01
b,runs/run=r1/step-1/m.pt,50,2026-06-01
""")
    located = {}
    for prefix in ("checkpoints", "checkpoints/", "ckpt-", "runs/run="):
        rows = build(con, tmp_path, {"kind": "inventory", "path": "inv.csv", "prefix": prefix})
        located[prefix] = [(r[1], r[5], r[6], r[7]) for r in rows if r[5] is not None]
        if prefix == "checkpoints":
            assert violations(con, r1="RUNNING", r2="RUNNING") == []  # no orphan `-old`
    # (a `/` doubled after the prefix counts once)
    assert located["checkpoints"] == located["checkpoints/"] == [
        ("checkpoints//r2/step-1/m.pt", "checkpoints/", "r2", "step-1"),
        ("checkpoints/r1/step-1/m.pt", "checkpoints/", "r1", "step-1")]
    assert located["ckpt-"] == [("ckpt-r1/step-1/m.pt", "ckpt-", "r1", "step-1")]
    assert located["runs/run="] == [
        ("runs/run=r1/step-1/m.pt", "runs/run=", "r1", "step-1")]


def test_a_folder_marker_is_no_object(tmp_path, con):
    """A zero-byte object whose key ends in `/` is the folder the S3 console's "Create
    folder" writes: no data, no checkpoint. Counted, `step-4/` (the newest) pushed run
    live1's real `step-1` out of its newest 3 (`beyond_keep_last`), and `live1/` was a
    0-byte checkpoint of its own. An object ending in `/` that holds bytes is data."""
    from tests.ingest.test_s3_checkpoints import CONFIG_FOLDER, _daily_reports

    objects = [("checkpoints/", 0, "2026-06-01T00:00:00Z"),
               ("checkpoints/live1/", 0, "2026-06-01T00:00:00Z"),
               *((f"checkpoints/live1/step-{n}/m.pt", 10 * n, f"2026-07-0{n}T00:00:00Z")
                 for n in (1, 2, 3)),
               ("checkpoints/live1/step-4/", 0, "2026-07-04T00:00:00Z"),
               ("checkpoints/live1/step-5/", 7, "2026-06-04T00:00:00Z")]  # 7 bytes: data
    write(tmp_path / "inv.csv", HEADER + "\n" + "".join(
        f"ml-ckpt,{key},{size},{stamp}\n" for key, size, stamp in objects))
    _daily_reports(tmp_path / "reports" / CONFIG_FOLDER, {"2026-07-15": [
        ["ml-ckpt", key, "", "true", "false", str(size), stamp.replace("Z", ".000Z"), "e",
         "STANDARD"] for key, size, stamp in objects]})
    kept = [("checkpoints/live1/step-1/m.pt", "step-1"), ("checkpoints/live1/step-2/m.pt",
             "step-2"), ("checkpoints/live1/step-3/m.pt", "step-3"),
            ("checkpoints/live1/step-5/", "step-5")]
    for path in ("inv.csv", f"reports/{CONFIG_FOLDER}"):
        rows = build(con, tmp_path, {"kind": "inventory", "path": path,
                                     "prefix": "checkpoints/"})
        assert [(r[1], r[7]) for r in rows] == kept
        # the newest 3 are step-1..3; step-5 is older than each (4 June), beyond them
        assert violations(con, live1="RUNNING") == [
            ("checkpoints/live1/step-5/", "live1", "step-5", "beyond_keep_last")]


def test_an_object_listed_by_two_sources_is_kept_once(tmp_path, con):
    write(tmp_path / "inv.csv", f"{HEADER}\nml-ckpt,checkpoints/run-a/s1/x.pt,8,2026-07-01\n")
    _file(tmp_path / "bucket", "checkpoints/run-a/s1/x.pt", 8, datetime(2026, 7, 1))
    rows = build(con, tmp_path,
                 {"kind": "inventory", "path": "inv.csv", "prefix": "checkpoints/"},
                 {"kind": "local", "path": "bucket", "bucket": "ml-ckpt", "prefix": "other/"})
    assert [(r[1], r[6], r[8]) for r in rows] == [
        ("checkpoints/run-a/s1/x.pt", "run-a", "checkpoints[0] inventory")]


def test_copies_of_an_object_in_one_listing_are_one_object_or_an_error(tmp_path, con):
    """SPEC §11 duplicates: copies of an object (bucket, key, snapshot) in one source that
    are identical are one object; copies differing in size or time are an error naming the
    source, its file, the object and the two values. One was kept at random before (no
    order within a source): the bucket's bytes changed from run to run."""
    path = tmp_path / "inv.csv"
    entry = {"kind": "inventory", "path": "inv.csv", "prefix": "checkpoints/"}
    write(path, f"{HEADER}\nb,checkpoints/r1/s1/x.pt,8,2026-07-01\nb,other,1,2026-07-01\n"
                "b,checkpoints/r1/s1/x.pt,8,2026-07-01T00:00:00Z\n")
    assert [(r[1], r[2]) for r in build(con, tmp_path, entry)] == [
        ("checkpoints/r1/s1/x.pt", 8), ("other", 1)]
    for text, problem in [
        (f"{HEADER}\nb,checkpoints/r1/s1/x.pt,8,2026-07-01\nb,other,1,2026-07-01\n"
         "b,checkpoints/r1/s1/x.pt,9,2026-07-01\nb,checkpoints/r1/s1/x.pt,8,2026-07-01\n",
         "bucket b, key 'checkpoints/r1/s1/x.pt': listed twice with different values: size 8 "
         "and 9"),
        ("bucket,key,size,last_modified,snapshot_date\n"
         "b,k,8,2026-07-01,2026-07-05\nb,k,8,2026-07-02,2026-07-06\n"
         "b,k,9,2026-07-02,2026-07-05\n",
         "bucket b, key 'k', snapshot 2026-07-05: listed twice with different values: size 8 "
         "and 9, last_modified 2026-07-01 00:00:00 and 2026-07-02 00:00:00"),
    ]:
        write(path, text)
        with pytest.raises(SourceError) as err:
            build(con, tmp_path, entry)
        assert str(err.value) == f"checkpoints[0] inventory: {path}: {problem}"
    # two sources listing the object: one copy kept, by a total order (under a prefix, the
    # first source)
    write(path, f"{HEADER}\nb,checkpoints/r1/s1/x.pt,8,2026-07-01\n")
    write(tmp_path / "inv2.csv", f"{HEADER}\nb,checkpoints/r1/s1/x.pt,9,2026-07-02\n")
    for first, second in (("inv.csv", "inv2.csv"), ("inv2.csv", "inv.csv")):
        rows = build(con, tmp_path, {**entry, "path": first}, {**entry, "path": second})
        assert [(r[1], r[2], r[8]) for r in rows] == [
            ("checkpoints/r1/s1/x.pt", 8 if first == "inv.csv" else 9,
             "checkpoints[0] inventory")]


def test_two_reports_of_a_day_disagreeing_on_an_object_are_an_error(tmp_path, con):
    """Two S3 Inventory reports of one day in one configuration folder list the object
    twice in that day's snapshot: the same copy is one object; copies of another size are
    the conflict any one listing's are, named with the day."""
    from tests.ingest.test_s3_checkpoints import CONFIG_FOLDER, _csv_report, _manifest

    folder = tmp_path / "reports" / CONFIG_FOLDER
    (folder / "data").mkdir(parents=True)
    for n, size in enumerate(("8", "9")):
        (folder / "data" / f"{n}.csv.gz").write_bytes(_csv_report([[
            "ml-checkpoints", "checkpoints/run-a/s1/x.pt", "", "true", "false", size,
            "2026-07-01T00:00:00.000Z", "e", "STANDARD"]]))
    for n, stamp in enumerate(("2026-07-03T01-00Z", "2026-07-03T13-00Z")):
        (folder / stamp).mkdir()
        (folder / stamp / "manifest.json").write_text(
            _manifest(stamp[:10], "CSV", [f"{CONFIG_FOLDER}/data/{n}.csv.gz"]))
    with pytest.raises(SourceError) as err:
        build(con, tmp_path, {"kind": "inventory", "path": f"reports/{CONFIG_FOLDER}"})
    assert str(err.value) == (
        f"checkpoints[0] inventory: {folder}: bucket ml-checkpoints, key "
        "'checkpoints/run-a/s1/x.pt', snapshot 2026-07-03: listed twice with different "
        "values: size 8 and 9")


def test_the_runs_transaction_does_not_keep_the_listing(tmp_path):
    """Inside a run's transaction DuckDB keeps what a statement scanned until the commit: the
    listing reaches it as a stream, so its Arrow memory goes once the caller drops it — not
    after the attribution (a table registered there stayed: 1 GiB at 11M objects)."""
    import gc

    import pyarrow as pa

    from cost_pipeline.ingest.checkpoints import read_listing
    from cost_pipeline.warehouse import begin_run_transaction, ensure_schema

    rows = "".join(f"ml-ckpt,checkpoints/run-{i % 97}/step-{i}/model.pt,{i},2026-07-02T00:00:00Z\n"
                   for i in range(60_000))
    cfg = parse_config({"checkpoints": [{"kind": "inventory", "path": "inventory.csv",
                                         "prefix": "checkpoints/"}]}, tmp_path)
    write(tmp_path / "inventory.csv", f"{HEADER}\n{rows}")
    warehouse = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    ensure_schema(warehouse)
    begin_run_transaction(warehouse)
    before = pa.total_allocated_bytes()
    listing = read_listing(cfg, JULY, LOG)
    assert build_checkpoint_inventory(warehouse, cfg, JULY, LOG, listing=listing) == 60_000
    held = pa.total_allocated_bytes() - before
    assert held >= listing.nbytes > 3_000_000
    del listing
    gc.collect()
    assert pa.total_allocated_bytes() - before < held / 10
    warehouse.execute("COMMIT")
    assert warehouse.execute("SELECT count(*), sum(size) FROM checkpoint_inventory").fetchone() \
        == (60_000, sum(range(60_000)))
    warehouse.close()


def test_a_handed_listing_goes_as_it_is_written(tmp_path, monkeypatch):
    """A listing handed over (`HandedListing`, as the ingest step does) is let go batch by
    batch as DuckDB reads it: when the last batch goes, at most the last ones remain of its
    Arrow memory, where a listing its caller still holds stays whole through the write (a
    month of daily reports: 880 MiB on top of the write's own)."""
    import pyarrow as pa

    from cost_pipeline.ingest import checkpoints
    from cost_pipeline.warehouse import begin_run_transaction, ensure_schema
    from tests.ingest.test_s3_checkpoints import CONFIG_FOLDER, _daily_reports

    _daily_reports(tmp_path / "inv" / CONFIG_FOLDER, {
        f"2026-07-{day:02d}": [["ml-checkpoints", f"checkpoints/run-{i % 89}/ck-{i}/m.pt", "",
                                "true", "false", str(i), "2026-07-01T00:00:00.000Z", "e",
                                "STANDARD"] for i in range(8_000)]
        for day in range(1, 31)})
    cfg = parse_config({"checkpoints": [{"kind": "inventory", "path": f"inv/{CONFIG_FOLDER}",
                                         "prefix": "checkpoints/"}]}, tmp_path)
    warehouse = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    ensure_schema(warehouse)
    begin_run_transaction(warehouse)
    before = pa.total_allocated_bytes()
    listing = checkpoints.read_listing(cfg, JULY, LOG)
    size = listing.nbytes
    assert size > 6_000_000 and len(listing.to_batches()) >= 30

    left: list[int] = []
    handed_out = checkpoints._handed_out

    def watched(batches):  # the Arrow memory left as each batch goes to DuckDB
        for batch in handed_out(batches):
            left.append(pa.total_allocated_bytes() - before)
            yield batch

    monkeypatch.setattr(checkpoints, "_handed_out", watched)
    handed = checkpoints.HandedListing(listing)
    del listing
    assert build_checkpoint_inventory(warehouse, cfg, JULY, LOG, listing=handed) == 240_000
    assert len(left) >= 30 and left[0] >= size and left[-1] < size / 4
    with pytest.raises(RuntimeError, match="handed over already"):
        handed.take()
    warehouse.execute("COMMIT")
    assert warehouse.execute("SELECT count(*), count(DISTINCT snapshot_date) "
                             "FROM checkpoint_inventory").fetchone() == (240_000, 30)
    warehouse.close()


def test_an_object_is_counted_for_repeats_unless_its_listing_lists_each_once(tmp_path, con):
    """The count of objects listed twice (1.07 s at 10.8M objects) is left out only where the
    listing's making proves none is: one bucket listed or folder walked, or S3 Inventory
    reports of distinct days. A plain CSV repeating a row, or two reports of one day, still
    keep each object once."""
    from cost_pipeline.ingest.checkpoints import EACH_ONCE, read_listing
    from tests.ingest.test_s3_checkpoints import CONFIG_FOLDER, _csv_report, _manifest

    def each_once(*entries: dict) -> bool:
        listing = read_listing(parse_config({"checkpoints": list(entries)}, tmp_path), JULY,
                               LOG)
        return listing.schema.metadata[EACH_ONCE] == b"1"

    write(tmp_path / "inv.csv", f"{HEADER}\nml-ckpt,checkpoints/run-a/s1/x.pt,8,2026-07-01\n"
          "ml-ckpt,checkpoints/run-a/s1/x.pt,8,2026-07-01\n")
    plain = {"kind": "inventory", "path": "inv.csv", "prefix": "checkpoints/"}
    assert not each_once(plain)
    assert [r[1] for r in build(con, tmp_path, plain)] == ["checkpoints/run-a/s1/x.pt"]
    _file(tmp_path / "bucket", "checkpoints/run-a/s1/x.pt", 8, datetime(2026, 7, 1))
    local = {"kind": "local", "path": "bucket", "bucket": "ml-ckpt"}
    assert each_once(local) and not each_once(plain, local)

    folder = tmp_path / "reports" / CONFIG_FOLDER
    row = ["ml-checkpoints", "checkpoints/run-a/s1/x.pt", "", "true", "false", "8",
           "2026-07-01T00:00:00.000Z", "e", "STANDARD"]
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "a.csv.gz").write_bytes(_csv_report([row]))
    reports = {"kind": "inventory", "path": f"reports/{CONFIG_FOLDER}"}
    for stamp in ("2026-07-02T01-00Z", "2026-07-03T01-00Z", "2026-07-03T13-00Z"):
        (folder / stamp).mkdir()
        (folder / stamp / "manifest.json").write_text(
            _manifest(stamp[:10], "CSV", [f"{CONFIG_FOLDER}/data/a.csv.gz"]))
        if stamp == "2026-07-03T01-00Z":  # two days' reports, each object once
            assert each_once(reports)
            assert len(build(con, tmp_path, reports)) == 2
    # a second report of the 3rd lists the object again that day: kept once
    assert not each_once(reports)
    assert [(r[1], r[4]) for r in build(con, tmp_path, reports)] == [
        ("checkpoints/run-a/s1/x.pt", date(2026, 7, d)) for d in (2, 3)]


def test_a_prefix_no_object_is_under_is_said(tmp_path, con, caplog):
    """`/checkpoints/` for keys `checkpoints/…`: no object was a run's checkpoint, the
    retention table empty and the lever $0, without a word. The listing says so."""
    write(tmp_path / "inv.csv", f"{HEADER}\nb,checkpoints/r1/s1/x.pt,8,2026-07-01\n")
    entry = {"kind": "inventory", "path": "inv.csv", "prefix": "/checkpoints/"}
    with caplog.at_level(logging.WARNING, logger="test"):
        build(con, tmp_path, entry)
    assert ("checkpoints[0] inventory: none of its 1 object(s) is under prefix '/checkpoints/', "
            "so no object is a run's checkpoint (keys start like 'checkpoints/r1/s1/x.pt'): "
            "check the prefix") in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="test"):
        build(con, tmp_path, {**entry, "prefix": "checkpoints"})
    assert "check the prefix" not in caplog.text


def test_an_inventory_without_a_report_of_the_month_is_said(tmp_path, con, caplog):
    """Its only report dated 2026-08-01: July read as an empty bucket without a word (its
    storage all untracked, no violation, the budget check passing). The listing says so;
    August, which the report is of, does not."""
    from tests.ingest.test_s3_checkpoints import CONFIG_FOLDER, _csv_report, _manifest

    folder = tmp_path / "reports" / CONFIG_FOLDER
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "0.csv.gz").write_bytes(_csv_report([[
        "ml-checkpoints", "checkpoints/run-a/s1/x.pt", "", "true", "false", "8",
        "2026-07-01T00:00:00.000Z", "e", "STANDARD"]]))
    (folder / "2026-08-01T01-00Z").mkdir()
    (folder / "2026-08-01T01-00Z" / "manifest.json").write_text(
        _manifest("2026-08-01", "CSV", [f"{CONFIG_FOLDER}/data/0.csv.gz"]))
    entry = {"kind": "inventory", "path": f"reports/{CONFIG_FOLDER}"}
    with caplog.at_level(logging.WARNING, logger="test"):
        assert build(con, tmp_path, entry) == []
    assert ("checkpoints[0] inventory: no object listed in 2026-07: its buckets read as empty "
            "this month (an S3 Inventory month is read from the reports dated in it") in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="test"):
        assert len(build(con, tmp_path, entry, month=date(2026, 8, 1))) == 1
    assert "no object listed" not in caplog.text


def test_a_column_named_twice_in_a_listings_header_is_refused(tmp_path, con):
    """Both readers read the first copy without a word: the object's size here 1 byte, where
    the second `size` says 4096."""
    from cost_pipeline.ingest.sources.listing_rows import read_inventory_csv

    path = write(tmp_path / "inv.csv", f"{HEADER},Size\nb,ckpt/r1/s1/x.pt,1,2026-07-01,4096\n")
    problem = "column size appears twice in the header (columns 3 and 5): keep one"
    with pytest.raises(SourceError) as err:
        build(con, tmp_path, {"kind": "inventory", "path": "inv.csv"})
    assert str(err.value) == f"checkpoints[0] inventory: {path}: {problem}"
    with pytest.raises(SourceError) as err:
        list(read_inventory_csv(path, "inventory", None))
    assert str(err.value) == f"inventory: {path}: {problem}"
    # a column neither reader reads may be named twice
    write(tmp_path / "inv.csv", f"{HEADER},etag,etag\nb,ckpt/r1/s1/x.pt,1,2026-07-01,e,f\n")
    assert [r[2] for r in build(con, tmp_path, {"kind": "inventory", "path": "inv.csv"})] == [1]


def _held(con, month: date = JULY) -> tuple[list[tuple], list[tuple]]:
    """The month's (source, key) objects and (source, snapshot) days."""
    return (con.execute("SELECT source, key FROM checkpoint_inventory WHERE month = ? "
                        "ORDER BY source, key", [month]).fetchall(),
            con.execute("SELECT source, snapshot_date FROM checkpoint_snapshots WHERE month = ? "
                        "ORDER BY source, snapshot_date", [month]).fetchall())


def test_a_listing_emptied_where_the_month_holds_its_objects_is_refused(tmp_path, con,
                                                                        caplog):
    """A listing cut to its header (an export interrupted, a path moved to an empty one)
    replaced the month's objects by none with exit 0: every storage line untracked, no
    retention violation, the check passing. As an emptied bill or tracker is, it is refused
    naming the source, the month and the objects the month keeps; the other listing's
    objects do not count for it, `--force` (keep_held=False) empties it, and a month the
    warehouse holds nothing of is still only said to be empty."""
    write(tmp_path / "inv.csv", f"{HEADER}\nml-ckpt,checkpoints/run-a/s1/x.pt,8,2026-07-02\n"
          "ml-ckpt,checkpoints/run-a/s2/x.pt,9,2026-07-03\n"
          "ml-ckpt,checkpoints/run-b/s1/x.pt,7,2026-07-04\n")
    _file(tmp_path / "bucket", "checkpoints/run-c/s1/y.pt", 5, datetime(2026, 7, 5))
    entries = ({"kind": "inventory", "path": "inv.csv", "prefix": "checkpoints/"},
               {"kind": "local", "path": "bucket", "bucket": "other", "prefix": "checkpoints/"})
    assert len(build(con, tmp_path, *entries)) == 4
    before = _held(con)
    assert before[0][0] == ("checkpoints[0] inventory", "checkpoints/run-a/s1/x.pt")
    write(tmp_path / "inv.csv", f"{HEADER}\n")
    with pytest.raises(SourceError) as error:
        build(con, tmp_path, *entries)
    assert str(error.value) == (
        "checkpoints[0] inventory: 2026-07: the listing holds no object of the month, where "
        "the warehouse holds 3 of the month's from it: its file or bucket emptied, or a path "
        "moved? The month keeps its listing; `materialize --force` empties it")
    assert _held(con) == before
    cfg = parse_config({"checkpoints": list(entries)}, tmp_path)
    assert build_checkpoint_inventory(con, cfg, JULY, LOG, keep_held=False) == 1
    assert _held(con)[0] == [("checkpoints[1] local", "checkpoints/run-c/s1/y.pt")]
    # June, which the warehouse holds nothing of: said, not refused
    with caplog.at_level(logging.WARNING, logger="test"):
        assert build(con, tmp_path, entries[0], month=date(2026, 6, 1)) == []
    assert "checkpoints[0] inventory: no object listed in 2026-06" in caplog.text


def test_an_s3_bucket_listing_emptied_is_refused(tmp_path, con, s3_server):
    """The `s3` kind listing a bucket that now holds nothing (its objects deleted, the wrong
    bucket or endpoint configured) keeps the month's listing as a listing file does."""
    from cost_pipeline.demo.local_s3 import s3_client
    from tests.support.s3_server import new_bucket, put

    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    for key in ("checkpoints/run-a/s1/x.pt", "checkpoints/run-a/s2/x.pt"):
        put(endpoint, bucket, key, b"0123456789")
    this_month = datetime.now(UTC).date().replace(day=1)
    entry = {"kind": "s3", "bucket": bucket, "prefix": "checkpoints/",
             "endpoint_url": endpoint, "region": "us-east-1"}
    assert len(build(con, tmp_path, entry, month=this_month)) == 2
    before = _held(con, this_month)
    for key in ("checkpoints/run-a/s1/x.pt", "checkpoints/run-a/s2/x.pt"):
        s3_client(endpoint).delete_object(Bucket=bucket, Key=key)
    with pytest.raises(SourceError, match=rf"^checkpoints\[0\] s3: {this_month:%Y-%m}: the "
                                          r"listing holds no object of the month, where the "
                                          r"warehouse holds 2 of the month's from it"):
        build(con, tmp_path, entry, month=this_month)
    assert _held(con, this_month) == before
