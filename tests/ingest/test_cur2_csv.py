"""A CUR 2.0 export in file format TEXT_OR_CSV (gzip, zip or plain CSV; local and on a real
S3 server) reads as the same export delivered in parquet: the same billing_facts, each line
named by its file and its line there; a broken file, record or value is refused naming the
file and the row."""

from __future__ import annotations

import gzip
import re
import tempfile
import zipfile
from datetime import date, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cost_pipeline.config import parse_config
from cost_pipeline.demo.local_s3 import upload_tree
from cost_pipeline.ingest.billing import build_billing_facts
from cost_pipeline.ingest.sources import SourceError
from tests.support.cur_rows import (
    COLUMNS,
    EXPORT,
    HOUR,
    LOG,
    S3_EXPORT,
    T0,
    build,
    config,
    csv_bytes,
    export_as_csv,
    line,
    month_dir,
    write_compressed,
    write_csv_export,
    write_export,
    write_manifest,
)
from tests.support.s3_server import FlakyProxy, new_bucket

FACTS = "SELECT * EXCLUDE (month, x_File, x_Row) FROM billing_facts ORDER BY x_SourceLine"
SP_ARN = "arn:aws:savingsplans::999988887777:savingsplan/0a1b2c3d"
RI_ARN = "arn:aws:ec2:us-east-1:999988887777:reserved-instances/5e6f7a8b"


@pytest.fixture
def con():
    connection = duckdb.connect()
    yield connection
    connection.close()


def month_lines() -> list[dict]:
    """Lines of every kind the normalization tells apart: a tagged GPU hour, a covered and
    a discounted hour, a negation, a fee, a tax, storage whose description holds a comma,
    quotes and a line break, a line without net cost, a cost of many digits."""
    gpu = dict(line_item_usage_type="USE1-BoxUsage:p4d.24xlarge",
               product_instance_type="p4d.24xlarge", line_item_resource_id="i-0gpu",
               product={"product_name": "Amazon Elastic Compute Cloud", "gpu": "8"})
    return [
        line(32.77, identity_line_item_id="g1", resource_tags={"user:run_id": "r1"}, **gpu),
        line(0.0, identity_line_item_id="g2", start=T0 + HOUR, **gpu,
             line_item_line_item_type="SavingsPlanCoveredUsage",
             savings_plan_savings_plan_a_r_n=SP_ARN,
             savings_plan_savings_plan_effective_cost=21.5,
             savings_plan_net_savings_plan_effective_cost=20.25,
             resource_tags={"user:run_id": "r1", "user:team": "vision, nlp"}),
        line(-32.77, identity_line_item_id="g3", start=T0 + HOUR, **gpu,
             line_item_line_item_type="SavingsPlanNegation",
             savings_plan_savings_plan_a_r_n=SP_ARN),
        line(0.0, identity_line_item_id="r1", line_item_line_item_type="DiscountedUsage",
             line_item_resource_id="i-0ri", reservation_reservation_a_r_n=RI_ARN,
             reservation_effective_cost=0.061, reservation_net_effective_cost=0.058),
        line(740.0, identity_line_item_id="f1", line_item_line_item_type="RIFee",
             line_item_resource_id=None, reservation_reservation_a_r_n=RI_ARN,
             reservation_unused_recurring_fee=12.5, resource_tags=None),
        # an instance type of no known accelerator count: the product's `gpu` attribute,
        # among many others (a CSV line's product holds ~35), says how many
        line(9.5, identity_line_item_id="u1", line_item_usage_type="USE1-BoxUsage:p9.48xlarge",
             product_instance_type="p9.48xlarge", line_item_resource_id="i-0new",
             product={"servicename": "Amazon Elastic Compute Cloud", "gpu": "16",
                      **{f"attribute_{i}": f"value {i}, \"quoted\"" for i in range(35)}}),
        line(1.23, identity_line_item_id="t1", line_item_line_item_type="Tax",
             line_item_usage_type="Tax", line_item_resource_id=None, resource_tags=None),
        line(0.000123456789012345, identity_line_item_id="s1", net=None,
             line_item_product_code="AmazonS3", line_item_usage_type="USW2-TimedStorage-ByteHrs",
             line_item_resource_id="ml-checkpoints", product_product_family="Storage",
             line_item_line_item_description='$0.023 per GB-Mo, "standard"\nstorage',
             line_item_usage_amount=0.005, pricing_unit="GB-Mo"),
    ]


@pytest.mark.parametrize("compression", ["gzip", "zip", "plain"])
@pytest.mark.parametrize("manifest", [True, False])
def test_a_csv_export_reads_as_its_parquet_delivery(tmp_path, con, compression, manifest):
    rows = month_lines()
    parquet = write_export(tmp_path / "parquet", {"a.parquet": rows[:4], "b.parquet": rows[4:]})
    build(con, config(tmp_path, parquet))
    expected = con.execute(FACTS).fetchall()
    text = write_csv_export(tmp_path / "csv", {"a": rows[:4], "b": rows[4:]},
                            compression=compression, manifest=manifest)
    build(con, config(tmp_path, text))
    assert con.execute(FACTS).fetchall() == expected and len(expected) == 8
    # each line named by its file and its line there (the header is line 1; the storage
    # line's description spans two lines, yet it is the fourth record)
    suffix = {"gzip": ".csv.gz", "zip": ".csv.zip"}.get(compression, ".csv")
    named = dict(con.execute("SELECT split_part(x_SourceLine, ':', 2), "
                             "parse_filename(x_File) || ' ' || x_Row FROM billing_facts"
                             ).fetchall())
    assert named["g1"] == f"a{suffix} 2" and named["r1"] == f"a{suffix} 5"
    assert named["s1"] == f"b{suffix} 5"
    assert con.execute("SELECT x_AcceleratorCount, ServiceName FROM billing_facts WHERE "
                       "x_SourceLine LIKE '%:u1:%'").fetchone() == (16, "Amazon Elastic "
                                                                      "Compute Cloud")


def test_the_product_keys_cut_from_json_text_are_those_the_normalization_reads():
    # a `product` held as JSON text is cut to PRODUCT_KEYS before it is read as a map: a
    # key the SQL reads and the list lacks would read as NULL on every such line
    import re
    from pathlib import Path

    from cost_pipeline.ingest.sources import cur2

    assets = Path(cur2.__file__).resolve().parents[3] / "assets" / "ingest"
    read = {key for sql in assets.glob("billing_facts_cur2*.sql")
            for key in re.findall(r"product\[\s*'([^']+)'\s*\]", sql.read_text())}
    assert read and read <= set(cur2.PRODUCT_KEYS)


def test_an_export_selecting_the_tags_column_reads_as_its_parquet_delivery(tmp_path, con):
    # CUR 2.0's `tags` column in place of resource_tags: the resource's own tags, from JSON
    tags = pa.map_(pa.string(), pa.string())
    rows = [line(1.0, identity_line_item_id="a", tags={"resourceTags/user:run_id": "r1",
                                                       "accountTag/team": "finance"}),
            line(2.0, identity_line_item_id="b", tags={"costCategory/project": "research"}),
            line(4.0, identity_line_item_id="c", tags=None)]
    shape = {"drop": ("resource_tags",), "extra": {"tags": tags}}
    build(con, config(tmp_path, write_export(tmp_path / "parquet", {"a.parquet": rows},
                                             **shape)))
    expected = con.execute(FACTS).fetchall()
    build(con, config(tmp_path, write_csv_export(tmp_path / "csv", {"a": rows}, **shape)))
    assert con.execute(FACTS).fetchall() == expected
    assert con.execute("SELECT Tags FROM billing_facts ORDER BY x_Row").fetchall() == [
        ({"user:run_id": "r1"},), ({},), (None,)]


def test_the_demo_quarter_reads_from_csv_as_from_parquet(tmp_path):
    # the demo's three months (1,453 to 2,865 lines: instances, volumes, buckets, transfer)
    # converted as an export in CSV format delivers them: every billing fact the same
    from cost_pipeline.demo.generate import generate_demo

    generate_demo(tmp_path / "demo")
    parquet = tmp_path / "demo" / "exports" / "cur" / EXPORT
    text = export_as_csv(parquet, tmp_path / "csv" / EXPORT)
    assert sorted(p.suffix for p in text.glob("data/**/*.*")) == [".gz"] * 6
    for month in (date(2026, 7, 1), date(2026, 8, 1), date(2026, 9, 1)):
        read = []
        for export in (parquet, text):
            with duckdb.connect() as con:
                build_billing_facts(con, config(tmp_path, export), month, LOG)
                read.append(con.execute(FACTS).fetchall())
        assert read[0] == read[1] and len(read[0]) > 1000


@pytest.mark.parametrize("compression", ["gzip", "zip"])
def test_a_csv_export_on_s3_reads_as_its_local_copy(tmp_path, s3_server, con, compression):
    rows = month_lines()
    export = write_csv_export(tmp_path, {"a": rows[:4], "b": rows[4:]}, compression=compression)
    build(con, config(tmp_path, export))
    local = con.execute(FACTS).fetchall()
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    upload_tree(endpoint, export, bucket, f"cur/{EXPORT}")
    entry = {"kind": "aws_cur2", "path": f"s3://{bucket}/cur/{EXPORT}",
             "endpoint_url": endpoint, "region": "us-east-1"}
    build(con, parse_config({"billing": [entry]}, tmp_path))
    assert con.execute(FACTS).fetchall() == local and len(local) == 8
    assert con.execute("SELECT DISTINCT x_File FROM billing_facts ORDER BY 1").fetchall() == [
        (f"s3://{bucket}/cur/{EXPORT}/data/BILLING_PERIOD=2026-07/{name}{suffix}",)
        for name in ("a", "b") for suffix in [".csv.gz" if compression == "gzip" else ".csv.zip"]]
    # a record of too few cells in b: named by its row, found by a second read from S3
    broken = tmp_path / "broken" / EXPORT
    write_csv_export(tmp_path / "broken", {"a": rows[:4], "b": rows[4:]}, compression=compression)
    text = csv_bytes(rows[4:]).split(b"\r\n")
    data = b"\r\n".join([*text[:3], b"x,y", *text[3:]])  # header, rows 2 and 3, then row 4
    name = write_compressed(month_dir(broken) / "b", data, compression)
    upload_tree(endpoint, broken, bucket, f"broken/{EXPORT}")
    with pytest.raises(SourceError, match=rf"{name.name} row 4: unreadable CSV file \(CSV parse "
                                          r"error: Expected \d+ columns, got 2"):
        build(con, parse_config({"billing": [{**entry, "path": f"s3://{bucket}/broken/{EXPORT}"}]},
                                tmp_path))


def _garbled(data: bytes) -> bytes:
    """`data` with bytes 40 to 60, the start of its deflate stream, flipped."""
    return data[:40] + bytes(b ^ 0x55 for b in data[40:60]) + data[60:]


@pytest.mark.parametrize(("compression", "cut", "problem"), [
    ("gzip", lambda data: data[:60], r"unreadable CSV file \(Truncated compressed stream\)"),
    ("gzip", _garbled, r"unreadable CSV file \(zlib inflate failed: [^)]+\)"),
    ("zip", _garbled, r"unreadable CSV file \(Error -3 while decompressing data: [^)]+\)"),
], ids=["gzip cut short", "gzip of broken bytes", "zip of broken bytes"])
def test_a_broken_compressed_file_on_s3_is_refused_as_its_local_copy_and_read_once(
        tmp_path, s3_server, con, compression, cut, problem):
    # a gzip cut short read from S3 was `S3 error after up to 5 attempts: Truncated
    # compressed stream`, and a broken deflate stream in a ZIP `not a readable parquet file`:
    # the bytes are broken, no transfer failed
    export = write_csv_export(tmp_path, {"a": [line(float(i)) for i in range(300)]},
                              compression=compression)
    name = "a.csv.gz" if compression == "gzip" else "a.csv.zip"
    data = month_dir(export) / name
    data.write_bytes(cut(data.read_bytes()))
    with pytest.raises(SourceError) as local:
        build(con, config(tmp_path, export))
    assert local.value.where == str(data) and re.fullmatch(problem, local.value.problem)
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    upload_tree(endpoint, export, bucket, f"cur/{EXPORT}")
    key = f"cur/{EXPORT}/data/BILLING_PERIOD=2026-07/{name}"
    with FlakyProxy(endpoint, failures=0) as proxy, pytest.raises(SourceError) as remote:
        build(con, parse_config({"billing": [{
            "kind": "aws_cur2", "path": f"s3://{bucket}/cur/{EXPORT}",
            "endpoint_url": proxy.endpoint_url, "region": "us-east-1"}]}, tmp_path))
    assert remote.value.where == f"s3://{bucket}/{key}"
    assert remote.value.problem == local.value.problem
    if compression == "gzip":  # streamed once: no transfer to retry (a ZIP is read by ranges)
        assert [p for p in proxy.paths if p.startswith("GET") and name in p] == [
            f"GET /{bucket}/{key.replace('=', '%3D')}"]


def test_capitals_semicolons_and_a_bom_read_as_aws_writes_them(tmp_path, con):
    # a copy saved by a spreadsheet or unloaded from a warehouse: names in capitals,
    # semicolons, a byte-order mark
    rows = month_lines()
    plain = write_csv_export(tmp_path / "plain", {"a": rows})
    build(con, config(tmp_path, plain))
    expected = con.execute(FACTS).fetchall()
    other = tmp_path / "other" / EXPORT
    text = csv_bytes(rows, delimiter=";").decode()
    header, body = text.split("\n", 1)
    (month_dir(other)).mkdir(parents=True)
    (month_dir(other) / "a.csv.gz").write_bytes(
        gzip.compress(("\ufeff" + header.upper() + "\n" + body).encode()))
    build(con, config(tmp_path, other))
    assert con.execute(FACTS).fetchall() == expected


def test_a_month_mixing_csv_and_parquet_files_is_refused(tmp_path, con):
    # an export recreated in the other format leaves the old delivery's files beside the new
    export = write_export(tmp_path, {"old.parquet": [line(1.0)]}, manifest=False)
    (month_dir(export) / "new.csv.gz").write_bytes(gzip.compress(csv_bytes([line(2.0)])))
    with pytest.raises(SourceError, match=r"new\.csv\.gz: the month mixes CSV .* and parquet "
                                          r".*old\.parquet.* files"):
        build(con, config(tmp_path, export))
    write_manifest(export, [f"{S3_EXPORT}/data/BILLING_PERIOD=2026-07/{name}"
                            for name in ("old.parquet", "new.csv.gz")])
    with pytest.raises(SourceError, match=r"Manifest\.json: the month mixes CSV"):
        build(con, config(tmp_path, export))
    # the manifest names the current delivery: the stale parquet file is then ignored
    write_manifest(export, [f"{S3_EXPORT}/data/BILLING_PERIOD=2026-07/new.csv.gz"])
    build(con, config(tmp_path, export))
    assert con.execute("SELECT sum(BilledCost) FROM billing_facts").fetchone() == (2.0,)


def _one_file_export(tmp_path, data: bytes, name: str = "a.csv.gz"):
    export = tmp_path / EXPORT
    month_dir(export).mkdir(parents=True)
    (month_dir(export) / name).write_bytes(data)
    return export


@pytest.mark.parametrize(("value", "message"), [
    ({"line_item_unblended_cost": "1,234.50"},
     r"a\.csv\.gz row 3: column line_item_unblended_cost is text that is not a number: "
     r"'1,234\.50'"),
    ({"resource_tags": "user:run_id=r1"},
     r"a\.csv\.gz row 3: column resource_tags is text that is neither a JSON object nor a "
     r"map: 'user:run_id=r1'"),
    ({"line_item_usage_end_date": "yesterday"},
     r"a\.csv\.gz row 3: line_item_usage_end_date is empty or not a timestamp"),
    ({"bill_billing_period_start_date": "2026-06-01T00:00:00Z"},
     r"a\.csv\.gz row 3: bill_billing_period_start_date 2026-06-01 is not the delivery's "
     r"billing period 2026-07: a file of another month in its folder\?"),
])
def test_a_bad_value_names_the_file_and_the_row(tmp_path, con, value, message):
    rows = month_lines()
    rows[1].update(value)
    export = _one_file_export(tmp_path, gzip.compress(csv_bytes(rows)))
    with pytest.raises(SourceError, match=message):
        build(con, config(tmp_path, export))
    assert con.execute("SELECT count(*) FROM billing_facts").fetchone() == (0,)


def test_a_csv_file_of_another_month_in_the_months_folder_is_refused(tmp_path, con):
    # June's gzipped CSV copied into July's folder (no manifest: every file there is the
    # month) was read as July, June's lines counted in two months
    export = write_csv_export(tmp_path, {"a": month_lines()}, manifest=False)
    june = [line(5.0, identity_line_item_id=f"j{i}", start=T0 - (i + 1) * HOUR,
                 bill_billing_period_start_date=T0 - 30 * 24 * HOUR) for i in range(2)]
    write_compressed(month_dir(export) / "b", csv_bytes(june), "gzip")
    with pytest.raises(SourceError) as err:
        build(con, config(tmp_path, export))
    assert str(err.value) == (
        f"aws_cur2: {month_dir(export) / 'b.csv.gz'} row 2: bill_billing_period_start_date "
        "2026-06-01 is not the delivery's billing period 2026-07: a file of another month in "
        "its folder?")
    assert con.execute("SELECT count(*) FROM billing_facts").fetchone() == (0,)
    # the period as an instant with an offset (UTC midnight of the 1st): the month's own
    (month_dir(export) / "b.csv.gz").unlink()
    rows = month_lines()
    rows[0]["bill_billing_period_start_date"] = "2026-06-30T19:00:00-05:00"
    rows[1]["bill_billing_period_start_date"] = None  # an empty field: the delivery's
    export = write_csv_export(tmp_path / "offset", {"a": rows}, manifest=False)
    build(con, config(tmp_path / "offset", export))
    assert con.execute("SELECT DISTINCT BillingPeriodStart FROM billing_facts").fetchall() == [
        (datetime(2026, 7, 1),)]
    assert con.execute("SELECT count(*) FROM billing_facts").fetchone() == (len(rows),)


def test_a_broken_file_or_record_is_refused_naming_the_file(tmp_path, con, caplog):
    # 60,000 records, ~14 MB: pyarrow fails a 4 MiB block; the record is found by a second
    # read (csv_fault), its row as `x_Row` numbers rows and, after a value spanning lines, its line
    rows = [line(float(i), start=T0 + (i % 700) * HOUR) for i in range(60_000)]
    good = csv_bytes(rows)
    records = good.split(b"\r\n")  # [header, row 2, row 3, …, ""] (no value spans lines)
    spanning = csv_bytes([*rows[:10], line(1.0, line_item_line_item_description="a\nb\nc"),
                          *rows[10:]])

    def at(row: int, record: bytes, data: bytes = good) -> bytes:
        lines = data.split(b"\r\n")
        return b"\r\n".join([*lines[:row - 1], record, *lines[row - 1:]])

    cases = {
        "not gzip": (good, r"a\.csv\.gz: unreadable CSV file \(.*(gzip|zlib)"),
        "cut short": (gzip.compress(good)[:-5000],
                      r"a\.csv\.gz: unreadable CSV file \(Truncated compressed stream"),
        "extra cell": (gzip.compress(good + b"x" + b",y" * 60 + b"\n"),
                       r"a\.csv\.gz row 60002: unreadable CSV file \(CSV parse error: "
                       rf"Expected {len(COLUMNS)} columns, got 61"),
        "too few cells": (gzip.compress(at(41_234, b"x,y")),
                          r"a\.csv\.gz row 41234: unreadable CSV file \(CSV parse error: "
                          rf"Expected {len(COLUMNS)} columns, got 2"),
        "after a value spanning lines": (
            gzip.compress(at(50_001, b"x,y", spanning)),
            r"a\.csv\.gz row 50001 \(line 50003\): unreadable CSV file \(CSV parse error: "
            rf"Expected {len(COLUMNS)} columns, got 2"),
        "not UTF-8": (gzip.compress(at(33_334, records[1].replace(b"i-0aaa", b"i-0a\xff\xfe"))),
                      r"a\.csv\.gz row 33334: unreadable CSV file \(In CSV column #\d+ "
                      r"\(line_item_resource_id\): CSV conversion error to string: invalid"),
        "not UTF-8 in the first block": (
            gzip.compress(good.replace(b"i-0aaa", b"i-0a\xff\xfe", 1)),
            r"a\.csv\.gz row 2: unreadable CSV file \(In CSV column #\d+ "),
    }
    for case, (data, message) in cases.items():
        folder = tmp_path / case.replace(" ", "-")
        caplog.clear()
        with caplog.at_level("INFO"), pytest.raises(SourceError, match=message):
            build(con, config(folder, _one_file_export(folder, data)))
        # the second read is said before it starts (seconds for millions of records)
        assert ("a.csv.gz: unreadable; reading it again to name the record" in caplog.text) \
            == (" row " in message), case
    header_only = _one_file_export(tmp_path / "missing", gzip.compress(
        csv_bytes([line(1.0)], drop=("line_item_usage_type",))))
    with pytest.raises(SourceError, match=r"a\.csv\.gz: missing required column "
                                          r"line_item_usage_type"):
        build(con, config(tmp_path, header_only))


@pytest.mark.parametrize(("data", "name", "message"), [
    (b"", "a.csv.gz", "empty file (no header)"),
    (gzip.compress(b""), "a.csv.gz", "empty file (no header)"),
    (b"", "a.csv", "empty file (no header)"),
    (gzip.compress(b"\r\n"), "a.csv.gz", "empty file (no header)"),
    (gzip.compress(b"\r\n" + csv_bytes([line(1.0)])), "a.csv.gz",
     "its first line is blank: no header"),
], ids=["no bytes", "gzip of nothing", "plain", "a blank line", "a blank first line"])
def test_an_empty_file_is_refused_as_empty(tmp_path, con, data, name, message):
    # it was refused as an export created without resource IDs, to be recreated
    export = _one_file_export(tmp_path, data, name)
    with pytest.raises(SourceError) as error:
        build(con, config(tmp_path, export))
    assert (error.value.where, error.value.problem) == (str(month_dir(export) / name), message)

def test_a_zip_file_holds_one_csv_file(tmp_path, con):
    export = write_csv_export(tmp_path, {"a": [line(1.0)]}, compression="zip")
    archive = month_dir(export) / "a.csv.zip"
    with zipfile.ZipFile(archive, "a") as zipped:
        zipped.writestr("b.csv", csv_bytes([line(2.0)]))
    with pytest.raises(SourceError, match=r"a\.csv\.zip: a CUR 2\.0 ZIP file holds one CSV "
                                          r"file; this one holds 2: a\.csv, b\.csv"):
        build(con, config(tmp_path, export))
    archive.write_bytes(b"PK not a zip")
    with pytest.raises(SourceError, match=r"a\.csv\.zip: not a readable ZIP archive"):
        build(con, config(tmp_path, export))


def test_a_legacy_cur_file_is_refused_saying_what_it_is(tmp_path, con):
    # a legacy Cost and Usage Report's CSV (`lineItem/UnblendedCost`) in an export's folder
    # was refused as an export created without resource IDs
    legacy = ("identity/LineItemId,identity/TimeInterval,lineItem/UsageStartDate,"
              "lineItem/UnblendedCost,lineItem/ResourceId\n"
              "l1,2026-07-01T00:00:00Z/2026-07-01T01:00:00Z,2026-07-01T00:00:00Z,1.0,i-0a\n")
    export = _one_file_export(tmp_path, gzip.compress(legacy.encode()))
    with pytest.raises(SourceError, match=r"a\.csv\.gz: columns named as a legacy Cost and Usage "
                                          r"Report names them \(identity/LineItemId\): aws_cur2 "
                                          r"reads a CUR 2\.0 export"):
        build(con, config(tmp_path, export))


def test_a_focus_file_in_the_month_is_refused_as_no_cur_file(tmp_path, con):
    # a FOCUS CSV listed beside the month's CUR file was refused as an export created
    # without resource IDs, to be recreated with 'Include resource IDs'
    export = write_csv_export(tmp_path, {"a": [line(1.0)]}, manifest=False)
    focus = ("BilledCost,EffectiveCost,ChargePeriodStart,ResourceId\r\n"
             "1.5,1.5,2026-07-01T00:00:00Z,i-0a\r\n")
    (month_dir(export) / "focus.csv.gz").write_bytes(gzip.compress(focus.encode()))
    write_manifest(export, [f"{S3_EXPORT}/data/BILLING_PERIOD=2026-07/{name}"
                            for name in ("a.csv.gz", "focus.csv.gz")])
    with pytest.raises(SourceError) as err:
        build(con, config(tmp_path, export))
    assert (err.value.where, err.value.problem) == (
        str(month_dir(export) / "focus.csv.gz"),
        "not a CUR 2.0 data file: none of its columns (BilledCost, EffectiveCost, "
        "ChargePeriodStart, ResourceId) is one of CUR 2.0's (identity_line_item_id, "
        "line_item_unblended_cost, line_item_usage_start_date, …); they are FOCUS columns: "
        "read FOCUS files with a billing source of kind: focus")
    # a CUR 2.0 file lacking only line_item_resource_id: an export without resource IDs
    (month_dir(export) / "focus.csv.gz").write_bytes(
        gzip.compress(csv_bytes([line(2.0)], drop=("line_item_resource_id",))))
    with pytest.raises(SourceError, match=r"focus\.csv\.gz: the export has no "
                                          r"line_item_resource_id column: it was created "
                                          r"without resource IDs\. Recreate"):
        build(con, config(tmp_path, export))


# text a CSV field must carry whole: delimiters, quotes, line breaks, any Unicode
FIELD_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                     max_size=12)


@st.composite
def random_lines(draw) -> list[dict]:
    """CUR lines of random costs (any finite double below 1e12, negative, tiny), hours,
    usage and line types, and tags with any text for keys and values."""
    kinds = st.sampled_from([
        ("Usage", "USE1-BoxUsage:p4d.24xlarge", "i-0gpu"), ("Usage", "BoxUsage:m5.large", "i-0c"),
        ("Usage", "USW2-TimedStorage-ByteHrs", "ml-bucket"), ("Tax", "Tax", None),
        ("Credit", "Credit", None), ("Usage", "USE1-DataTransfer-Regional-Bytes", "i-0c")])
    money = st.one_of(st.floats(-1e12, 1e12, allow_nan=False, allow_infinity=False),
                      st.sampled_from([0.0, 1e-12, 0.1, 1 / 3]))
    rows = []
    for i in range(draw(st.integers(1, 12))):
        kind, usage, resource = draw(kinds)
        tags = draw(st.one_of(st.none(), st.dictionaries(FIELD_TEXT.filter(bool), FIELD_TEXT,
                                                         max_size=3)))
        rows.append(line(draw(money), identity_line_item_id=f"l{i}",
                         start=T0 + draw(st.integers(0, 700)) * HOUR,
                         hours=draw(st.sampled_from([1.0, 0.25])), net=draw(
                             st.one_of(st.just("same"), st.none(), money)),
                         line_item_line_item_type=kind, line_item_usage_type=usage,
                         line_item_resource_id=resource, resource_tags=tags,
                         line_item_line_item_description=draw(FIELD_TEXT),
                         line_item_usage_amount=draw(st.one_of(st.none(), money))))
    return rows


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rows=random_lines())
def test_any_month_reads_from_csv_as_from_parquet(rows):
    # the same lines in parquet and as AWS's CSV (every value text): the same billing facts
    with tempfile.TemporaryDirectory() as folder, duckdb.connect() as con:
        root = Path(folder)
        build(con, config(root, write_export(root / "parquet", {"a.parquet": rows})))
        expected = con.execute(FACTS).fetchall()
        build(con, config(root, write_csv_export(root / "csv", {"a": rows})))
        assert con.execute(FACTS).fetchall() == expected
