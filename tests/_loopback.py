"""A small HTTP file server on 127.0.0.1 for download tests (no internet is ever used).

Serves ``files`` (path -> bytes) with ``Range`` support, and can misbehave on
purpose: cut a transfer half-way (``cut``: path -> how many more times), stall
before the body (``stall``), announce a wrong length (``lie``), or ignore ranges.
Every request is logged as ``(path, range header)``.
"""

from __future__ import annotations

import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class State:
    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.cut: dict[str, int] = {}
        self.stall: dict[str, int] = {}
        self.lie: dict[str, int] = {}
        self.no_range = False
        self.requests: list[tuple[str, str | None]] = []


def _handler(state: State):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # one response per connection; a cut closes it

        def log_message(self, *args):  # quiet
            pass

        def do_GET(self):  # noqa: N802
            rng = self.headers.get("Range")
            state.requests.append((self.path, rng))
            body = state.files.get(self.path)
            if body is None:
                self.send_error(404, "Not Found")
                return
            total = len(body)
            start = 0
            m = re.match(r"bytes=(\d+)-$", rng or "")
            if m and not state.no_range:
                start = int(m[1])
                if start >= total:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{total}")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{total - 1}/{total}")
            else:
                self.send_response(200)
            announced = state.lie.get(self.path, total - start)
            self.send_header("Content-Length", str(announced))
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            payload = body[start:]
            if state.stall.get(self.path, 0) > 0:
                state.stall[self.path] -= 1
                time.sleep(1.5)
            if state.cut.get(self.path, 0) > 0:
                state.cut[self.path] -= 1
                self.wfile.write(payload[: len(payload) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(payload)

    return Handler


class Loopback:
    """``with Loopback() as srv: srv.url('/x')`` — a threaded server on a free port."""

    def __init__(self):
        self.state = State()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.state))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Loopback:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def base(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def url(self, path: str) -> str:
        return self.base + path

    def serve(self, path: str, body: bytes) -> str:
        self.state.files[path] = body
        return self.url(path)
