"""A CUR 2.0 export delivered as CSV (Data Exports file format `TEXT_OR_CSV`, compression
GZIP or ZIP), local or on S3 → the raw view `cur_raw`, with the same columns and types as a
parquet delivery's (`cur2_s3.register_raw`), for the same normalization SQL.

Each file's header is read first (the columns it holds, named in any case, split by its
delimiter), then the file is streamed by pyarrow's CSV reader — decompressed on the fly,
only the columns the normalization needs, every one as text, an empty field NULL — batch by
batch into the temp table the S3 reader fills. The view then reads the text as it reads a
parquet copy converted from CSV: amounts as the numbers they spell, timestamps as the ISO
8601 instants AWS writes (`2026-07-01T00:00:00Z`), `product` and `resource_tags` as the
JSON objects AWS writes them as (`{"user_team":"vision"}`). `_row` is a record's row in its
file (the header is row 1: its line, unless a value before it spans lines); a record pyarrow
cannot read is found by a second read of the file (`csv_fault`).
"""

from __future__ import annotations

import csv
import logging
import re
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import IO

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.fs as pafs

from cost_pipeline.ingest.sources import SourceError, csv_delimiter, csv_fault, cur2
from cost_pipeline.ingest.sources.cur2_s3 import lineage_batch, stream_schema
from cost_pipeline.ingest.sources.s3 import S3Uri, is_s3, source_error

HEADER_BYTES = 1 << 20  # CUR 2.0 has ~125 columns: its header line is ~5 KB
BLOCK_BYTES = 1 << 22
# pyarrow's and zlib's words about a file's bytes, as opposed to the transfer of them: a gzip
# cut short is pyarrow's "Truncated compressed stream", which no retry reads whole
_BROKEN_BYTES = ("ZLIB", "GZIP", "INFLATE", "COMPRESSED", "CSV", "UTF8", "UTF-8", "ZIP",
                 "COLUMN")
# what reading a ZIP member of broken deflate data raises (zlib.error: no OSError)
_BROKEN_FILE_ERRORS = (OSError, zipfile.BadZipFile, EOFError, zlib.error)


class CsvReader:
    """Reads one CSV delivery's files, local (`fs` None) or from S3 (counting their bytes).
    The interface of `cur2_s3.S3Reader`: `read_schema` for `cur2.inspect_schema`, then
    `arrow_schema` and `batches` for `cur2_s3.register_raw`."""

    def __init__(self, fs: pafs.FileSystem | None, delivery: cur2.Delivery,
                 log: logging.Logger | None = None):
        self.fs, self.delivery, self.log = fs, delivery, log
        self.schemas: dict[str, pa.Schema] = {}
        self._delimiters: dict[str, str] = {}
        self._headers: dict[str, pa.Schema] = {}  # the files' own spelling
        if fs is not None:
            delivery.bytes_read = 0

    @contextmanager
    def _stream(self, file: str) -> Iterator[IO[bytes]]:
        """The file's CSV bytes, decompressed: `.gz` as gzip, `.zip` as the one CSV file the
        archive holds, else as they are."""
        name, source = file.lower(), self.delivery.source
        # (an OSError opening it reaches the caller, which names the file: `_unreadable`)
        if name.endswith(".zip"):
            raw = (self.fs.open_input_file(S3Uri.parse(file).path) if is_s3(file)
                   else open(file, "rb"))  # noqa: SIM115 (closed below)
        else:
            compression = "gzip" if name.endswith(".gz") else None
            raw = (self.fs.open_input_stream(S3Uri.parse(file).path, compression=compression)
                   if is_s3(file) else pa.input_stream(file, compression=compression))
        try:
            if not name.endswith(".zip"):
                yield raw
                return
            try:
                archive = zipfile.ZipFile(raw)
            except (zipfile.BadZipFile, OSError) as exc:
                raise SourceError(source, file, f"not a readable ZIP archive ({exc})") from None
            with archive:
                members = [m for m in archive.infolist() if not m.is_dir()]
                if len(members) != 1:
                    listed = ", ".join(m.filename for m in members[:3]) or "nothing"
                    raise SourceError(source, file, "a CUR 2.0 ZIP file holds one CSV file; "
                                      f"this one holds {len(members)}: {listed}")
                with archive.open(members[0]) as member:
                    yield member
        finally:
            raw.close()

    def read_schema(self, file: str) -> pa.Schema:
        """The header's columns, every one text (for `cur2.inspect_schema`, which finds the
        amounts, timestamps and maps held as text and reads them so)."""
        source = self.delivery.source
        try:
            with self._stream(file) as stream:
                head = stream.read(HEADER_BYTES)
        except _BROKEN_FILE_ERRORS as exc:
            raise self._unreadable(file, file, exc) from None
        try:
            text = bytes(head).decode("utf-8-sig", errors="strict")
        except UnicodeDecodeError as exc:
            # a cut multi-byte character at the end of the read is no fault of the file
            text = bytes(head)[:exc.start].decode("utf-8-sig")
            if "\n" not in text:
                raise SourceError(source, file, "its header is not UTF-8 text") from None
        if "\n" not in text and len(head) >= HEADER_BYTES:
            raise SourceError(source, file, f"no header line in its first {HEADER_BYTES} bytes: "
                              "not a CUR 2.0 CSV file")
        # (checked before the columns: no header read as one without line_item_resource_id,
        # refused as an export to recreate)
        if not text.strip():
            raise SourceError(source, file, "empty file (no header)")
        line = text.split("\n", 1)[0].rstrip("\r")
        if not line.strip():
            raise SourceError(source, file, "its first line is blank: no header")
        wanted = {**cur2.REQUIRED_COLUMNS, **cur2.OPTIONAL_COLUMNS}
        delimiter = csv_delimiter(line, set(wanted))
        try:
            names = [name.strip() for name in next(csv.reader([line], delimiter=delimiter), [])]
        except csv.Error as exc:
            raise SourceError(source, file, f"unreadable CSV header: {exc}") from None
        self._delimiters[file] = delimiter
        self._headers[file] = pa.schema([(name, pa.string()) for name in dict.fromkeys(names)])
        self.schemas[file] = cur2.lower_case_names(source, file, self._headers[file])
        return self.schemas[file]

    def arrow_schema(self) -> pa.Schema:
        return stream_schema(self.delivery, self.schemas)

    def batches(self, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        """Every file's needed columns, batch by batch, with `_file` and `_row` (the record's
        row: the header is row 1)."""
        columns = [f for f in schema if not f.name.startswith("_")]
        for file in self.delivery.files:
            names = cur2.file_columns(self._headers[file])  # as CUR 2.0 names them
            present = {f.name for f in columns if cur2.reads_column(f.name, names)}
            spelled = [names[f.name] for f in columns if f.name in present]
            options = pacsv.ConvertOptions(
                include_columns=spelled, column_types=dict.fromkeys(spelled, pa.string()),
                strings_can_be_null=True, quoted_strings_can_be_null=True, null_values=[""])
            row = 2
            try:
                with self._stream(file) as stream:
                    reader = pacsv.open_csv(
                        stream, read_options=pacsv.ReadOptions(block_size=BLOCK_BYTES),
                        parse_options=pacsv.ParseOptions(delimiter=self._delimiters[file],
                                                          newlines_in_values=True),
                        convert_options=options)
                    for batch in reader:
                        yield lineage_batch(schema, batch, names, present, file, row)
                        row += batch.num_rows
            except SourceError:
                raise
            except (pa.ArrowException, *_BROKEN_FILE_ERRORS) as exc:
                # a record's fault is found by a second read (csv_fault); the stream's (a gzip
                # cut short) is wherever the reader had read ahead to: the file alone
                reason = str(exc)
                near = f"{file} near row {row}" if row > 2 and "CSV" in reason else file
                where = csv_fault.where(file, reason, near, partial(self._stream, file),
                                        self._delimiters[file], log=self.log,
                                        source=self.delivery.source)
                raise self._unreadable(where, file, exc) from None
            if self.fs is not None:
                self.delivery.bytes_read += self.delivery.stats.get(file, (0, ""))[0]

    def _unreadable(self, where: str, file: str, exc: BaseException) -> SourceError:
        """A failure reading `file` (at `where`): the transfer's (S3's own words) or the
        bytes' (not gzip, not CSV, not UTF-8), one line naming the file."""
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        header = self._headers.get(file)
        if header is not None:  # pyarrow numbers a file's columns from 0: name the column
            reason = re.sub(r"CSV column #(\d+)", lambda m: m.group(0) + (
                f" ({header.names[int(m.group(1))]})" if int(m.group(1)) < len(header)
                else ""), reason)
        if (is_s3(file) and isinstance(exc, OSError)
                and not any(mark in reason.upper() for mark in _BROKEN_BYTES)):
            return source_error(self.delivery.source, file, exc)
        return SourceError(self.delivery.source, where, f"unreadable CSV file ({reason})")

    def close(self) -> None:
        """Nothing stays open between reads (the interface of `cur2_s3.S3Reader`)."""


def is_csv_delivery(delivery: cur2.Delivery) -> bool:
    """A delivery of CSV files (`cur2.find_delivery` refuses one mixing CSV and parquet)."""
    return bool(delivery.files) and cur2.is_text_export_file(delivery.files[0])
