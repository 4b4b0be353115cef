from __future__ import annotations

import pytest

from lakecleaner.errors import InvalidTopicName
from lakecleaner.names import validate_group_id, validate_topic_name


@pytest.mark.parametrize("name", ["orders", "a", "orders.v1_cdc-2", "x" * 249, "..."])
def test_legal_names(name: str) -> None:
    assert validate_topic_name(name) == name


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "empty"),
        (".", "reserved"),
        ("..", "reserved"),
        ("x" * 250, "maximum is 249"),
        ("orders/../../etc", "illegal characters '/'"),
        ("has space", "illegal characters ' '"),
        ("ümlaut", "illegal characters"),
        (None, "empty or not a string"),
    ],
)
def test_illegal_names_are_rejected_with_the_rule(name: object, why: str) -> None:
    with pytest.raises(InvalidTopicName, match=why):
        validate_topic_name(name)


def test_group_ids_follow_the_same_rule_and_say_so() -> None:
    with pytest.raises(InvalidTopicName, match="consumer group id"):
        validate_group_id("a/b")


def test_illegal_topic_never_reaches_storage(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from lakecleaner.lake import Lake

    lake = Lake.open(f"file://{tmp_path}")
    with pytest.raises(InvalidTopicName):
        lake.create_topic("../escape")
    assert list(tmp_path.iterdir()) == []
