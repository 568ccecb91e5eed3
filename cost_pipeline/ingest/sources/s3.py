"""S3 access shared by the sources (any S3-compatible endpoint): object URIs, the two clients,
retries, and S3 failures turned into SourceErrors.

Two clients, each for what it does best:
- pyarrow's `S3FileSystem` reads the data files (CUR parquet, inventory reports). Parquet
  needs ranged reads — the footer first, then only the column chunks of the needed columns —
  and pyarrow issues exactly those range GETs from C++, streaming batch by batch, without
  boto3 round-trips through Python or a DuckDB extension (DuckDB's httpfs cannot be
  installed here: FIELD-NOTES).
- boto3 lists buckets (`s3` checkpoints): `list_objects_v2` pages of up to 1,000 keys with
  sizes and timestamps, nothing else.

Both take the endpoint and region from the config, else from the standard AWS settings
(`AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL`, `AWS_REGION` / `AWS_DEFAULT_REGION`), and the
credentials from the standard AWS chain only (env vars, profile, web identity, instance
role): never from the config file. Both retry throttling, 5xx and connection errors with
exponential backoff (AWS "standard" retry mode, `S3_ATTEMPTS` attempts) before the error
becomes a SourceError.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import pyarrow.fs as pafs

from cost_pipeline.ingest.sources import SourceError

S3_ATTEMPTS = 5                 # per request, backoff included (AWS standard retry mode)
CONNECT_TIMEOUT_SECONDS = 5.0
REQUEST_TIMEOUT_SECONDS = 60.0
CREDENTIALS_HINT = ("check the credentials of the standard AWS chain (AWS_ACCESS_KEY_ID / "
                    "AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or the instance role)")


def is_s3(path: str) -> bool:
    return path.startswith("s3://")


@dataclass(frozen=True)
class S3Uri:
    bucket: str
    key: str = ""

    @classmethod
    def parse(cls, uri: str) -> S3Uri:
        if not is_s3(uri):
            raise ValueError(f"not an s3:// URI: {uri}")
        bucket, _, key = uri[len("s3://"):].partition("/")
        return cls(bucket, key.strip("/"))

    @property
    def path(self) -> str:
        """The `bucket/key` form pyarrow's filesystem takes."""
        return f"{self.bucket}/{self.key}" if self.key else self.bucket

    def child(self, relative: str) -> S3Uri:
        relative = relative.strip("/")
        return S3Uri(self.bucket, f"{self.key}/{relative}" if self.key else relative)

    def __str__(self) -> str:
        return f"s3://{self.path}"


def uri_of(path: str) -> str:
    """A pyarrow `bucket/key` path as the `s3://` URI messages show."""
    return f"s3://{path}"


def _endpoint(endpoint_url: str | None) -> str | None:
    return (endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3")
            or os.environ.get("AWS_ENDPOINT_URL") or None)


def _region(region: str | None) -> str | None:
    return region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")


def filesystem(endpoint_url: str | None = None, region: str | None = None) -> pafs.S3FileSystem:
    """pyarrow's S3 filesystem; credentials from the AWS SDK's default chain."""
    options: dict[str, Any] = {
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=S3_ATTEMPTS),
        "connect_timeout": CONNECT_TIMEOUT_SECONDS,
        "request_timeout": REQUEST_TIMEOUT_SECONDS,
    }
    endpoint = _endpoint(endpoint_url)
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        options["endpoint_override"] = parts.netloc
        options["scheme"] = parts.scheme
    if _region(region):
        options["region"] = _region(region)
    return pafs.S3FileSystem(**options)


def client(endpoint_url: str | None = None, region: str | None = None):
    """A boto3 S3 client with standard-mode retries; credentials from boto3's chain."""
    import boto3
    from botocore.config import Config

    endpoint = _endpoint(endpoint_url)
    config = Config(
        retries={"mode": "standard", "max_attempts": S3_ATTEMPTS},
        connect_timeout=CONNECT_TIMEOUT_SECONDS, read_timeout=REQUEST_TIMEOUT_SECONDS,
        # S3-compatible servers on an IP or localhost have no virtual-host bucket names
        s3={"addressing_style": "path"} if endpoint else None,
    )
    return boto3.client("s3", endpoint_url=endpoint, region_name=_region(region), config=config)


def source_error(source: str, where: str, exc: BaseException) -> SourceError:
    """An S3 failure (pyarrow OSError or botocore error), retries exhausted, as one line. A
    request botocore refused to send (a parameter S3 would not take, such as no bucket name)
    failed no transfer: its reasons, said whole, claim no attempt."""
    if _unsent(exc):
        # botocore's `Parameter validation failed:`, then a line per reason
        reasons = [line.strip() for line in str(exc).splitlines()[1:] if line.strip()]
        return SourceError(source, where, "invalid request (not sent): "
                           + ("; ".join(reasons) or str(exc).strip() or type(exc).__name__))
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    code = ""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = str(response.get("Error", {}).get("Code", ""))
    upper = f"{code} {text}".upper()
    if "NO_SUCH_BUCKET" in upper or "NOSUCHBUCKET" in upper:
        return SourceError(source, where, "the bucket does not exist (or the endpoint/region "
                           "is not the one holding it)")
    if any(marker in upper for marker in ("ACCESS_DENIED", "ACCESSDENIED", "INVALIDACCESSKEY",
                                          "INVALID_ACCESS_KEY", "SIGNATURE", "FORBIDDEN",
                                          "NOCREDENTIALS", "UNABLE TO LOCATE CREDENTIALS")):
        return SourceError(source, where, f"access denied: {CREDENTIALS_HINT} ({text})")
    if any(marker in upper for marker in ("NETWORK_CONNECTION", "COULD NOT CONNECT",
                                          "CONNECT TIMEOUT", "ENDPOINTCONNECTION")):
        return SourceError(source, where, f"S3 endpoint unreachable after {S3_ATTEMPTS} "
                           f"attempts: {text}")
    if any(marker in upper for marker in _BROKEN_FILE):  # the bytes arrived, they are not parquet
        return SourceError(source, where, f"not a readable parquet file ({text})")
    return SourceError(source, where, f"S3 error after up to {S3_ATTEMPTS} attempts: {text}")


def _unsent(exc: BaseException) -> bool:
    """Whether botocore refused the request before sending it (its parameters' fault)."""
    try:
        from botocore.exceptions import ParamValidationError
    except ImportError:  # no botocore: the error is pyarrow's
        return False
    return isinstance(exc, ParamValidationError)


# pyarrow's messages about the bytes of a file, as opposed to the transfer of them
_BROKEN_FILE = ("THRIFT", "MAGIC BYTES", "CORRUPT", "DECOMPRESS", "PAGE HEADER",
                "PARQUET FILE SIZE IS 0")


def list_files(fs: pafs.FileSystem, folder: str, source: str,
               recursive: bool = True) -> list[pafs.FileInfo]:
    """The entries below `folder` (a `bucket/prefix` path; empty when it does not exist).
    A missing bucket is an error, not an empty folder."""
    try:
        bucket = folder.split("/", 1)[0]
        if fs.get_file_info(bucket).type == pafs.FileType.NotFound:
            raise SourceError(source, uri_of(bucket), "the bucket does not exist (or the "
                              "endpoint/region is not the one holding it)")
        return fs.get_file_info(pafs.FileSelector(folder, recursive=recursive,
                                                  allow_not_found=True))
    except OSError as exc:
        raise source_error(source, uri_of(folder), exc) from None


def mtime_text(info: pafs.FileInfo) -> str:
    return info.mtime.astimezone(UTC).isoformat() if info.mtime else ""


def list_bucket(s3_client, bucket: str, source: str,
                page_size: int = 1000) -> Iterator[dict[str, Any]]:
    """Every object of `bucket` (all pages), as checkpoint listing rows."""
    from botocore.exceptions import BotoCoreError, ClientError

    paginator = s3_client.get_paginator("list_objects_v2")
    try:
        for page in paginator.paginate(Bucket=bucket, PaginationConfig={"PageSize": page_size}):
            for obj in page.get("Contents", []):
                modified: datetime = obj["LastModified"]
                yield {
                    "bucket": bucket,
                    "key": obj["Key"],
                    "size": int(obj["Size"]),
                    "last_modified": modified.astimezone(UTC).replace(tzinfo=None),
                    "snapshot_date": None,
                }
    except (BotoCoreError, ClientError) as exc:
        raise source_error(source, f"s3://{bucket}", exc) from None


class CountingFile(io.RawIOBase):
    """A read-only file over a pyarrow input file that counts the bytes actually fetched, so
    the asset can show how much of each parquet file column pruning left unread."""

    def __init__(self, native: Any, counts: bool = True):
        super().__init__()
        self._native = native
        self.counts = counts  # False over a buffer already fetched (and counted) whole
        self.size = native.size()
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._native.seek(offset, whence)

    def tell(self) -> int:
        return self._native.tell()

    def read(self, size: int = -1) -> bytes:
        data = self._native.read() if size is None or size < 0 else self._native.read(size)
        self.bytes_read += len(data)
        return data

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def close(self) -> None:
        self._native.close()
        super().close()
