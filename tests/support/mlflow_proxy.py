"""A real HTTP proxy in front of a real MLflow server that answers 503 (or another status) to
the requests a test chooses (the first N, every write, one endpoint) and forwards the rest."""

from __future__ import annotations

import http.server
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def failing_proxy(target: str, refuse: Callable[[str, int], bool],
                  refused: int = 503) -> Iterator[tuple[str, list]]:
    """(the proxy's URI, the log of (path, status) answered). `refuse(path, n)` — n the
    requests answered so far — says which requests get `refused` (503: the server is down;
    404: it has no such endpoint) instead of the server's answer."""
    answered: list[tuple[str, int]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def _handle(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) or None
            if refuse(self.path, len(answered)):
                answered.append((self.path, refused))
                self.send_response(refused)
                self.end_headers()
                return
            request = urllib.request.Request(target + self.path, data=body, method=self.command,
                                             headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    status, payload = answer.status, answer.read()
            except urllib.error.HTTPError as error:
                status, payload = error.code, error.read()
            answered.append((self.path, status))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = _handle

        def log_message(self, *_args):
            pass

    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{proxy.server_address[1]}", answered
    finally:
        proxy.shutdown()
        proxy.server_close()
