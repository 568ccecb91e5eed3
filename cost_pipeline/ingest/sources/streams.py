"""A reader's record batches read by DuckDB as a view: the readers that stream a file
through pyarrow (CUR 2.0 and FOCUS from S3, FOCUS CSV) insert from it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
import pyarrow as pa

from cost_pipeline.ingest.sources import SourceError
from cost_pipeline.warehouse import register, unregister


@contextmanager
def registered_batches(con: duckdb.DuckDBPyConnection, name: str, schema: pa.Schema,
                       batches: Iterator[pa.RecordBatch]) -> Iterator[None]:
    """`batches` registered as the view `name` for the block's statements, and let go after
    (`warehouse.unregister`). A SourceError the batches raise (the file, the row) reaches the
    statement wrapped in DuckDB's engine error: it is raised again as the reader named it."""
    failure: list[SourceError] = []

    def guarded() -> Iterator[pa.RecordBatch]:
        try:
            yield from batches
        except SourceError as exc:
            failure.append(exc)
            raise

    register(con, name, pa.RecordBatchReader.from_batches(schema, guarded()))
    try:
        yield
    except (duckdb.Error, OSError, pa.ArrowException):
        if failure:
            raise failure[0] from None
        raise
    finally:
        unregister(con, name)
