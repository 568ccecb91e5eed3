"""An AWS Data Exports CUR 2.0 export on S3 (`s3://bucket/prefix/export-name`) → the raw view
`cur_raw`, with the same columns and types as a local export's (`cur2.register_raw`), for
the same normalization SQL (`assets/billing_facts_cur2.sql`).

Only the month is touched: its manifest under `metadata/BILLING_PERIOD=YYYY-MM/` (the
newest one is the current delivery; its `dataFiles` are the month, so a restated month
replaces the older files and a stale file left in the folder is ignored), else every
parquet file below `data/BILLING_PERIOD=YYYY-MM/`. Each file is read with pyarrow's S3
filesystem: the footer, then only the column chunks of the columns the normalization needs,
batch by batch into a DuckDB temp table (one pass over the network however often the SQL
scans it; `_file`/`_row` name the exact row of an error). The bytes fetched are counted
against the files' sizes: column pruning made visible in the asset metadata.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from datetime import date

import duckdb
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from cost_pipeline.ingest.sources import SourceError, cur2
from cost_pipeline.ingest.sources.arrow_types import is_binary
from cost_pipeline.ingest.sources.s3 import (
    CountingFile,
    S3Uri,
    is_s3,
    list_files,
    mtime_text,
    source_error,
    uri_of,
)
from cost_pipeline.ingest.sources.streams import registered_batches

BATCH_ROWS = 65_536
# files up to this size are fetched whole: pyarrow's footer read alone is 64 KiB, and
# pruning columns of a small file saves less than the extra requests cost
WHOLE_FILE_BYTES = 1 << 20
# whole files stay in memory from the schema check to the read: bound them (a month of many
# small files falls back to ranged reads beyond this)
BUFFERED_LIMIT_BYTES = 64 << 20
ROWS_TABLE = "cur_s3_rows"


def _month_folder(month: date) -> str:
    return f"BILLING_PERIOD={month:%Y-%m}"


def find_delivery(source: str, export_uri: str, month: date, fs: pafs.FileSystem
                  ) -> cur2.Delivery:
    """The files of `month` of the export at `export_uri` (manifest first), with sizes."""
    root = S3Uri.parse(export_uri)
    export_name = root.key.rsplit("/", 1)[-1]
    delivery = cur2.Delivery(source, month)
    infos = list_files(fs, root.child(f"metadata/{_month_folder(month)}").path, source)
    manifests = sorted((i for i in infos if i.is_file and i.base_name.endswith("Manifest.json")),
                       key=lambda i: (i.mtime, i.path))
    if manifests:
        manifest = manifests[-1]
        delivery.manifest = uri_of(manifest.path)
        try:
            with fs.open_input_stream(manifest.path) as stream:
                doc = json.loads(stream.read().decode("utf-8"))
        except OSError as exc:
            raise source_error(source, delivery.manifest, exc) from None
        except ValueError as exc:
            raise SourceError(source, delivery.manifest, f"unreadable manifest: {exc}") from None
        delivery.execution_id, uris = cur2.manifest_files(source, delivery.manifest, doc)
        cur2.one_format(source, delivery.manifest, uris)
        paths = [root.child(cur2.export_relative(uri, export_name)).path for uri in uris]
        try:
            files = fs.get_file_info(paths)
        except OSError as exc:
            raise source_error(source, delivery.manifest, exc) from None
        for uri, info in zip(uris, files, strict=True):
            if not info.is_file:
                raise SourceError(source, delivery.manifest,
                                  f"dataFiles lists {uri}, not found at {uri_of(info.path)}")
    else:
        top = list_files(fs, root.path, source, recursive=False)
        if not top:
            raise SourceError(source, export_uri, "no export under this prefix (expected "
                              "…/<export-name>/data/BILLING_PERIOD=YYYY-MM/*.parquet)")
        folder = root.child(f"data/{_month_folder(month)}").path
        found = sorted((i for i in list_files(fs, folder, source) if i.is_file),
                       key=lambda i: i.path)
        files = [i for i in found if cur2.is_data_file(i.path)]
        cur2.one_format(source, None, [uri_of(i.path) for i in files])
        if not files:
            data = list_files(fs, root.child("data").path, source, recursive=False)
            delivery.missing = cur2.no_month_files(
                source, export_uri, [i.base_name for i in top if i.type == pafs.FileType.Directory],
                [i.base_name for i in data if i.type == pafs.FileType.Directory])
    delivery.files = [uri_of(info.path) for info in files]
    delivery.stats = {uri_of(i.path): (int(i.size or 0), mtime_text(i)) for i in files}
    return delivery


class S3Reader:
    """Reads one delivery's files from S3, counting the bytes fetched. Each file is opened
    once: its footer serves the schema check, then the column chunks are read."""

    def __init__(self, fs: pafs.FileSystem, delivery: cur2.Delivery):
        self.fs, self.delivery = fs, delivery
        self.schemas: dict[str, pa.Schema] = {}
        self._open_files: dict[str, tuple[pq.ParquetFile, CountingFile]] = {}
        self._buffered = 0
        delivery.bytes_read = 0

    def _open(self, uri: str) -> pq.ParquetFile:
        if uri not in self._open_files:
            # (a local file: a delivery streamed for its columns, `cur2.ENGINE_COLUMNS`)
            native = self.fs.open_input_file(S3Uri.parse(uri).path if is_s3(uri) else uri)
            size = self.delivery.stats.get(uri, (WHOLE_FILE_BYTES + 1, ""))[0]
            if size <= WHOLE_FILE_BYTES and self._buffered + size <= BUFFERED_LIMIT_BYTES:
                # one GET instead of a 64 KiB footer read plus overlapping column reads
                whole = native.read()
                native.close()
                self.delivery.bytes_read += len(whole)
                self._buffered += len(whole)
                native = pa.BufferReader(whole)
            counting = CountingFile(native, counts=not isinstance(native, pa.BufferReader))
            try:
                parquet = pq.ParquetFile(pa.PythonFile(counting, mode="r"))
            except BaseException:
                self._close(uri, counting)
                raise
            self._open_files[uri] = (parquet, counting)
        return self._open_files[uri][0]

    def _close(self, uri: str, counting: CountingFile | None = None) -> None:
        if counting is None:
            entry = self._open_files.pop(uri, None)
            if entry is None:
                return
            counting = entry[1]
        if counting.counts:
            self.delivery.bytes_read += counting.bytes_read
        else:
            self._buffered -= counting.size
        counting.close()

    def read_schema(self, uri: str) -> pa.Schema:
        """The footer's schema (for `cur2.inspect_schema`): S3 failures are SourceErrors."""
        try:
            schema = self._open(uri).schema_arrow
        except OSError as exc:
            if "parquet" in str(exc).lower() or "magic" in str(exc).lower():
                raise  # a broken file: inspect_schema names it
            raise source_error(self.delivery.source, uri, exc) from None
        self.schemas[uri] = cur2.lower_case_names(self.delivery.source, uri, schema)
        return self.schemas[uri]

    def close(self) -> None:
        for uri in list(self._open_files):
            self._close(uri)

    def arrow_schema(self) -> pa.Schema:
        return stream_schema(self.delivery, self.schemas)

    def batches(self, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        """Every file's needed columns, batch by batch, with `_file` and `_row` (1-based)."""
        columns = [f for f in schema if not f.name.startswith("_")]
        for uri in self.delivery.files:
            try:
                parquet = self._open(uri)
            except OSError as exc:
                raise source_error(self.delivery.source, uri, exc) from None
            try:
                names = cur2.file_columns(parquet.schema_arrow)  # as CUR 2.0 names them
                present = [f.name for f in columns if cur2.reads_column(f.name, names)]
                row = 1
                for batch in parquet.iter_batches(batch_size=BATCH_ROWS,
                                                  columns=[names[c] for c in present]):
                    yield lineage_batch(schema, batch, names, present, uri, row)
                    row += batch.num_rows
            except OSError as exc:
                raise source_error(self.delivery.source, uri, exc) from None
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
                raise SourceError(self.delivery.source, uri,
                                  f"unreadable data: {str(exc).splitlines()[0]}") from None
            finally:
                self._close(uri)


def lineage_batch(schema: pa.Schema, batch: pa.RecordBatch, names: dict[str, str],
                  present: Collection[str], file: str, row: int) -> pa.RecordBatch:
    """A batch of a file's columns (`names`: as CUR 2.0 names them → the file's spelling) as
    one of `schema` (`stream_schema`): the `present` columns cast to their type, the others
    NULL, then `_file` and `_row` (`row` the number of the batch's first record)."""
    n = batch.num_rows
    arrays = [batch.column(names[f.name]).cast(f.type) if f.name in present
              else pa.nulls(n, f.type) for f in schema if not f.name.startswith("_")]
    arrays += [pa.repeat(pa.scalar(file), n), pa.array(range(row, row + n), pa.int64())]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def stream_schema(delivery: cur2.Delivery, schemas: dict[str, pa.Schema]) -> pa.Schema:
    """One type per needed column over all files (file → its schema, names folded as CUR
    2.0 spells them): a column typed differently in two files travels as text (the view's
    TRY_CASTs read it back), with `_file` and `_row`."""
    fields = []
    for column, kind in {**cur2.REQUIRED_COLUMNS, **cur2.OPTIONAL_COLUMNS}.items():
        # `tags` is fetched only from files without resource_tags: elsewhere it holds the
        # same resource tags (`cur2.resource_tags_expr`)
        typed = {uri: s.field(column).type for uri, s in schemas.items()
                 if cur2.reads_column(column, s.names)}
        types = list(typed.values())
        if not types:
            continue
        if kind == "VARCHAR" and any(is_binary(t) for t in types):
            # strings without their UTF8 annotation: cast to text, their UTF-8 checked
            fields.append(pa.field(column, pa.string()))
            continue
        try:
            unified = pa.unify_schemas([pa.schema([(column, t)]) for t in types],
                                       promote_options="permissive").field(column).type
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            if kind.startswith("MAP"):  # no text form: widened, else refused
                fields.append(pa.field(column, cur2.widened_map_type(
                    delivery.source, column, typed)))
                continue
            unified = pa.string()
            if kind == "TIMESTAMP":
                delivery.zoned_timestamps.add(column)
            if kind == "DOUBLE":  # a number in one file, text in another
                delivery.text_amounts.add(column)
        if pa.types.is_decimal256(unified):  # DuckDB takes no 256-bit decimal in Arrow
            unified = pa.float64()  # (BigQuery's BIGNUMERIC): read as the double it is
        fields.append(pa.field(column, unified))
    # resource tags held as columns, one a key (`cur2.flat_tags_sql`): as text
    fields += [pa.field(column, pa.string()) for column in delivery.flat_tags]
    return pa.schema([*fields, ("_file", pa.string()), ("_row", pa.int64())])


def register_raw(con: duckdb.DuckDBPyConnection, reader: S3Reader, view: str) -> None:
    """Stream the delivery into a temp table and create `view` over it, typed as
    `cur2.register_raw` types a local export."""
    delivery = reader.delivery
    if not delivery.files:
        cur2.register_raw(con, delivery, view)
        return
    con.execute("SET TimeZone = 'UTC'")
    schema = reader.arrow_schema()
    select = "*"
    if delivery.map_shapes.get("product") == "text":  # cut once to the keys read
        select = f"* REPLACE ({cur2.slim_product_sql('product')} AS product)"
    try:
        with registered_batches(con, "cur_s3_stream", schema, reader.batches(schema)):
            con.execute(f"CREATE OR REPLACE TEMP TABLE {ROWS_TABLE} AS "
                        f"SELECT {select} FROM cur_s3_stream")
    finally:
        reader.close()
    select = [*cur2.raw_columns(delivery, "_file"), "_file", "_row"]
    con.execute(f"CREATE OR REPLACE TEMP VIEW {view} AS SELECT {', '.join(select)} "
                f"FROM {ROWS_TABLE}")
    delivery.raw_relation = (ROWS_TABLE, "_file", "_row")
    cur2.refuse_unreadable_values(con, delivery, *delivery.raw_relation)


def read_metadata(delivery: cur2.Delivery) -> dict:
    """Bytes fetched from S3 against the files' bytes (column pruning); empty for local reads."""
    if delivery.bytes_read is None:
        return {}
    total = sum(size for size, _mtime in delivery.stats.values())
    return {"bytes_read": delivery.bytes_read, "file_bytes": total,
            "bytes_read_share": round(delivery.bytes_read / total, 4) if total else 0.0}
