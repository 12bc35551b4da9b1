"""A local HTTP file server on 127.0.0.1 for the download tests: Range requests, and per-file faults.

Modes per path: "ok"; "truncate" (serves the first half only, announced as such: the client sees a short, complete
response); "corrupt" (same size, its middle byte changed); "drop" (announces the full size, sends half, closes the
connection: an interrupted transfer; the mode then reverts to "ok", so a retry or a later run can resume). Every request
is logged as (path, Range header or None).
"""

from __future__ import annotations

import http.server
import re
import threading
from contextlib import contextmanager


class FileServer:
    def __init__(self, files: dict[str, bytes]):
        self.files = dict(files)
        self.modes: dict[str, str] = {}
        self.log: list[tuple[str, str | None]] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                path = self.path.lstrip("/")
                server.log.append((path, self.headers.get("Range")))
                if path not in server.files:
                    self.send_error(404)
                    return
                body, mode = server.files[path], server.modes.get(path, "ok")
                if mode == "truncate":
                    body = body[: len(body) // 2]
                elif mode == "corrupt":
                    mid = len(body) // 2
                    body = body[:mid] + bytes([body[mid] ^ 0x01]) + body[mid + 1 :]
                start = 0
                m = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
                if m and mode != "drop":
                    start = int(m[1])
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(body) - start))
                self.end_headers()
                if mode == "drop":
                    server.modes[path] = "ok"
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body[start:])

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def ranges(self, path: str) -> list[str | None]:
        return [r for p, r in self.log if p == path]


@contextmanager
def serve(files: dict[str, bytes]):
    server = FileServer(files)
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (connection refused: what a machine without network sees)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
