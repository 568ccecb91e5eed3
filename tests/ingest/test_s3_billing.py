"""CUR 2.0 on a real S3-compatible server (moto on 127.0.0.1): the month's manifest is the
month, restatements replace and are recorded in `billing_deliveries`, only the needed
columns are fetched, transient errors are retried, a bad bucket is one clean error."""

from __future__ import annotations

import io
import json
from datetime import date

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cost_pipeline.config import parse_config
from cost_pipeline.demo.local_s3 import upload_tree
from cost_pipeline.ingest.sources import SourceError
from tests.support.cur_rows import (
    EXPORT,
    HOUR,
    S3_EXPORT,
    T0,
    build,
    line,
    write_export,
    write_parquet,
)
from tests.support.s3_server import FlakyProxy, new_bucket, put

JULY = date(2026, 7, 1)
PREFIX = f"exports/cur/{EXPORT}"
DATA = f"{PREFIX}/data/BILLING_PERIOD=2026-07"
MANIFEST = f"{PREFIX}/metadata/BILLING_PERIOD=2026-07/{EXPORT}-Manifest.json"


@pytest.fixture
def con():
    connection = duckdb.connect()
    yield connection
    connection.close()


def s3_config(tmp_path, endpoint: str, bucket: str, **extra):
    entry = {"kind": "aws_cur2", "path": f"s3://{bucket}/{PREFIX}", "endpoint_url": endpoint,
             "region": "us-east-1", **extra}
    return parse_config({"billing": [entry]}, tmp_path)


def parquet_bytes(rows: list[dict], tmp_path, name: str = "f.parquet") -> bytes:
    return write_parquet(tmp_path / "staging" / name, rows).read_bytes()


def manifest(execution_id: str, names: list[str]) -> str:
    return json.dumps({
        "executionId": execution_id, "exportName": EXPORT, "billingPeriod": "2026-07",
        "tableConfigurations": {"COST_AND_USAGE_REPORT": {
            "TIME_GRANULARITY": "HOURLY", "INCLUDE_RESOURCES": "TRUE"}},
        # the URIs AWS wrote name the real bucket: only the part after the export name counts
        "dataFiles": [f"{S3_EXPORT}/data/BILLING_PERIOD=2026-07/{n}" for n in names],
    })


def totals(con) -> tuple[int, float]:
    rows, cost = con.execute("SELECT count(*), sum(EffectiveCost) FROM billing_facts "
                             "WHERE month = ?", [JULY]).fetchone()
    return rows, round(cost or 0.0, 6)


FACTS = "SELECT * EXCLUDE (month, x_File) FROM billing_facts ORDER BY x_SourceLine"


def _local_read(tmp_path, con, export, query: str = FACTS) -> list:
    """The month built from the local export folder `export`: `query`'s rows."""
    build(con, parse_config({"billing": [{"kind": "aws_cur2", "path": str(export)}]}, tmp_path))
    return con.execute(query).fetchall()


def _s3_read(tmp_path, s3_server, con, export, bucket: str, query: str = FACTS) -> list:
    """The month built from `export` uploaded to `bucket`: `query`'s rows."""
    upload_tree(s3_server.endpoint_url, export, bucket, PREFIX)
    build(con, s3_config(tmp_path, s3_server.endpoint_url, bucket))
    return con.execute(query).fetchall()


def test_same_facts_as_the_local_copy(tmp_path, s3_server, con):
    # with CUR 2.0's `tags` column instead of resource_tags (the resource's tags read there)
    tagged = line(2.0, tags={"resourceTags/user:team": "vision", "accountTag/team": "finance"})
    export = write_export(tmp_path, {"a.parquet": [tagged, line(3.5, net=3.0)],
                                     "b.parquet": [line(0.25, line_item_usage_type="Tax",
                                                        line_item_line_item_type="Tax")]},
                          drop=("resource_tags",), extra={"tags": pa.map_(pa.string(),
                                                                         pa.string())})
    local = _local_read(tmp_path, con, export)
    remote = _s3_read(tmp_path, s3_server, con, export, new_bucket(s3_server.endpoint_url))
    assert remote == local and len(remote) == 3
    assert {"user:team": "vision"} in [row[-1] for row in con.execute(
        "SELECT Tags FROM billing_facts").fetchall()]


def test_a_month_whose_files_differ_in_their_tag_column_is_read_as_its_local_copy(
        tmp_path, s3_server, con):
    # resource_tags in one file, CUR 2.0's `tags` alone in another, both in a third: `tags`
    # is fetched from the second only, and each line's Tags are the local copy's
    from tests.support.cur_rows import MIXED_TAGS, write_mixed_tag_export

    export = write_mixed_tag_export(tmp_path)
    query = ("SELECT split_part(x_SourceLine, ':', 2), * EXCLUDE (month, x_File) "
             "FROM billing_facts ORDER BY x_SourceLine")
    local = _local_read(tmp_path, con, export, query)
    remote = _s3_read(tmp_path, s3_server, con, export, new_bucket(s3_server.endpoint_url),
                      query)
    assert remote == local and len(remote) == 6
    assert dict(con.execute("SELECT split_part(x_SourceLine, ':', 2), Tags FROM billing_facts"
                            ).fetchall()) == MIXED_TAGS


def test_a_month_not_delivered_names_the_months_there_and_a_wrong_prefix_is_refused(
        tmp_path, s3_server, con, caplog):
    import logging

    bucket = new_bucket(s3_server.endpoint_url)
    for month in ("2026-05", "2026-06"):
        put(s3_server.endpoint_url, bucket,
            f"{PREFIX}/data/BILLING_PERIOD={month}/{EXPORT}-00001.snappy.parquet",
            parquet_bytes([line(1.0)], tmp_path))
    with caplog.at_level(logging.WARNING):
        build(con, s3_config(tmp_path, s3_server.endpoint_url, bucket))
    assert "no billing files for 2026-07" in caplog.text
    assert "the export holds 2 other month(s): 2026-05, 2026-06" in caplog.text
    entry = {"kind": "aws_cur2", "path": f"s3://{bucket}/{PREFIX}/data",
             "endpoint_url": s3_server.endpoint_url, "region": "us-east-1"}
    with pytest.raises(SourceError, match=rf"s3://{bucket}/{PREFIX}/data: this is an "
                                          r"export's data/ folder"):
        build(con, parse_config({"billing": [entry]}, tmp_path))


@pytest.mark.parametrize("shape", ["struct", "pairs", "entries", "text"])
def test_map_columns_written_otherwise_read_as_their_maps(
        tmp_path, s3_server, con, shape):
    # the same lines with product and resource_tags as real maps, read locally, and as
    # structs (two files of different fields, as pandas writes them), lists of pairs or of
    # entries, or JSON text, from S3 and from a local copy
    from tests.support.cur_rows import month_dir, write_manifest, write_maps_as

    rows = [line(1.0, identity_line_item_id="l1",
                 product={"product_name": "Amazon Elastic Compute Cloud", "gpu": "4"},
                 resource_tags={"user:run_id": "r1", "user_team": "vision"}),
            line(2.0, identity_line_item_id="l2", resource_tags={"user_team": "nlp"}),
            line(3.0, identity_line_item_id="l3", product={"servicename": "Amazon EC2"},
                 resource_tags={"user:project": "p"}),
            line(4.0, identity_line_item_id="l4", product=None, resource_tags=None)]
    maps = write_export(tmp_path / "maps", {"a.parquet": rows[:2], "b.parquet": rows[2:]})
    other = tmp_path / shape / EXPORT
    write_maps_as(month_dir(other) / "a.parquet", rows[:2], shape)
    write_maps_as(month_dir(other) / "b.parquet", rows[2:], shape)
    write_manifest(other, [f"{S3_EXPORT}/data/BILLING_PERIOD=2026-07/{name}"
                           for name in ("a.parquet", "b.parquet")])
    local = _local_read(tmp_path, con, maps)
    bucket = new_bucket(s3_server.endpoint_url)
    assert _s3_read(tmp_path, s3_server, con, other, bucket) == local and len(local) == 4
    assert _local_read(tmp_path, con, other) == local  # the local copy of the same files
    assert dict(con.execute("SELECT split_part(x_SourceLine, ':', 2), Tags FROM billing_facts"
                            ).fetchall())["l1"] == {"user:run_id": "r1", "user_team": "vision"}


def test_a_map_column_typed_apart_in_two_files_is_read_as_its_local_copy(
        tmp_path, s3_server, con):
    # structs whose `gpu` field is a number in one file and text in another (and whose other
    # fields differ) have no one Arrow type: they travel as a struct of every field, the one
    # typed apart as text, as DuckDB unifies a local copy; a field that is a struct in one
    # file and a number in another has no such type, and is refused naming both files
    from tests.support.cur_rows import month_dir, write_manifest

    export = tmp_path / EXPORT
    shapes = {"a.parquet": (pa.struct([("gpu", pa.int64()), ("region", pa.string())]),
                            {"gpu": 4, "region": "us-east-1"}),
              "b.parquet": (pa.struct([("gpu", pa.string())]), {"gpu": "8"})}
    for hour, (name, (kind, product)) in enumerate(shapes.items()):
        write_parquet(month_dir(export) / name, [
            line(1.0, start=T0 + hour * HOUR, product=product,
                 line_item_usage_type="BoxUsage:x9.large", line_item_resource_id=f"i-{hour}")],
            types={"product": kind})
    write_manifest(export, [f"{S3_EXPORT}/data/BILLING_PERIOD=2026-07/{name}"
                            for name in shapes])
    query = ("SELECT x_File[-9:], x_AcceleratorCount, x_CostComponent FROM billing_facts "
             "ORDER BY 1")
    local = _local_read(tmp_path, con, export, query)
    assert local == [("a.parquet", 4, "gpu"), ("b.parquet", 8, "gpu")]
    bucket = new_bucket(s3_server.endpoint_url)
    assert _s3_read(tmp_path, s3_server, con, export, bucket, query) == local
    write_parquet(month_dir(export) / "b.parquet", [line(1.0, product={"gpu": {"count": 8}})],
                  types={"product": pa.struct([("gpu", pa.struct([("count", pa.int64())]))])})
    with pytest.raises(SourceError, match=rf"s3://{bucket}/{DATA}/b\.parquet: column product "
                                          r"is struct<gpu: struct<count: int64>> here but "
                                          r"struct<gpu: int64, region: string> in "
                                          rf"s3://{bucket}/{DATA}/a\.parquet"):
        _s3_read(tmp_path, s3_server, con, export, bucket)


def test_a_list_of_entries_typed_apart_in_two_files_is_read_as_its_local_copy(
        tmp_path, s3_server, con):
    # `product` as a list of {key, value} entries whose values are numbers in one file and
    # text in another (pandas writes a column of dicts so): one list of text entries
    from tests.support.cur_rows import month_dir, write_manifest

    export = tmp_path / EXPORT
    entries = {"a.parquet": (pa.int64(), [{"key": "gpu", "value": 4}]),
               "b.parquet": (pa.string(), [{"key": "gpu", "value": "8"}])}
    for hour, (name, (value, product)) in enumerate(entries.items()):
        write_parquet(month_dir(export) / name, [
            line(1.0, start=T0 + hour * HOUR, product=product,
                 line_item_usage_type="BoxUsage:x9.large", line_item_resource_id=f"i-{hour}")],
            types={"product": pa.list_(pa.struct([("key", pa.string()), ("value", value)]))})
    write_manifest(export, [f"{S3_EXPORT}/data/BILLING_PERIOD=2026-07/{name}"
                            for name in entries])
    query = "SELECT x_File[-9:], x_AcceleratorCount FROM billing_facts ORDER BY 1"
    local = _local_read(tmp_path, con, export, query)
    assert local == [("a.parquet", 4), ("b.parquet", 8)]
    bucket = new_bucket(s3_server.endpoint_url)
    assert _s3_read(tmp_path, s3_server, con, export, bucket, query) == local


@pytest.mark.parametrize("kinds", [
    (pa.decimal128(38, 10), pa.decimal128(38, 10)),  # a Spark or Athena copy's DECIMAL(38,10)
    (pa.decimal128(18, 6), pa.float64()),
    (pa.decimal256(50, 12), pa.float64()),
    (pa.int32(), pa.float64()),
    (pa.decimal256(76, 38), pa.decimal256(76, 38))],  # BigQuery's BIGNUMERIC exported
    ids=["decimal", "decimal-double", "decimal256-double", "int-double", "bignumeric"])
def test_amounts_held_as_decimals_or_integers_are_the_same_numbers(
        tmp_path, s3_server, con, kinds):
    # a copy written from Python decimals, Spark or Athena holds the amounts as DECIMAL, in
    # some files or all: read as the numbers they are, locally and from S3
    from decimal import Decimal

    from tests.support.cur_rows import month_dir, write_manifest

    amounts = ("line_item_unblended_cost", "line_item_net_unblended_cost",
               "line_item_usage_amount")
    export = tmp_path / EXPORT
    for hour, (name, kind) in enumerate(zip(("a.parquet", "b.parquet"), kinds, strict=True)):
        spell = (Decimal if pa.types.is_decimal(kind) else
                 int if pa.types.is_integer(kind) else float)
        write_parquet(month_dir(export) / name, [
            line(spell("2.5" if spell is not int else "2"), start=T0 + hour * HOUR,
                 identity_line_item_id=f"l{hour}", net=spell("2" if spell is int else "2.25"),
                 line_item_usage_amount=spell("1"),
                 line_item_usage_type="BoxUsage:p4d.24xlarge",
                 line_item_resource_id=f"i-{hour}")],
            types=dict.fromkeys(amounts, kind))
    write_manifest(export, [f"{S3_EXPORT}/data/BILLING_PERIOD=2026-07/{name}"
                            for name in ("a.parquet", "b.parquet")])
    query = ("SELECT split_part(x_SourceLine, ':', 2), BilledCost, EffectiveCost, "
             "ConsumedQuantity, x_UsageHours, x_AcceleratorCount FROM billing_facts ORDER BY 1")
    local = _local_read(tmp_path, con, export, query)
    first = 2.0 if pa.types.is_integer(kinds[0]) else 2.25
    assert local == [("l0", first, first, 1.0, 1.0, 8), ("l1", 2.25, 2.25, 1.0, 1.0, 8)]
    bucket = new_bucket(s3_server.endpoint_url)
    assert _s3_read(tmp_path, s3_server, con, export, bucket, query) == local


def _one_file_rewritten(tmp_path, con, first: dict, rewrite) -> tuple[list, object, object]:
    """Two lines in two files, the first file's table rewritten by `rewrite` (another
    writer's copy of it): the facts of the export as AWS writes it, the rewritten export
    (with its manifest) and its first file."""
    from tests.support.cur_rows import month_dir, write_manifest

    rows = [line(1.5, identity_line_item_id="a1", line_item_usage_type="BoxUsage:p4d.24xlarge",
                 resource_tags={"user_team": "vision"}, **first),
            line(2.5, identity_line_item_id="b1", start=T0 + HOUR)]
    own = write_export(tmp_path / "own", {"a.parquet": rows[:1], "b.parquet": rows[1:]})
    build(con, parse_config({"billing": [{"kind": "aws_cur2", "path": str(own)}]}, tmp_path))
    expected = con.execute(FACTS).fetchall()
    export = tmp_path / EXPORT
    write_parquet(month_dir(export) / "b.parquet", rows[1:])
    path = write_parquet(month_dir(export) / "a.parquet", rows[:1])
    pq.write_table(rewrite(pq.read_table(path)), path)
    write_manifest(export, [f"{S3_EXPORT}/data/BILLING_PERIOD=2026-07/{name}"
                            for name in ("a.parquet", "b.parquet")])
    return expected, export, path


def test_column_names_in_capitals_read_as_the_export_names_them(tmp_path, s3_server, con):
    # a CUR unloaded from Snowflake names its columns in capitals (LINE_ITEM_UNBLENDED_COST),
    # here in one file of two: the facts of the export's own spelling, locally and from S3
    # (the missing line_item_resource_id read as an export without resource ids before)
    expected, export, capitals = _one_file_rewritten(
        tmp_path, con, {"product": {"gpu": "8"}},
        lambda table: table.rename_columns([c.upper() for c in table.column_names]))
    bucket = new_bucket(s3_server.endpoint_url)
    assert _local_read(tmp_path, con, export) == expected and len(expected) == 2
    assert _s3_read(tmp_path, s3_server, con, export, bucket) == expected
    table = pq.read_table(capitals)
    pq.write_table(table.append_column("line_item_usage_type", table["LINE_ITEM_USAGE_TYPE"]),
                   capitals)  # one column in two cases: which is meant?
    both = (r"a\.parquet: columns LINE_ITEM_USAGE_TYPE and line_item_usage_type both name "
            r"line_item_usage_type")
    with pytest.raises(SourceError, match=both):
        _local_read(tmp_path, con, export)
    with pytest.raises(SourceError, match=both):
        _s3_read(tmp_path, s3_server, con, export, bucket)


def test_strings_without_their_utf8_annotation_read_as_text(tmp_path, s3_server, con):
    # Impala and older Hive write strings as plain binary (no UTF8 annotation), which
    # pyarrow and DuckDB read as BLOB: read as the UTF-8 text they hold, locally and from S3,
    # in one file of two; bytes that are no UTF-8 refused naming the file
    from tests.support.cur_rows import binary_strings

    expected, export, binary = _one_file_rewritten(
        tmp_path, con, {"line_item_resource_id": "i-café"}, binary_strings)
    assert pq.read_schema(binary).field("line_item_resource_id").type == pa.binary()
    bucket = new_bucket(s3_server.endpoint_url)
    assert _local_read(tmp_path, con, export) == expected and len(expected) == 2
    assert _s3_read(tmp_path, s3_server, con, export, bucket) == expected
    assert ("i-café",) in con.execute("SELECT ResourceId FROM billing_facts").fetchall()
    table = pq.read_table(binary)
    index = table.schema.get_field_index("line_item_resource_id")
    pq.write_table(table.set_column(index, "line_item_resource_id",
                                    pa.array([b"i-\xff"], pa.binary())), binary)
    not_utf8 = r"a\.parquet.*(not valid UTF8|Invalid UTF8)"
    with pytest.raises(SourceError, match=not_utf8):
        _local_read(tmp_path, con, export)
    with pytest.raises(SourceError, match=not_utf8):
        _s3_read(tmp_path, s3_server, con, export, bucket)


def test_amounts_held_as_text_are_read_as_their_local_copy(tmp_path, s3_server, con):
    # one file holds its amounts as text (a CSV converted to parquet), the other as numbers:
    # pyarrow has no one type for the column, which travels as text and reads as numbers;
    # text spelling no number is refused naming the object and its row
    from tests.support.cur_rows import month_dir, write_manifest

    export = tmp_path / EXPORT
    amounts = ("line_item_unblended_cost", "line_item_net_unblended_cost",
               "line_item_usage_amount")
    write_parquet(month_dir(export) / "a.parquet", [
        line("2.5", identity_line_item_id="t1", net=" 2.25 ", line_item_usage_amount="1"),
        line("3", identity_line_item_id="t2", net="", line_item_usage_amount="")],
        types=dict.fromkeys(amounts, pa.string()))
    write_parquet(month_dir(export) / "b.parquet", [line(4.0, identity_line_item_id="n1")])
    write_manifest(export, [f"{S3_EXPORT}/data/BILLING_PERIOD=2026-07/{name}"
                            for name in ("a.parquet", "b.parquet")])
    query = ("SELECT split_part(x_SourceLine, ':', 2), BilledCost, ConsumedQuantity "
             "FROM billing_facts ORDER BY 1")
    local = _local_read(tmp_path, con, export, query)
    assert local == [("n1", 4.0, 1.0), ("t1", 2.25, 1.0), ("t2", 3.0, None)]
    bucket = new_bucket(s3_server.endpoint_url)
    assert _s3_read(tmp_path, s3_server, con, export, bucket, query) == local
    write_parquet(month_dir(export) / "a.parquet", [
        line("2.5", identity_line_item_id="t1", net="2,25")],
        types=dict.fromkeys(amounts, pa.string()))
    with pytest.raises(SourceError, match=rf"s3://{bucket}/{DATA}/a\.parquet row 1: column "
                                          r"line_item_net_unblended_cost is text that is not "
                                          r"a number: '2,25'"):
        _s3_read(tmp_path, s3_server, con, export, bucket)


def test_a_list_of_entries_naming_a_key_twice_names_the_object_and_row(
        tmp_path, s3_server, con):
    from tests.support.cur_rows import month_dir, write_manifest

    export = tmp_path / EXPORT
    entry = pa.struct([("key", pa.string()), ("value", pa.string())])
    tags = [[{"key": "user_team", "value": "nlp"}],
            [{"key": "user_team", "value": "nlp"}, {"key": "user_team", "value": "cv"}]]
    write_parquet(month_dir(export) / "a.parquet",
                  [line(1.0, resource_tags=t, start=T0 + i * HOUR) for i, t in enumerate(tags)],
                  types={"resource_tags": pa.list_(entry)})
    write_manifest(export, [f"{S3_EXPORT}/data/BILLING_PERIOD=2026-07/a.parquet"])
    bucket = new_bucket(s3_server.endpoint_url)
    with pytest.raises(SourceError, match=rf"s3://{bucket}/{DATA}/a\.parquet row 2: column "
                                          r"resource_tags is a list of entries naming a key "
                                          r"twice"):
        _s3_read(tmp_path, s3_server, con, export, bucket)


def test_manifest_is_the_month_a_stale_file_is_ignored(tmp_path, s3_server, con):
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    put(endpoint, bucket, f"{DATA}/current.parquet", parquet_bytes([line(10.0)], tmp_path))
    put(endpoint, bucket, f"{DATA}/stale.parquet", parquet_bytes([line(99.0)], tmp_path, "s"))
    put(endpoint, bucket, MANIFEST, manifest("exec-1", ["current.parquet"]))
    summary = build(con, s3_config(tmp_path, endpoint, bucket))
    assert totals(con) == (1, 10.0)
    (delivery,) = summary.deliveries
    assert delivery.files == [f"s3://{bucket}/{DATA}/current.parquet"]
    assert delivery.manifest == f"s3://{bucket}/{MANIFEST}"


def test_without_manifest_every_parquet_of_the_month(tmp_path, s3_server, con):
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    put(endpoint, bucket, f"{DATA}/part/1.parquet", parquet_bytes([line(1.0)], tmp_path))
    put(endpoint, bucket, f"{DATA}/2.parquet", parquet_bytes([line(2.0)], tmp_path, "2"))
    put(endpoint, bucket, f"{PREFIX}/data/BILLING_PERIOD=2026-08/3.parquet",
        parquet_bytes([line(4.0)], tmp_path, "3"))
    build(con, s3_config(tmp_path, endpoint, bucket))
    assert totals(con) == (2, 3.0)


def test_restated_delivery_replaces_and_the_change_is_recorded(tmp_path, s3_server, con):
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    cfg = s3_config(tmp_path, endpoint, bucket)
    first = [line(10.0), line(5.0)]
    put(endpoint, bucket, f"{DATA}/exec-1/part-0.parquet", parquet_bytes(first, tmp_path))
    put(endpoint, bucket, MANIFEST, manifest("exec-1", ["exec-1/part-0.parquet"]))
    build(con, cfg)
    build(con, cfg)  # the same delivery again: no second row
    assert totals(con) == (2, 15.0)
    # AWS restates the month: new files, the manifest overwritten, the old files left behind
    restated = [*first, line(7.25)]
    put(endpoint, bucket, f"{DATA}/exec-2/part-0.parquet",
        parquet_bytes(restated, tmp_path, "r"))
    put(endpoint, bucket, MANIFEST, manifest("exec-2", ["exec-2/part-0.parquet"]))
    summary = build(con, cfg)
    assert totals(con) == (3, 22.25)
    deliveries = con.execute(
        "SELECT execution_id, total_effective_cost, previous_execution_id, "
        "change_effective_cost, len(files) FROM billing_deliveries ORDER BY first_seen"
    ).fetchall()
    assert deliveries == [("exec-1", 15.0, None, None, 1), ("exec-2", 22.25, "exec-1", 7.25, 1)]
    assert summary.source_metadata["aws_cur2"]["change_vs_previous_delivery"] == 7.25
    assert summary.source_metadata["aws_cur2"]["delivery"] == "exec-2"


def test_only_the_needed_columns_are_fetched(tmp_path, s3_server, con):
    """A wide export (CUR 2.0 has ~125 columns, the normalization needs ~35): the columns
    nobody reads stay on the server."""
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    rows = [line(1.0, start=line()["line_item_usage_start_date"]) for _ in range(5_000)]
    table = pq.read_table(write_parquet(tmp_path / "narrow.parquet", rows))
    rng = __import__("random").Random(7)
    for i in range(40):  # unread columns: random text, so compression cannot hide them
        table = table.append_column(f"x_unread_{i}", pa.array(
            [f"{rng.getrandbits(64):016x}" for _ in range(len(rows))]))
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="snappy")
    put(endpoint, bucket, f"{DATA}/wide.parquet", buffer.getvalue())
    summary = build(con, s3_config(tmp_path, endpoint, bucket))
    metadata = summary.source_metadata["aws_cur2"]
    print(f"wide CUR file: {metadata}")
    assert metadata["file_bytes"] == len(buffer.getvalue()) > (1 << 20)
    assert 0 < metadata["bytes_read"] < 0.25 * metadata["file_bytes"]
    assert totals(con) == (5_000, 5_000.0)


def test_transient_errors_are_retried(tmp_path, s3_server, con):
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    put(endpoint, bucket, f"{DATA}/a.parquet", parquet_bytes([line(4.0)], tmp_path))
    put(endpoint, bucket, MANIFEST, manifest("exec-1", ["a.parquet"]))
    with FlakyProxy(endpoint, failures=2) as proxy:
        build(con, s3_config(tmp_path, proxy.endpoint_url, bucket))
    assert proxy.failed == 2 and proxy.requests > 2
    assert totals(con) == (1, 4.0)


def test_a_bad_bucket_is_one_clean_error(tmp_path, s3_server, con):
    with pytest.raises(SourceError) as caught:
        build(con, s3_config(tmp_path, s3_server.endpoint_url, "no-such-bucket-here"))
    message = str(caught.value)
    assert message.startswith("aws_cur2: s3://no-such-bucket-here")
    assert "bucket does not exist" in message and "\n" not in message


def test_a_manifest_naming_a_missing_file(tmp_path, s3_server, con):
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    put(endpoint, bucket, MANIFEST, manifest("exec-1", ["gone.parquet"]))
    with pytest.raises(SourceError, match="dataFiles lists .*gone.parquet, not found"):
        build(con, s3_config(tmp_path, endpoint, bucket))


def test_a_server_that_keeps_failing_is_retried_then_one_clear_error(tmp_path, s3_server, con,
                                                                       monkeypatch):
    import time

    from cost_pipeline.ingest.sources import s3
    from cost_pipeline.ingest.sources.s3 import list_bucket

    monkeypatch.setattr(s3, "S3_ATTEMPTS", 3)  # the backoff grows with each attempt
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    put(endpoint, bucket, f"{DATA}/a.parquet", parquet_bytes([line(4.0)], tmp_path))
    put(endpoint, bucket, MANIFEST, manifest("exec-1", ["a.parquet"]))
    with FlakyProxy(endpoint, failures=10**6) as proxy:
        started = time.monotonic()
        with pytest.raises(SourceError) as caught:
            build(con, s3_config(tmp_path, proxy.endpoint_url, bucket))
        assert time.monotonic() - started < 20
        # the CUR read (pyarrow) tried the first request S3_ATTEMPTS times before giving up
        assert proxy.requests == s3.S3_ATTEMPTS
        message = str(caught.value)
        assert message.startswith(f"aws_cur2: s3://{bucket}") and "\n" not in message
        assert f"after up to {s3.S3_ATTEMPTS} attempts" in message
        # the checkpoint listing (boto3) too
        before = proxy.requests
        with pytest.raises(SourceError) as caught:
            list(list_bucket(s3.client(proxy.endpoint_url, "us-east-1"), bucket, "ckpt"))
        assert proxy.requests - before >= s3.S3_ATTEMPTS
        assert str(caught.value).startswith(f"ckpt: s3://{bucket}: S3 error after up to")
    assert totals(con) == (0, 0.0)  # nothing was written


def test_resource_tags_selected_as_columns_read_as_the_map(tmp_path, s3_server, con):
    # an export whose query selects each tag as a column (`SELECT resource_tags.user_team …`,
    # as a legacy CUR's Athena parquet names them) and no map: the lines' tags are those
    # columns' keys and non-empty values, locally, from S3 and from CSV (they were lost)
    from tests.support.cur_rows import write_csv_export

    rows = [line(1.0, identity_line_item_id="a", resource_tags_user_run_id="r1",
                 resource_tags_user_team="vision"),
            line(2.0, identity_line_item_id="b", resource_tags_user_run_id=None,
                 resource_tags_user_team="nlp"),
            line(4.0, identity_line_item_id="c", resource_tags_user_run_id="",
                 resource_tags_user_team=None)]
    shape = {"drop": ("resource_tags",), "extra": {"resource_tags_user_run_id": pa.string(),
                                                   "resource_tags_user_team": pa.string()}}
    tags = "SELECT Tags FROM billing_facts ORDER BY x_SourceLine"
    expected = [({"user_run_id": "r1", "user_team": "vision"},), ({"user_team": "nlp"},),
                ({},)]
    lineless = FACTS.replace("x_File", "x_File, x_Row")  # a CSV line is not a parquet row
    export = write_export(tmp_path / "parquet", {"a.parquet": rows}, **shape)
    assert _local_read(tmp_path, con, export, tags) == expected
    local, facts = con.execute(FACTS).fetchall(), con.execute(lineless).fetchall()
    assert _s3_read(tmp_path, s3_server, con, export,
                    new_bucket(s3_server.endpoint_url)) == local
    text = write_csv_export(tmp_path / "csv", {"a": rows}, **shape)
    assert _local_read(tmp_path, con, text, lineless) == facts
    assert con.execute(tags).fetchall() == expected


def test_a_month_of_tag_columns_beside_a_map_reads_each_files_own(tmp_path, s3_server, con):
    # the export's query changed within the month: a.* holds resource_tags, b.* each tag as a
    # column and no map; each file's lines read their tags from what that file holds, locally,
    # from S3 and from CSV (b's were lost: the map was read, b's columns ignored)
    from tests.support.cur_rows import csv_bytes, month_dir, write_compressed

    mapped = [line(1.0, identity_line_item_id="a1", resource_tags={"user:run_id": "r1"}),
              line(2.0, identity_line_item_id="a2", resource_tags={})]
    columns = [line(4.0, identity_line_item_id="b1", resource_tags_user_run_id="r2"),
               line(8.0, identity_line_item_id="b2", resource_tags_user_run_id=None)]
    flat = {"drop": ("resource_tags",), "extra": {"resource_tags_user_run_id": pa.string()}}
    tags = "SELECT BilledCost, Tags FROM billing_facts ORDER BY BilledCost"
    expected = [(1.0, {"user:run_id": "r1"}), (2.0, {}), (4.0, {"user_run_id": "r2"}),
                (8.0, {})]
    export = tmp_path / "parquet" / EXPORT
    write_parquet(month_dir(export) / "a.parquet", mapped)
    write_parquet(month_dir(export) / "b.parquet", columns, **flat)
    assert _local_read(tmp_path, con, export, tags) == expected
    local = con.execute(FACTS).fetchall()
    assert _s3_read(tmp_path, s3_server, con, export,
                    new_bucket(s3_server.endpoint_url)) == local
    text = tmp_path / "csv" / EXPORT
    write_compressed(month_dir(text) / "a", csv_bytes(mapped), "gzip")
    write_compressed(month_dir(text) / "b", csv_bytes(columns, **flat), "gzip")
    assert _local_read(tmp_path, con, text, tags) == expected
