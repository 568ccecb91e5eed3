"""FOCUS files on S3 (`s3://bucket/prefix/`, any S3-compatible endpoint): the listing and the
opening of each file for `sources/focus.py`, which reads them exactly as it reads a local
folder (same columns, same month filter, same errors naming file, row and column).

The whole prefix is listed (every page) and every CSV, CSV.gz or parquet file below it is a
candidate, sorted by key; the month is then selected by billing period as for a local folder,
so a provider's `…/billing_period=YYYY-MM/` layout and a flat folder both work. Reads go
through pyarrow's S3 filesystem (`sources/s3.py`: the config's endpoint and region, the
standard AWS credential chain, standard-mode retries): a parquet file is read by ranges —
its footer, then only the column chunks of the columns the normalization needs — and the
bytes fetched are counted against the files' sizes for the asset metadata; a CSV is streamed
(decompressed on the fly when it ends in `.gz`).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from cost_pipeline.ingest.sources import SourceError
from cost_pipeline.ingest.sources.s3 import CountingFile, S3Uri, list_files, source_error, uri_of

HEADER_BYTES = 1 << 16  # a CSV header longer than this is not a FOCUS header


def find_files(source: str, uri: str, fs: pafs.FileSystem, suffixes: tuple[str, ...]
               ) -> tuple[list[str], dict[str, int], dict[str, float]]:
    """The data files at `uri` (one object, or every file below the prefix), as `s3://`
    URIs sorted by key, with their sizes; and every file listed (manifests too) with its
    modification time (epoch seconds), for `focus_deliveries`."""
    root = S3Uri.parse(uri)
    if not root.key:
        infos = list_files(fs, root.path, source)
    else:
        try:
            single = fs.get_file_info(root.path)
        except OSError as exc:
            raise source_error(source, uri, exc) from None
        infos = [single] if single.is_file else list_files(fs, root.path, source)
    files = sorted((i for i in infos if i.is_file and _is_data_name(i.base_name, suffixes)),
                   key=lambda i: i.path)
    if not files and not infos:
        raise SourceError(source, uri, "no FOCUS files under this S3 prefix (or the prefix "
                          "does not exist)")
    modified = {uri_of(i.path): i.mtime.timestamp() if i.mtime else 0.0
                for i in infos if i.is_file}
    return ([uri_of(i.path) for i in files], {uri_of(i.path): int(i.size or 0) for i in files},
            modified)


def _is_data_name(name: str, suffixes: tuple[str, ...]) -> bool:
    return name.lower().endswith(suffixes) and not name.startswith((".", "_"))


class S3Files:
    """Opens the files of one FOCUS source on S3 and counts the bytes fetched."""

    def __init__(self, source: str, fs: pafs.FileSystem, sizes: dict[str, int]):
        self.source, self.fs, self.sizes = source, fs, sizes
        self.bytes_read = 0
        self._counting: list[CountingFile] = []
        self._parquet: dict[str, pq.ParquetFile] = {}

    def parquet(self, uri: str) -> pq.ParquetFile:
        """The file for ranged reads (footer first, then the wanted column chunks), opened
        once for the header check and the read."""
        if uri not in self._parquet:
            try:
                counting = CountingFile(self.fs.open_input_file(S3Uri.parse(uri).path))
                self._counting.append(counting)
                self._parquet[uri] = pq.ParquetFile(pa.PythonFile(counting, mode="r"))
            except OSError as exc:
                raise source_error(self.source, uri, exc) from None
        return self._parquet[uri]

    def csv_stream(self, uri: str) -> Any:
        compression = "gzip" if uri.lower().endswith(".gz") else None
        try:
            stream = self.fs.open_input_stream(S3Uri.parse(uri).path, compression=compression)
        except OSError as exc:
            raise source_error(self.source, uri, exc) from None
        return stream

    def text(self, uri: str) -> str:
        """A small file's whole text (a manifest)."""
        try:
            with self.fs.open_input_stream(S3Uri.parse(uri).path) as stream:
                return stream.read().decode("utf-8-sig")
        except OSError as exc:
            raise source_error(self.source, uri, exc) from None

    def csv_header(self, uri: str) -> str:
        """The first line of the (decompressed) file."""
        with self.csv_stream(uri) as stream:
            try:
                head = stream.read(HEADER_BYTES)
            except OSError as exc:
                raise source_error(self.source, uri, exc) from None
        return head.decode("utf-8-sig", errors="replace").splitlines()[0] if head else ""

    def close(self) -> None:
        for counting in self._counting:
            self.bytes_read += counting.bytes_read
            counting.close()
        self._counting.clear()
        self._parquet.clear()

    @property
    def file_bytes(self) -> int:
        return sum(self.sizes.values())
