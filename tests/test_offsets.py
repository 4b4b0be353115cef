"""Consumer groups' committed offsets, and the minimum over subscribed groups (KIP-68's input)."""

from __future__ import annotations

import threading

import pytest

from lakecleaner.config import LakeConfig, parse_config
from lakecleaner.errors import InvalidTopicName
from lakecleaner.lake import Lake
from lakecleaner.offsets import group_key
from tests.support.backends import ALL_BACKENDS

pytestmark = pytest.mark.backends(*ALL_BACKENDS)  # racing commits on the real object store too (issue #15)


def test_commit_and_read_back(lake: Lake) -> None:
    lake.offsets.commit("billing", "orders", {0: 10, 1: 3}, now_ms=5)
    lake.offsets.commit("billing", "orders", {1: 7}, now_ms=6)
    group = lake.offsets.read_group("billing")
    assert {p: c.offset for p, c in group.topics["orders"].items()} == {0: 10, 1: 7}
    assert group.topics["orders"][1].commit_ms == 6
    assert lake.offsets.list_groups() == ["billing"]


def test_minimum_over_subscribed_groups(lake: Lake) -> None:
    lake.offsets.commit("a", "orders", {0: 10, 1: 4})
    lake.offsets.commit("b", "orders", {0: 7, 1: 9})
    lake.offsets.commit("c", "other-topic", {0: 1})  # not subscribed to orders
    positions = lake.offsets.consumed_positions("orders", [0, 1])
    assert positions[0].offset == 7 and positions[0].holding_groups == ("b",)
    assert positions[1].offset == 4 and set(positions[1].groups) == {"a", "b"}


def test_a_subscribed_group_without_an_offset_makes_the_minimum_unknown_not_zero(lake: Lake) -> None:
    lake.offsets.commit("a", "orders", {0: 10})
    lake.offsets.commit("b", "orders", {1: 3})
    position = lake.offsets.consumed_position("orders", 0)
    assert position.offset is None and not position.known
    assert "group b has no committed offset for partition 0" in (position.reason or "")


def test_no_subscribed_group_is_unknown(lake: Lake) -> None:
    position = lake.offsets.consumed_position("orders", 0)
    assert position.offset is None and "no consumer group" in (position.reason or "")


def test_unreadable_group_makes_every_partition_unknown(lake: Lake) -> None:
    lake.offsets.commit("a", "orders", {0: 10})
    lake.offsets.commit("b", "orders", {0: 20})
    lake.store.write(group_key("b"), b"{not json")
    position = lake.offsets.consumed_position("orders", 0)
    assert position.offset is None
    assert "offsets of group b cannot be read" in (position.reason or "")


def test_group_declared_in_config_but_never_committed_is_unknown(lake_config: LakeConfig) -> None:
    declared = parse_config(
        {"lake": {"uri": "file:///unused"}, "topics": {"orders": {"consumer_groups": ["analytics"]}}}
    )
    lake = Lake.open(LakeConfig(lake_config.lake_uri, lake_config.storage, topics=declared.topics))
    lake.offsets.commit("a", "orders", {0: 10})
    position = lake.offsets.consumed_position("orders", 0)
    assert position.offset is None and "analytics" in (position.reason or "")


def test_concurrent_commits_of_one_group_lose_nothing(lake: Lake) -> None:
    def commit(p: int) -> None:
        for o in range(1, 6):
            lake.offsets.commit("g", "orders", {p: o})

    threads = [threading.Thread(target=commit, args=(p,)) for p in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    offsets = {p: c.offset for p, c in lake.offsets.read_group("g").topics["orders"].items()}
    assert offsets == dict.fromkeys(range(6), 5)


def test_invalid_commits_are_rejected(lake: Lake) -> None:
    with pytest.raises(ValueError, match="non-negative"):
        lake.offsets.commit("g", "orders", {0: -1})
    with pytest.raises(InvalidTopicName, match="consumer group id"):
        lake.offsets.commit("../g", "orders", {0: 1})
