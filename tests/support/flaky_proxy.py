"""A real HTTP proxy on 127.0.0.1 in front of an S3 endpoint, failing requests on purpose:

* `failures=N`: the first N requests that `fail_when(method, path)` selects (all, unless given) are
  answered `failure` (status, error code) without being forwarded: by default 503
  ServiceUnavailable, an outage the client must ride out with retries;
* `strip_conditions=True`: If-Match and If-None-Match are removed before forwarding, as a store
  that ignores conditional writes (s3rver) behaves;
* `lose_replies=N`: the first N requests that `lose_when(method, path)` selects ARE forwarded and
  applied, but their reply is dropped (the connection closes): a write whose outcome the client
  cannot know, which its SDK retries.
* `rewrite(method, path, body)`: every request is forwarded and applied; when `rewrite` returns
  bytes, the client gets them as the reply's body instead of the store's (a store that answers
  other than it did).

`requests` counts every request.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable, Collection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse


class _Server(ThreadingHTTPServer):
    """A threading HTTP server whose listen backlog holds a pool of clients connecting at once:
    socketserver's is 5, and 32 threads writing at once through the proxy on a loaded machine had
    connections refused before it accepted them (ConnectionClosedError, not the failure a test
    injects)."""

    request_queue_size = 128


class FlakyProxy:
    def __init__(
        self,
        target_url: str,
        failures: int = 0,
        *,
        fail_when: Callable[[str, str], bool] = lambda method, path: True,
        lose_replies: int = 0,
        lose_when: Callable[[str, str], bool] = lambda method, path: True,
        strip_conditions: bool = False,
        rewrite: Callable[[str, str, bytes], bytes | None] = lambda method, path, body: None,
        failure: tuple[int, str] = (503, "ServiceUnavailable"),
    ) -> None:
        self.target = urlparse(target_url)
        self.failures_left = failures
        self.fail_when = fail_when
        self.failure = failure
        self.replies_to_lose = lose_replies
        self.lose_when = lose_when
        self.lost: list[tuple[str, str]] = []
        self.strip_conditions = strip_conditions
        self.rewrite = rewrite
        self.requests = 0
        #: (method, path) of every request, in the order they came.
        self.seen: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # answers botocore's Expect: 100-continue at once
            upstream: http.client.HTTPConnection | None = None

            def log_message(self, *args: object) -> None:
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                    return self.rfile.read(int(self.headers.get("Content-Length") or 0))
                chunks = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    chunk = self.rfile.read(size + 2)[:size]  # the chunk and its CRLF
                    if size == 0:
                        while self.rfile.readline().strip():  # trailers
                            pass
                        return b"".join(chunks)
                    chunks.append(chunk)

            def _handle(self) -> None:
                body = self._body()
                with proxy.lock:
                    proxy.requests += 1
                    proxy.seen.append((self.command, self.path))
                    fail = proxy.failures_left > 0 and proxy.fail_when(self.command, self.path)
                    proxy.failures_left -= 1 if fail else 0
                    lose = not fail and proxy.replies_to_lose > 0 and proxy.lose_when(self.command, self.path)
                    proxy.replies_to_lose -= 1 if lose else 0
                if fail:
                    status, code = proxy.failure
                    payload = f"<Error><Code>{code}</Code><Message>try later</Message></Error>".encode()
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                dropped = ("host", "transfer-encoding") + (
                    ("if-match", "if-none-match") if proxy.strip_conditions else ()
                )
                headers = {k: v for k, v in self.headers.items() if k.lower() not in dropped}
                headers["Content-Length"] = str(len(body))
                headers["Host"] = self.headers.get("Host", "")
                resp, data = self._forward(body, headers)
                data = proxy.rewrite(self.command, self.path, data) or data
                if lose:  # applied by the store; the client never hears of it
                    self._close_upstream()
                    proxy.lost.append((self.command, self.path))
                    self.close_connection = True
                    return
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                # A HEAD's reply has no body but the object's length.
                length = resp.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", length or str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _forward(self, body: bytes, headers: dict[str, str]) -> tuple[http.client.HTTPResponse, bytes]:
                """Send the request upstream on this client connection's own upstream connection, kept
                open between its requests as the client keeps its own; when the store has closed an
                idle one, once more on a new connection."""
                reused = self.upstream is not None
                try:
                    return self._exchange(body, headers)
                except (http.client.RemoteDisconnected, ConnectionError):
                    self._close_upstream()
                    if not reused:
                        raise
                    return self._exchange(body, headers)

            def _exchange(self, body: bytes, headers: dict[str, str]) -> tuple[http.client.HTTPResponse, bytes]:
                if self.upstream is None:
                    self.upstream = http.client.HTTPConnection(proxy.target.hostname, proxy.target.port, timeout=30)
                self.upstream.request(self.command, self.path, body=body, headers=headers)
                resp = self.upstream.getresponse()
                data = resp.read()
                if resp.will_close:
                    self._close_upstream()
                return resp, data

            def _close_upstream(self) -> None:
                if self.upstream is not None:
                    self.upstream.close()
                    self.upstream = None

            def finish(self) -> None:
                self._close_upstream()
                super().finish()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FlakyProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def manifest_get(method: str, path: str) -> bool:
    """A manifest read."""
    return method == "GET" and path.split("?")[0].endswith("/manifest.json")


def manifest_put(method: str, path: str) -> bool:
    """Selects the writes of partition manifests."""
    return method == "PUT" and path.split("?")[0].endswith("/manifest.json")


def parquet_read(method: str, path: str) -> bool:
    """Selects the reads of segment files."""
    return method in ("GET", "HEAD") and path.split("?")[0].endswith(".parquet")


def parquet_get_except(names: Collection[str]) -> Callable[[str, str], bool]:
    """Selects the GETs of segment files whose names are not in `names` (read when called, so a
    test may fill it once the topic exists): with the input files' names, a run's staged output."""
    return lambda method, path: (
        method == "GET" and parquet_read(method, path) and path.split("?")[0].rsplit("/", 1)[-1] not in names
    )


def parquet_upload(method: str, path: str) -> bool:
    """Selects the uploads of segment files (single PUTs and multipart requests)."""
    return method in ("PUT", "POST") and ".parquet" in path
