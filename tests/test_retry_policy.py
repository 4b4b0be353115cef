"""One retry policy (issue #46): storage retries, commit races and `ObjectStore.update` follow
`RetryPolicy` from `lake.storage` (attempts, backoff and a time limit), and log each retry."""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path

import pytest

from lakecleaner.config import parse_config
from lakecleaner.errors import ConcurrentModification, ConfigError
from lakecleaner.io import LocalStore, RetryPolicy, open_store
from lakecleaner.lake import Lake
from lakecleaner.log.manifest import Manifest
from lakecleaner.log.records import Record


def test_the_policies_come_from_the_storage_settings() -> None:
    storage = {"max_attempts": 7, "backoff_base_ms": 20, "commit_attempts": 9, "retry_timeout_ms": 1500}
    config = parse_config({"lake": {"uri": "file:///tmp/x", "storage": storage}}, "<test>")
    store = open_store("file:///tmp/lakecleaner-retry-policy-test", config.storage)
    assert (store.retry_policy.max_attempts, store.retry_policy.base_delay_s, store.retry_policy.timeout_s) == (
        7,
        0.02,
        1.5,
    )
    assert (store.commit_policy.max_attempts, store.commit_policy.timeout_s) == (9, 1.5)
    with pytest.raises(ConfigError, match="commit_attempts"):
        parse_config({"lake": {"uri": "file:///tmp/x", "storage": {"commit_attempts": 0}}}, "<test>")


def test_a_policy_stops_at_its_attempts_or_its_time() -> None:
    policy = RetryPolicy(max_attempts=3, base_delay_s=0.001, max_delay_s=0.001, timeout_s=10)
    now = time.monotonic()
    assert policy.next_delay(0, now) is not None and policy.next_delay(1, now) is not None
    assert policy.next_delay(2, now) is None  # the third attempt was the last
    assert RetryPolicy(100, 0.001, 0.001, timeout_s=0.5).next_delay(0, now - 1) is None  # its time is spent


def test_an_update_that_keeps_losing_gives_up_by_the_policy_and_logs_each_retry(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = LocalStore(tmp_path, commit_retry=RetryPolicy(3, 0.001, 0.001, 10))
    store.write("k", b"0")

    def always_beaten(data: bytes | None) -> bytes:
        store.write("k", (data or b"") + b"!")  # another writer commits between the read and the write
        return b"mine"

    with caplog.at_level(logging.INFO, logger="lakecleaner.io.base"), pytest.raises(ConcurrentModification) as lost:
        store.update("k", always_beaten, what="the test object")
    assert "the test object: lost 3 races" in str(lost.value)
    retries = [r for r in caplog.records if "another writer changed" in r.getMessage()]
    assert len(retries) == 2 and "attempt 1" in retries[0].getMessage()


def test_a_commit_that_keeps_losing_gives_up_by_the_policy(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    lake = Lake.open(f"file://{tmp_path}")
    log = lake.create_topic("t").partition(0)
    log.append([Record(b"k", b"v", 1)], now_ms=1)
    log.store.commit_policy = RetryPolicy(4, 0.001, 0.001, 10)

    def beaten(current: Manifest) -> Manifest:
        _, etag = log.store.read_with_etag(log.manifest_key)  # another writer commits first
        log.store.replace(log.manifest_key, replace(current, version=current.version + 1).to_json(), etag)
        return current.next_version(2)

    with (
        caplog.at_level(logging.INFO, logger="lakecleaner.log.partition"),
        pytest.raises(ConcurrentModification) as lost,
    ):
        log.commit(beaten)
    assert "lost 4 commit races" in str(lost.value)
    assert len([r for r in caplog.records if "lost a commit race" in r.getMessage()]) == 3
