"""A throwaway S3-compatible server on 127.0.0.1 (moto's server mode) for `make
demo-services` and the tests: real HTTP, real SigV4-signed requests, real paging.

moto accepts any credentials; the pipeline still takes them from the standard AWS chain, so
`dummy_credentials()` puts placeholder ones in the environment of this process only.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

DUMMY_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "local-test-key",
    "AWS_SECRET_ACCESS_KEY": "local-test-secret",
    "AWS_REGION": "us-east-1",
    # no instance-metadata probing when a credential is missing
    "AWS_EC2_METADATA_DISABLED": "true",
}


@contextmanager
def dummy_credentials() -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in DUMMY_CREDENTIALS}
    os.environ.update(DUMMY_CREDENTIALS)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class LocalS3:
    """moto's threaded server, bound to loopback on a free port."""

    def __init__(self) -> None:
        try:
            from moto.server import ThreadedMotoServer
        except ImportError:
            raise RuntimeError("the local S3 server needs moto: pip install 'moto[server]' "
                               "(it is in the `test` extra)") from None
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint_url = ""

    def start(self) -> LocalS3:
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint_url = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> LocalS3:
        return self.start()

    def __exit__(self, *_exc) -> None:
        self.stop()


@cache  # a boto3 client takes ~50 ms to build: one per server
def s3_client(endpoint_url: str):
    from cost_pipeline.ingest.sources.s3 import client

    return client(endpoint_url, "us-east-1")


def create_bucket(endpoint_url: str, bucket: str) -> None:
    s3_client(endpoint_url).create_bucket(Bucket=bucket)


def upload_tree(endpoint_url: str, folder: Path, bucket: str, prefix: str) -> list[str]:
    """Upload every file below `folder` to `s3://bucket/prefix/<relative path>`."""
    client = s3_client(endpoint_url)
    keys = []
    for file in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        key = f"{prefix.strip('/')}/{file.relative_to(folder).as_posix()}".lstrip("/")
        client.upload_file(str(file), bucket, key)
        keys.append(key)
    return keys
