"""The S3 servers the benchmarks run against, on 127.0.0.1, each in a process of its own: SeaweedFS
(a real object store, as the test suite runs it) or moto's server mode; and the latency proxy
(bench/latency_proxy.py) in front of one, holding every request as a bucket in another zone would."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support, when run as a script

import boto3

#: Seconds between deleting objects and SeaweedFS's vacuum reclaiming their disk (`reclaim`).
RECLAIM_AFTER_S = 10

ACCESS_KEY, SECRET_KEY, BUCKET = "bench-access", "bench-secret", "lakecleaner-bench"  # moto's


@dataclass(frozen=True)
class S3Server:
    url: str
    access_key: str
    secret_key: str
    bucket: str
    stop: Callable[[], None]
    #: The server's process (its memory is not the measured client's), when this process started it.
    pid: int | None
    #: Give back the disk of deleted objects now (SeaweedFS keeps them in its volumes until a vacuum).
    reclaim: Callable[[], None] = lambda: None


def start_moto() -> S3Server:
    """moto's S3 server in a process of its own (so its CPU is not this process's)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    client = boto3.client(
        "s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            client.create_bucket(Bucket=BUCKET)
            break
        except Exception:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise
            time.sleep(0.3)

    def stop() -> None:
        process.terminate()
        process.wait()

    return S3Server(url, ACCESS_KEY, SECRET_KEY, BUCKET, stop, process.pid)


def start_seaweedfs(work: Path) -> S3Server:
    """SeaweedFS as the test suite runs it (tests/support/s3.py)."""
    from tests.support.s3 import SeaweedFS

    server = SeaweedFS(work / "seaweedfs")
    endpoint = server.start()
    assert server.process is not None
    vacuum = f"http://127.0.0.1:{server.ports[0]}/vol/vacuum?garbageThreshold=0.0001"

    def reclaim() -> None:
        """The master's vacuum of every volume with any garbage: a lake copied and deleted for each
        run would otherwise stay on disk (the 20 ms runs of `--case all` filled 32 GB). The filer
        frees a deleted object's chunks, and the volumes report them to the master, a few seconds
        after the delete (measured: none reclaimed at once, all of them 8 s later)."""
        time.sleep(RECLAIM_AFTER_S)
        with urllib.request.urlopen(vacuum, timeout=900) as reply:
            reply.read()

    return S3Server(
        endpoint.url,
        endpoint.access_key,
        endpoint.secret_key,
        endpoint.bucket,
        server.stop,
        server.process.pid,
        reclaim,
    )


class LatencyProxy:
    """bench/latency_proxy.py in a process of its own, holding every request `latency_ms`."""

    def __init__(self, target: str, latency_ms: float) -> None:
        command = [sys.executable, str(Path(__file__).with_name("latency_proxy.py")), target]
        command += ["--latency-ms", str(latency_ms)]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()

    @property
    def requests(self) -> int:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("requests\n")
        self.process.stdin.flush()
        return int(self.process.stdout.readline())

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()
