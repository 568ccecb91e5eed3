"""FOCUS in from S3 (issue 15.3) on a real S3-compatible server (moto on 127.0.0.1): the same
facts as the local copy, the whole prefix listed, ranged parquet reads of only the needed
columns, retried transient errors, one clean line for a bad bucket or an empty prefix."""

from __future__ import annotations

import gzip
import io
import logging
import random

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cost_pipeline.config import parse_config
from cost_pipeline.ingest.billing import build_billing_facts
from cost_pipeline.ingest.sources import SourceError
from tests.ingest.test_focus_source import MAY, MAY_TOTAL, ROWS, write_csv
from tests.support.s3_server import FlakyProxy, new_bucket, put

LOG = logging.getLogger("test")
PREFIX = "exports/focus"


@pytest.fixture
def con():
    connection = duckdb.connect()
    yield connection
    connection.close()


def s3_config(tmp_path, endpoint: str, bucket: str, prefix: str = PREFIX):
    return parse_config({"billing": [{"kind": "focus", "path": f"s3://{bucket}/{prefix}",
                                      "endpoint_url": endpoint, "region": "us-east-1",
                                      "name": "focus"}]}, tmp_path)


def facts(con) -> list[tuple]:
    return con.execute("SELECT * EXCLUDE (month, x_File) FROM billing_facts WHERE month = ? "
                       "ORDER BY x_SourceLine", [MAY]).fetchall()


def test_same_facts_as_the_local_copy(tmp_path, s3_server, con):
    local = tmp_path / "focus"
    write_csv(local / "2026-05" / "part-1.csv", ROWS[:8])
    gz = local / "2026-05" / "part-2.csv.gz"
    write_csv(tmp_path / "staging.csv", ROWS[8:])
    gz.write_bytes(gzip.compress((tmp_path / "staging.csv").read_bytes()))
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    for file in sorted(local.rglob("*.csv*")):
        put(endpoint, bucket, f"{PREFIX}/{file.relative_to(local)}", file.read_bytes())
    put(endpoint, bucket, f"{PREFIX}/_SUCCESS", b"")  # not a data file
    build_billing_facts(con, parse_config(
        {"billing": [{"kind": "focus", "path": str(local), "name": "focus"}]}, tmp_path),
        MAY, LOG)
    expected = facts(con)
    summary = build_billing_facts(con, s3_config(tmp_path, endpoint, bucket), MAY, LOG)
    assert facts(con) == expected and len(expected) == len(ROWS) - 1
    assert summary.total_effective_cost == pytest.approx(MAY_TOTAL)
    assert summary.source_metadata["focus"]["files"] == 2
    # one object named directly is that file alone
    build_billing_facts(con, s3_config(tmp_path, endpoint, bucket,
                                       f"{PREFIX}/2026-05/part-1.csv"), MAY, LOG)
    assert len(facts(con)) == 8


def test_a_whole_bucket_names_each_file_by_its_key(tmp_path, s3_server, con):
    """`s3://bucket` with no prefix named each file by its base name: two accounts'
    `2026-05.csv` gave one line id, and a real charge was dropped as an identical duplicate."""
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    write_csv(tmp_path / "part.csv", ROWS[:8])
    for account in ("acct-a", "acct-b"):
        put(endpoint, bucket, f"{account}/2026-05.csv", (tmp_path / "part.csv").read_bytes())
    summary = build_billing_facts(con, s3_config(tmp_path, endpoint, bucket, ""), MAY, LOG)
    assert summary.duplicates_dropped == 0 and len(facts(con)) == 16
    assert {line.split(":")[1] for (line,) in con.execute(
        "SELECT x_SourceLine FROM billing_facts").fetchall()} == {"acct-a/2026-05.csv",
                                                                   "acct-b/2026-05.csv"}


def test_tags_written_as_lists_of_entries_read_as_the_local_copy(tmp_path, s3_server, con):
    # a FOCUS parquet file whose Tags polars wrote back as {key, value} entries: streamed
    # through pyarrow from S3, read as DuckDB reads the local file
    from tests.ingest.test_focus_source import COLUMNS, tags_as

    table = pa.Table.from_pylist([{c: r.get(c) for c in COLUMNS} for r in ROWS])
    table = table.set_column(table.schema.get_field_index("Tags"), "Tags",
                             tags_as(ROWS, "entries"))
    expected, got = _local_then_s3(tmp_path, s3_server, con, table)
    assert got == expected and len(expected) == len(ROWS) - 1
    assert con.execute("SELECT Tags FROM billing_facts WHERE SkuId = 'p4d'").fetchone() == (
        {"user:run_id": "r1", "size": "3"},)


def _local_then_s3(tmp_path, s3_server, con, table: pa.Table) -> tuple[list, list]:
    """The facts of `table` written as a local parquet file, then as its copy on S3."""
    (tmp_path / "focus").mkdir()
    pq.write_table(table, tmp_path / "focus" / "may.parquet")
    build_billing_facts(con, parse_config({"billing": [{
        "kind": "focus", "path": str(tmp_path / "focus"), "name": "focus"}]}, tmp_path),
        MAY, LOG)
    expected = facts(con)
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    put(endpoint, bucket, f"{PREFIX}/may.parquet", (tmp_path / "focus" / "may.parquet")
        .read_bytes())
    build_billing_facts(con, s3_config(tmp_path, endpoint, bucket), MAY, LOG)
    return expected, facts(con)


def test_column_names_in_capitals_read_as_the_local_copy(tmp_path, s3_server, con):
    # a FOCUS table unloaded from Snowflake (BILLEDCOST) to S3, as parquet and as CSV, as
    # parquet whose strings are plain binary (no UTF8 annotation, as Impala writes them),
    # and as CSV separated by semicolons
    from tests.ingest.test_focus_source import COLUMNS
    from tests.support.cur_rows import binary_strings

    def facts_by_sku():  # a CSV numbers its rows from 2 (its header is row 1), parquet from 1
        return con.execute("SELECT * EXCLUDE (month, x_File, x_SourceLine, x_Row) "
                           "FROM billing_facts WHERE month = ? ORDER BY SkuId", [MAY]).fetchall()

    build_billing_facts(con, parse_config({"billing": [{
        "kind": "focus", "path": str(write_csv(tmp_path / "own" / "may.csv", ROWS)),
        "name": "focus"}]}, tmp_path), MAY, LOG)
    expected = facts_by_sku()
    columns = (*COLUMNS, "x_InstanceType")  # write_csv's own
    capitals = [{c.upper(): r.get(c) for c in columns} for r in ROWS]
    buffer, binary = io.BytesIO(), io.BytesIO()
    table = pa.Table.from_pylist(capitals)
    pq.write_table(table, buffer)
    pq.write_table(binary_strings(table), binary)
    upper = write_csv(tmp_path / "upper.csv", capitals, columns=tuple(c.upper() for c in columns))
    semicolons = write_csv(tmp_path / "semicolons.csv", ROWS, delimiter=";")
    endpoint = s3_server.endpoint_url
    for name, body in (("may.parquet", buffer.getvalue()), ("may.csv", upper.read_bytes()),
                       ("binary.parquet", binary.getvalue()),
                       ("semicolons.csv", semicolons.read_bytes())):
        bucket = new_bucket(endpoint)
        put(endpoint, bucket, f"{PREFIX}/{name}", body)
        build_billing_facts(con, s3_config(tmp_path, endpoint, bucket), MAY, LOG)
        assert facts_by_sku() == expected and len(expected) == len(ROWS) - 1


@pytest.mark.parametrize("money", [pa.decimal128(38, 10), pa.decimal256(76, 38)],
                         ids=["numeric", "bignumeric"])
def test_decimal_money_reads_as_the_local_copy(tmp_path, s3_server, con, money):
    # FOCUS's Decimal columns as BigQuery exports NUMERIC and BIGNUMERIC (DuckDB takes no
    # 256-bit decimal through Arrow: the stream carries it as a double)
    from tests.ingest.test_focus_source import COLUMNS

    table = pa.Table.from_pylist([{c: r.get(c) for c in COLUMNS} for r in ROWS])
    for column in ("BilledCost", "EffectiveCost", "ConsumedQuantity"):
        table = table.set_column(table.schema.get_field_index(column), column,
                                 table[column].cast(pa.float64()).cast(money))
    expected, got = _local_then_s3(tmp_path, s3_server, con, table)
    # DuckDB's own parquet reader turns a 256-bit decimal into a double within an ulp
    # (10 → 10.000000000000002), pyarrow's cast exactly: equal to 1e-15
    assert len(got) == len(expected) == len(ROWS) - 1
    for row, want in zip(got, expected, strict=True):
        assert [pytest.approx(w, rel=1e-15) if isinstance(w, float) else w for w in want] == \
            list(row)
    assert con.execute("SELECT sum(EffectiveCost) FROM billing_facts").fetchone()[0] == \
        pytest.approx(MAY_TOTAL, rel=1e-12)


def _wide_parquet(rows: int) -> bytes:
    rng = random.Random(7)
    table = pa.table({
        "BillingPeriodStart": ["2026-05-01T00:00:00Z"] * rows,
        "ChargePeriodStart": ["2026-05-03T10:00:00Z"] * rows,
        "ChargePeriodEnd": ["2026-05-03T11:00:00Z"] * rows,
        "ChargeCategory": ["Usage"] * rows, "ServiceCategory": ["Compute"] * rows,
        "BilledCost": [1.0] * rows, "EffectiveCost": [1.0] * rows,
        "BillingCurrency": ["USD"] * rows, "SkuId": [f"sku-{i}" for i in range(rows)],
    })
    for i in range(40):  # columns nobody reads: random text, so compression cannot hide them
        table = table.append_column(f"x_Unread{i}", pa.array(
            [f"{rng.getrandbits(64):016x}" for _ in range(rows)]))
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="snappy")
    return buffer.getvalue()


def test_only_the_needed_columns_are_fetched(tmp_path, s3_server, con):
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    body = _wide_parquet(5_000)
    put(endpoint, bucket, f"{PREFIX}/wide.parquet", body)
    summary = build_billing_facts(con, s3_config(tmp_path, endpoint, bucket), MAY, LOG)
    metadata = summary.source_metadata["focus"]
    assert metadata["file_bytes"] == len(body) > (1 << 20)
    assert 0 < metadata["bytes_read"] < 0.25 * len(body)
    assert con.execute("SELECT count(*), sum(EffectiveCost) FROM billing_facts").fetchone() == (
        5_000, 5_000.0)


def test_transient_errors_are_retried(tmp_path, s3_server, con):
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    put(endpoint, bucket, f"{PREFIX}/may.csv", write_csv(tmp_path / "may.csv", ROWS).read_bytes())
    with FlakyProxy(endpoint, failures=2) as proxy:
        summary = build_billing_facts(con, s3_config(tmp_path, proxy.endpoint_url, bucket),
                                      MAY, LOG)
    assert proxy.failed == 2 and proxy.requests > 2
    assert summary.total_effective_cost == pytest.approx(MAY_TOTAL)


def test_a_bad_bucket_or_an_empty_prefix_is_one_clean_error(tmp_path, s3_server, con):
    with pytest.raises(SourceError) as caught:
        build_billing_facts(con, s3_config(tmp_path, s3_server.endpoint_url, "no-such-bucket"),
                            MAY, LOG)
    message = str(caught.value)
    assert message.startswith("focus: s3://no-such-bucket") and "\n" not in message
    assert "bucket does not exist" in message
    bucket = new_bucket(s3_server.endpoint_url)
    with pytest.raises(SourceError, match=r"^focus: s3://.*/exports/focus: no FOCUS files"):
        build_billing_facts(con, s3_config(tmp_path, s3_server.endpoint_url, bucket), MAY, LOG)


def test_a_bad_value_names_the_object_row_and_column(tmp_path, s3_server, con):
    endpoint, bucket = s3_server.endpoint_url, new_bucket(s3_server.endpoint_url)
    bad = [dict(ROWS[0]), {**ROWS[1], "EffectiveCost": "12,5"}]
    put(endpoint, bucket, f"{PREFIX}/may.csv", write_csv(tmp_path / "bad.csv", bad).read_bytes())
    with pytest.raises(SourceError) as caught:
        build_billing_facts(con, s3_config(tmp_path, endpoint, bucket), MAY, LOG)
    assert str(caught.value) == (f'focus: s3://{bucket}/{PREFIX}/may.csv row 3: '
                                 'EffectiveCost "12,5" is not a number')
