"""The config file's YAML, read with bounds and, when asked, only for some of its topics.

A config file is input like any other: a 1 KB "billion laughs" of nested aliases expands to
gigabytes wherever the value is walked or printed, and deep nesting exhausts the stack. The text is
parsed into events by libyaml (PyYAML's C parser: a 10,000-topic file's events in 0.2 s, where
PyYAML's own loader takes 5 s for the whole file), the bounds are checked on the events as they
stream by, and only then is a document composed.

A DAG file builds the DAGs of its share of the topics (issue 50), so it asks for those topics only:
every other entry under `topics:` is dropped at the event level, before anything is composed,
constructed or validated. When an alias refers to an anchor inside a dropped topic (as
`yaml.safe_dump` writes repeated settings), the whole document is composed and the other topics are
dropped from it instead: the document means what it says, and the share is still the share.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
    Event,
    MappingStartEvent,
    NodeEvent,
    ScalarEvent,
)
from yaml.resolver import Resolver

MAX_CONFIG_ALIASES = 1000
MAX_CONFIG_DEPTH = 50

#: libyaml's safe loader when PyYAML was built with it (the wheels are), else PyYAML's own.
_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Replay(Composer, SafeConstructor, Resolver):
    """PyYAML's safe composer and constructor over a list of events instead of a parser."""

    def __init__(self, events: Iterable[Event]) -> None:
        self._events: deque[Event] = deque(events)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)

    def check_event(self, *choices: type) -> bool:
        return bool(self._events) and (not choices or isinstance(self._events[0], choices))

    def peek_event(self) -> Event:
        return self._events[0]

    def get_event(self) -> Event:
        return self._events.popleft()

    def dispose(self) -> None:
        self._events.clear()


class _Selection:
    """One pass over a document's events: the bounds, and the `topics:` entries `keep_topic` refuses
    left out as they stream by (a 10,000-topic file is 160,000 events, and holding them all costs
    more than parsing them). Levels count collections: the top-level mapping's keys and values are at
    level 1, the entries of `topics:` at level 2."""

    def __init__(self, keep_topic: Callable[[str], bool] | None) -> None:
        self.keep_topic = keep_topic
        self.kept: list[Event] = []
        self.dropped_anchors: set[str] = set()
        self.kept_aliases: set[str] = set()
        self.aliases = self.depth = 0
        self.top_nodes = self.topic_nodes = 0  # nodes completed at level 1, and at level 2 inside topics
        self.top_key: str | None = None  # the key of the level-1 entry being read
        self.in_topics = self.dropping = False

    def take(self, event: Event) -> None:
        """Check `event` against the bounds, then keep it or leave it out."""
        if isinstance(event, CollectionEndEvent):
            self.depth -= 1
        level = self.depth
        if isinstance(event, AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_CONFIG_ALIASES:
                raise yaml.YAMLError(f"more than {MAX_CONFIG_ALIASES} aliases (*name): a config file needs far fewer")
        node = isinstance(event, (ScalarEvent, AliasEvent, CollectionStartEvent))
        if self.in_topics and level == 2 and node and self.topic_nodes % 2 == 0:
            self.dropping = (
                self.keep_topic is not None and isinstance(event, ScalarEvent) and not self.keep_topic(event.value)
            )
        self._keep_or_drop(event)
        if isinstance(event, CollectionStartEvent):
            self.depth += 1
            if self.depth > MAX_CONFIG_DEPTH:
                raise yaml.YAMLError(f"nested deeper than {MAX_CONFIG_DEPTH} levels")
            if level == 1 and self.top_key == "topics" and isinstance(event, MappingStartEvent):
                self.in_topics, self.topic_nodes = True, 0
        elif isinstance(event, (ScalarEvent, AliasEvent, CollectionEndEvent)):
            self._completed(event, level)

    def _keep_or_drop(self, event: Event) -> None:
        if self.dropping:
            if isinstance(event, NodeEvent) and not isinstance(event, AliasEvent) and event.anchor:
                self.dropped_anchors.add(event.anchor)
            return
        if isinstance(event, AliasEvent) and event.anchor:
            self.kept_aliases.add(event.anchor)
        if self.keep_topic is not None:
            self.kept.append(event)

    def _completed(self, event: Event, level: int) -> None:
        """A node ended at `level`: count it, and follow which entry is being read."""
        if level == 2 and self.in_topics:
            self.topic_nodes += 1
            if self.topic_nodes % 2 == 0:
                self.dropping = False
        elif level == 1:
            self.top_nodes += 1
            if self.top_nodes % 2 == 1:
                self.top_key = event.value if isinstance(event, ScalarEvent) else None
            else:
                self.in_topics = False


def read_yaml(text: str, keep_topic: Callable[[str], bool] | None = None) -> Any:
    """The document in `text` (None when empty), refused with yaml.YAMLError when it has more than
    MAX_CONFIG_ALIASES aliases or nests deeper than MAX_CONFIG_DEPTH levels, or is not YAML. With
    `keep_topic`, only the `topics:` entries it accepts are composed (see the module docstring)."""
    selection = _Selection(keep_topic)
    for event in yaml.parse(text, Loader=_LOADER):
        selection.take(event)
    if keep_topic is None:
        return yaml.load(text, Loader=_LOADER)  # within the bounds: libyaml composes faster than _Replay
    if selection.kept_aliases & selection.dropped_anchors:
        return _only_topics(yaml.load(text, Loader=_LOADER), keep_topic)
    return _Replay(selection.kept).get_single_data()


def _only_topics(document: Any, keep_topic: Callable[[str], bool]) -> Any:
    """The whole document (its aliases resolved) less the `topics:` entries `keep_topic` refuses."""
    if isinstance(document, dict) and isinstance(document.get("topics"), dict):
        topics = document["topics"]
        document["topics"] = {k: v for k, v in topics.items() if not isinstance(k, str) or keep_topic(k)}
    return document
