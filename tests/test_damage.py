"""Issue #14: storage that fails or lies. Each test names the damage; every record readable before
is still readable (or recoverable) after every command, and nothing is served or deleted wrongly.

Commits whose reply is lost: the proxy forwards a manifest write to the S3 server, which applies it,
then drops the reply; the SDK retries and meets its own manifest as a 412. The commit must read the
manifest back and see that it landed, not take it for a lost race (which would delete the data files
the landed manifest references and append again).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lakecleaner.config import LakeConfig
from lakecleaner.lake import Lake
from lakecleaner.log.records import Record
from lakecleaner.retention import retain_topic
from lakecleaner.retention.executor import trim_partition
from tests.conftest import S3Endpoint
from tests.flaky_proxy import FlakyProxy

HOUR = 3_600_000
T0 = 1_772_323_200_000


def manifest_put(method: str, path: str) -> bool:
    return method == "PUT" and path.split("?")[0].endswith("/manifest.json")


@pytest.fixture
def lossy(s3_endpoint: S3Endpoint, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Lake, FlakyProxy]]:
    """A lake reached through a proxy that will drop the reply of the next manifest write it is
    told to (set `proxy.replies_to_lose`)."""
    with FlakyProxy(s3_endpoint.url, lose_when=manifest_put) as proxy:
        settings = s3_endpoint.settings(endpoint_url=proxy.url, max_attempts=4, backoff_base_ms=1, backoff_max_ms=5)
        prefix = tmp_path_factory.mktemp("lossy").name
        yield Lake.open(LakeConfig(f"s3://{s3_endpoint.bucket}/{prefix}", settings)), proxy


def records(lake: Lake, topic: str) -> list[tuple[int, bytes]]:
    table = lake.topic(topic).partition(0).read(columns=["offset", "key"])
    return list(zip(table.column("offset").to_pylist(), table.column("key").to_pylist(), strict=True))


def test_an_append_whose_reply_is_lost_lands_once(lossy: tuple[Lake, FlakyProxy]) -> None:
    lake, proxy = lossy
    log = lake.create_topic("events").partition(0)
    log.append([Record(b"a", b"1", T0)], now_ms=T0)
    proxy.replies_to_lose = 1
    result = log.append([Record(b"b", b"2", T0)], now_ms=T0)
    assert len(proxy.lost) == 1  # the write was applied, its reply dropped, the SDK retried
    assert (result.base_offset, result.next_offset) == (1, 2)
    assert records(lake, "events") == [(0, b"a"), (1, b"b")]  # once, and every file it names exists
    log.append([Record(b"c", b"3", T0)], now_ms=T0)
    assert records(lake, "events") == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_a_roll_a_trim_and_a_retention_whose_replies_are_lost_each_land_once(lossy: tuple[Lake, FlakyProxy]) -> None:
    lake, proxy = lossy
    topic = lake.create_topic("views", config={"retention.ms": 10 * HOUR, "file.delete.delay.ms": 0})
    log = topic.partition(0)
    for i in range(3):
        log.append([Record(f"k{i}".encode(), b"v", T0 - (20 - i) * HOUR)], now_ms=T0)
        proxy.replies_to_lose = 1
        log.roll(now_ms=T0)
    assert len(proxy.lost) == 3 and [s.sealed for s in log.manifest().segments] == [True] * 3

    proxy.replies_to_lose = 1
    trim_partition(lake, "views", 0, 1, now_ms=T0)
    assert len(proxy.lost) == 4 and log.manifest().log_start_offset == 1
    assert records(lake, "views") == [(1, b"k1"), (2, b"k2")]

    log.append([Record(b"new", b"v", T0)], now_ms=T0)
    proxy.replies_to_lose = 1
    report = retain_topic(lake, "views", T0)
    assert len(proxy.lost) == 5
    assert [p.status for p in report.partitions] == ["committed"]
    assert records(lake, "views") == [(3, b"new")]
