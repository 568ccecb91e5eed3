"""Helpers around the session's S3-compatible server (moto's server mode on 127.0.0.1, see
the `s3_server` fixture): fresh buckets, uploads, and a flaky HTTP proxy in front of the
server that answers the first N requests with 503 SlowDown, as S3 does under load."""

from __future__ import annotations

import http.client
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from cost_pipeline.demo.local_s3 import s3_client

SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
               "proxy-authorization", "proxy-authenticate"}


def new_bucket(endpoint_url: str, prefix: str = "t") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    s3_client(endpoint_url).create_bucket(Bucket=name)
    return name


def put(endpoint_url: str, bucket: str, key: str, body: bytes | str) -> None:
    data = body.encode() if isinstance(body, str) else body
    s3_client(endpoint_url).put_object(Bucket=bucket, Key=key, Body=data)


class FlakyProxy:
    """Forwards every request to `upstream`, except that the first `failures` requests get
    a 503 SlowDown. `requests` counts what arrived, `failed` what was refused."""

    def __init__(self, upstream: str, failures: int):
        target = urlsplit(upstream)
        proxy = self
        self.failures, self.requests, self.failed = failures, 0, 0
        self.paths: list[str] = []
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args) -> None:  # keep the test output quiet
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                with lock:
                    proxy.requests += 1
                    proxy.paths.append(f"{self.command} {self.path}")
                    refuse = proxy.failed < proxy.failures
                    if refuse:
                        proxy.failed += 1
                if refuse:
                    payload = b"" if self.command == "HEAD" else SLOW_DOWN
                    self.send_response(503)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                upstream_conn = http.client.HTTPConnection(target.hostname, target.port,
                                                           timeout=30)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in _HOP_BY_HOP}
                upstream_conn.request(self.command, self.path, body=body, headers=headers)
                response = upstream_conn.getresponse()
                data = response.read()
                self.send_response(response.status)
                for key, value in response.getheaders():
                    # a HEAD's Content-Length is the object's size: pass it on as it is
                    if key.lower() not in _HOP_BY_HOP and (
                            key.lower() != "content-length" or self.command == "HEAD"):
                        self.send_header(key, value)
                if self.command != "HEAD":
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                upstream_conn.close()

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FlakyProxy:
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._server.shutdown()
        self._server.server_close()
