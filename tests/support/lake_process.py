"""A child process that works on a lake, for concurrency and crash tests.

    python -m tests.support.lake_process '<json>'

The JSON names the lake (uri and optional S3 endpoint and keys) and an action. Run it with
LAKECLEANER_CRASH_AT=<crash point> to kill it at that point.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from lakecleaner import extras
from lakecleaner.config import LakeConfig, StorageSettings
from lakecleaner.config.iceberg import IcebergSettings
from lakecleaner.faults import CRASH_EXIT_STATUS
from lakecleaner.io import LocalStore
from lakecleaner.lake import Lake
from lakecleaner.log.records import Record
from lakecleaner.retention.executor import trim_partition

REPO = Path(__file__).resolve().parents[2]


def lake_spec(config: LakeConfig) -> dict[str, Any]:
    s, tables = config.storage, config.iceberg
    return {
        "uri": config.lake_uri,
        "endpoint_url": s.endpoint_url,
        "access_key_id": s.access_key_id,
        "secret_access_key": s.secret_access_key,
        "iceberg": {"enabled": tables.enabled, "namespace": tables.namespace, "catalog": dict(tables.catalog)},
    }


def open_lake(spec: dict[str, Any]) -> Lake:
    """The lake `spec` names, opened for work as a process of lakecleaner's opens it (its tables
    followed when the spec keeps them)."""
    settings = StorageSettings(
        endpoint_url=spec["endpoint_url"],
        region="us-east-1",
        access_key_id=spec["access_key_id"],
        secret_access_key=spec["secret_access_key"],
    )
    tables = IcebergSettings(**spec.get("iceberg", {}))
    return extras.open_lake(LakeConfig(spec["uri"], settings, iceberg=tables))


def start(config: LakeConfig, action: dict[str, Any], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    payload = json.dumps({"lake": lake_spec(config), **action})
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.lake_process", payload],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def main() -> None:
    request = json.loads(sys.argv[1])
    lake = open_lake(request["lake"])
    log = lake.topic(request["topic"]).partition(request["partition"])
    if request["action"] == "append":
        tag = request["tag"]
        for i in range(request["batches"]):
            records = [
                Record(f"{tag}-{i}-{j}".encode(), f"{tag}:{i}:{j}".encode(), 1000 + i)
                for j in range(request["batch_size"])
            ]
            log.append(records, now_ms=1_000_000)
    elif request["action"] == "trim":
        trim_partition(lake, request["topic"], request["partition"], request["offset"])
    elif request["action"] == "abandon-write":
        # a writer that dies in the middle of writing an object: on a local lake at the crash
        # point before the rename (LAKECLEANER_CRASH_AT=local_store.before_rename); on S3 with a
        # multipart upload of pyarrow's output stream under way, as a large compacted file has
        key = log.prefix + request["path"]
        data = os.urandom(request["bytes"])
        if isinstance(lake.store, LocalStore):
            lake.store.write(key, data)
        else:
            stream = lake.store.arrow_fs.open_output_stream(lake.store.arrow_path(key))
            stream.write(data)
            stream.flush()
        os._exit(CRASH_EXIT_STATUS)
    else:
        raise SystemExit(f"unknown action {request['action']}")


if __name__ == "__main__":
    main()
