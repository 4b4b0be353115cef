"""A TCP proxy that holds what clients send for a fixed time before passing it on, as the link to a
bucket in another zone or region would, and counts the HTTP requests that go through it.

    python bench/latency_proxy.py http://127.0.0.1:8333 --latency-ms 20

prints its own URL, then answers each line `requests` on stdin with the number of requests so
far, and stops when stdin closes. Every chunk a client sends is forwarded `--latency-ms` after it
arrived (order kept per connection; replies pass at once), so each request waits the latency
once, however many connections are open. It parses no HTTP and runs on one asyncio loop: the
simulated network costs the machine little CPU, so the measured client does not share its two
cores with the network it is measured over (an HTTP proxy in Python cost about as much CPU per
request as the client itself). A request is counted by its request line's end (` HTTP/1.1\\r\\n`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import threading
from urllib.parse import urlparse

REQUEST_LINE_END = b" HTTP/1.1\r\n"
CHUNK = 256 * 1024


class LatencyProxy:
    def __init__(self, target_url: str, latency_ms: float) -> None:
        target = urlparse(target_url)
        self.host, self.port = target.hostname or "127.0.0.1", target.port or 80
        self.latency_s = latency_ms / 1000
        self.requests = 0
        self.lock = threading.Lock()

    async def serve(self, ready: asyncio.Future[str]) -> None:
        server = await asyncio.start_server(self.connection, "127.0.0.1", 0)
        ready.set_result(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
        async with server:
            await server.serve_forever()

    async def connection(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            store_reader, store_writer = await asyncio.open_connection(self.host, self.port)
        except OSError:
            client_writer.close()
            return
        with contextlib.suppress(asyncio.CancelledError):  # stopping: a cancelled connection is logged as an error
            await asyncio.gather(
                self.delayed(client_reader, store_writer),
                self.passed(store_reader, client_writer),
                return_exceptions=True,
            )
        for writer in (client_writer, store_writer):
            writer.close()

    async def delayed(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Client to store: each chunk forwarded `latency` after it arrived, in order."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def forward() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    writer.write_eof()
                    return
                if (wait := due - loop.time()) > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()

        forwarding = asyncio.ensure_future(forward())
        tail = b""
        while data := await reader.read(CHUNK):
            seen = tail + data
            with self.lock:
                self.requests += seen.count(REQUEST_LINE_END)
            tail = seen[-(len(REQUEST_LINE_END) - 1) :]
            queue.put_nowait((loop.time() + self.latency_s, data))
        queue.put_nowait((0.0, b""))
        await forwarding

    @staticmethod
    async def passed(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Store to client: at once."""
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        writer.close()


def answer_stats(proxy: LatencyProxy, loop: asyncio.AbstractEventLoop) -> None:
    """Answer `requests` lines on stdin; stop the loop when stdin closes."""
    for line in sys.stdin:
        if line.strip() == "requests":
            with proxy.lock:
                print(proxy.requests, flush=True)
    loop.call_soon_threadsafe(loop.stop)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("target", help="the store's URL, e.g. http://127.0.0.1:8333")
    parser.add_argument("--latency-ms", type=float, default=20.0)
    args = parser.parse_args()
    proxy = LatencyProxy(args.target, args.latency_ms)
    loop = asyncio.new_event_loop()
    ready: asyncio.Future[str] = loop.create_future()
    serving = loop.create_task(proxy.serve(ready))
    print(loop.run_until_complete(ready), flush=True)
    threading.Thread(target=answer_stats, args=(proxy, loop), daemon=True).start()
    loop.run_forever()
    tasks = asyncio.all_tasks(loop) | {serving}
    for task in tasks:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    loop.close()


if __name__ == "__main__":
    main()
