"""Which of the S3 sink's files an adoption reads, and the offsets their records get (issue 49).
Pure: takes the listed files, each partition's next offset in the lake, the settle time and
`now`; no I/O.

The rules:
- **Bundles.** A value file and its `.keys` / `.headers` sidecars are one bundle; a tombstone
  folder's bundle has no value file (its keys file stands for it).
- **Settled.** A bundle is adopted once each of its objects is older than the settle time and the
  keys sidecar is there when keys come from sidecars (the sink writes the sidecars after the
  value file). The first bundle of a partition that is not settled stops that partition's
  adoption: a later one would move the log's next offset past its records for good.
- **Re-delivered.** One start offset written twice (a time-based partitioner puts a re-delivery
  in another folder) is one bundle: the newest object is read, the other reported.
- **Incremental.** The log's next offset is the adoption's position: bundles that start below the
  last bundle starting below it were adopted before and are not read again; the records of the
  rest are kept from the next offset on.
- **Offsets.** The sink stores none but each file's first (its name); records follow in Kafka
  order, so record i of a file is at offset start + i when the topic has no gaps. A file that
  reaches past the next file of its kind (value or tombstone) overlaps a re-delivery of the same
  records, which the later file holds: its records from that start on are dropped, never
  counted twice. A gap (a file ending before the next one starts, a compacted source topic)
  stays a gap in the offsets.
- **Tombstones.** Value and tombstone files of one partition are written side by side
  (`behavior.on.null.values=write` does not rotate files between them), and which of their
  records came first is not in the files. Where their ranges overlap, the tombstones are placed
  after the values (a delete usually follows a key's updates; a key written again after its
  delete within one window stays deleted). A report counts the windows this rule ordered.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from lakecleaner.adopt.connect_names import HEADERS, KEYS, VALUE, SinkFile


@dataclass(frozen=True)
class Bundle:
    """A file of records and its sidecars: `main` is the value file, or a tombstone folder's keys file."""

    main: SinkFile
    keys: SinkFile | None
    headers: SinkFile | None

    @property
    def objects(self) -> tuple[SinkFile, ...]:
        return tuple(f for f in (self.main, self.keys, self.headers) if f is not None)

    @property
    def start(self) -> int:
        return self.main.start


@dataclass
class AdoptionPlan:
    """Per partition, the bundles to read in start order; what was left and why."""

    partitions: dict[int, list[Bundle]] = field(default_factory=dict)
    already_adopted: int = 0
    re_delivered: list[tuple[str, str]] = field(default_factory=list)  # (read, not read)
    unsettled: dict[str, str] = field(default_factory=dict)  # key -> why

    def to_dict(self) -> dict[str, object]:
        return {
            "partitions": {str(p): [b.main.key for b in bundles] for p, bundles in sorted(self.partitions.items())},
            "already_adopted": self.already_adopted,
            "re_delivered": [{"read": a, "not_read": b} for a, b in self.re_delivered],
            "unsettled": self.unsettled,
        }


def bundles_of(files: Iterable[SinkFile]) -> list[Bundle]:
    """The files grouped by base into bundles (a sidecar without its value file, outside a
    tombstone folder, makes no bundle)."""
    by_base: dict[str, dict[str, SinkFile]] = defaultdict(dict)
    for f in files:
        by_base[f.base][f.view] = f
    out = []
    for views in by_base.values():
        main = views.get(VALUE) or (views.get(KEYS) if next(iter(views.values())).tombstones else None)
        if main is not None:
            out.append(Bundle(main, views.get(KEYS), views.get(HEADERS)))
    return out


def plan_adoption(
    files: Iterable[SinkFile],
    next_offsets: Mapping[int, int],
    now_ms: int,
    settle_ms: int,
    keys_from_sidecars: bool,
) -> AdoptionPlan:
    """What to read of the sink's files (the rules above)."""
    plan = AdoptionPlan()
    by_partition: dict[int, list[Bundle]] = defaultdict(list)
    for bundle in _without_re_deliveries(bundles_of(files), plan):
        by_partition[bundle.main.partition].append(bundle)
    for partition, bundles in sorted(by_partition.items()):
        bundles.sort(key=lambda b: (b.start, b.main.tombstones))
        ready = _settled_prefix(bundles, now_ms, settle_ms, keys_from_sidecars, plan)
        position = next_offsets.get(partition, 0)
        below = [i for i, b in enumerate(ready) if b.start < position]
        first = below[-1] if below else 0
        plan.already_adopted += first
        if ready[first:]:
            plan.partitions[partition] = ready[first:]
    return plan


def _without_re_deliveries(bundles: Sequence[Bundle], plan: AdoptionPlan) -> list[Bundle]:
    newest: dict[tuple[int, int, bool], Bundle] = {}
    for bundle in sorted(bundles, key=lambda b: (max(f.mtime_ms for f in b.objects), b.main.key)):
        older = newest.get(bundle.main.group)
        if older is not None:
            plan.re_delivered.append((bundle.main.key, older.main.key))
        newest[bundle.main.group] = bundle
    return list(newest.values())


def _settled_prefix(
    bundles: Sequence[Bundle], now_ms: int, settle_ms: int, keys_from_sidecars: bool, plan: AdoptionPlan
) -> list[Bundle]:
    for index, bundle in enumerate(bundles):
        young = [f.key for f in bundle.objects if f.mtime_ms > now_ms - settle_ms]
        why = None
        if young:
            why = f"written less than the settle time ({settle_ms // 1000} s) ago"
        elif keys_from_sidecars and bundle.keys is None:
            why = "its .keys sidecar is missing (store.kafka.keys=true writes one beside each file)"
        if why is not None:
            plan.unsettled[bundle.main.key] = why
            for later in bundles[index + 1 :]:
                plan.unsettled[later.main.key] = f"an earlier file of partition {bundle.main.partition} is not settled"
            return list(bundles[:index])
    return list(bundles)


def next_of_kind(bundles: Sequence[Bundle]) -> list[int | None]:
    """For each bundle of a partition (in start order), the start of the next one of its kind
    (value or tombstone): where its own records end at the latest."""
    out: list[int | None] = [None] * len(bundles)
    last: dict[bool, int] = {}
    for index in range(len(bundles) - 1, -1, -1):
        kind = bundles[index].main.tombstones
        out[index] = last.get(kind)
        last[kind] = bundles[index].start
    return out


def record_offsets(files: Sequence[tuple[int, bool, int, int | None]], previous: int = -1) -> list[list[int]]:
    """The offsets of each file's records, for files given as (start, is tombstones', record
    count, next start of its kind) in start order, after offset `previous`; a record a later file
    re-delivers gets -1 (the rules above)."""
    kept = _kept(files)
    places = _places(files, kept)
    merged = sorted((place, n, i) for n, file_places in enumerate(places) for i, place in enumerate(file_places))
    out = [[-1] * count for _, _, count, _ in files]
    for place, n, i in merged:
        previous = max(place, previous + 1)
        out[n][i] = previous
    return out


def interleaved_windows(files: Sequence[tuple[int, bool, int, int | None]]) -> int:
    """How many windows of the files (as `record_offsets` takes them) interleave value and
    tombstone files, whose order the tombstones rule decided."""
    kept = _kept(files)
    return sum(1 for window in _windows(files, kept) if len({files[n][1] for n in window}) == 2)


def _kept(files: Sequence[tuple[int, bool, int, int | None]]) -> list[int]:
    """How many leading records of each file are its own: up to the next file of its kind."""
    return [count if limit is None else min(count, max(0, limit - start)) for start, _, count, limit in files]


def _places(files: Sequence[tuple[int, bool, int, int | None]], kept: Sequence[int]) -> list[list[int]]:
    """Where each kept record goes before offsets are made unique: start + i, but the tombstones
    of a window where value and tombstone files overlap go after its values, at its end (the
    window's records fill it from its first offset when the topic has no gaps)."""
    places = [[start + i for i in range(kept[n])] for n, (start, _, _, _) in enumerate(files)]
    for window in _windows(files, kept):
        kinds = {files[n][1] for n in window}
        if len(kinds) < 2:
            continue
        tombstones = [(n, i) for n in window if files[n][1] for i in range(kept[n])]
        end = files[window[0]][0] + sum(kept[n] for n in window)
        for rank, (n, i) in enumerate(tombstones):
            places[n][i] = end - len(tombstones) + rank
    return places


def _windows(files: Sequence[tuple[int, bool, int, int | None]], kept: Sequence[int]) -> list[list[int]]:
    """The files in runs whose offset ranges (start, start + kept) overlap."""
    windows: list[list[int]] = []
    end = -1
    for n, (start, _, _, _) in enumerate(files):
        if windows and start < end:
            windows[-1].append(n)
        else:
            windows.append([n])
        end = max(end, start + kept[n]) if len(windows[-1]) > 1 else start + kept[n]
    return windows


__all__ = [
    "AdoptionPlan",
    "Bundle",
    "bundles_of",
    "interleaved_windows",
    "next_of_kind",
    "plan_adoption",
    "record_offsets",
]
