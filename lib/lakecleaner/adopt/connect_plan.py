"""Which of the S3 sink's files an adoption reads, and the offsets their records get (issue 49).
Pure: takes the listed files, each partition's next offset in the lake, the settle time, `now`
and the ledger; no I/O.

The rules:
- **Bundles.** A value file and its `.keys` / `.headers` sidecars are one bundle; a tombstone
  folder's bundle has no value file (its keys file stands for it).
- **Settled.** A bundle is adopted once each of its objects is older than the settle time and the
  keys sidecar is there when keys come from sidecars (the sink writes the sidecars after the
  value file). The first bundle of a partition that is not settled stops that partition's
  adoption: a later one would move the log's next offset past its records for good.
- **Re-delivered.** One start offset written twice (a time-based partitioner puts a re-delivery
  in another folder) is one bundle: the newest object is read, the other reported.
- **Incremental.** The ledger (`adopt.originals`) says what was adopted: a bundle whose objects it
  holds with their identity, at an offset the log reached, is not read again; one that changed is
  read again (its records below the log's next offset are checked against the log, `adopt.late`);
  one it does not know is read. Below the offset from which a partition is tracked (lakes adopted
  before the ledger kept identities), the old rule: bundles that start below the last bundle
  starting below the log's next offset were adopted before.
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
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from lakecleaner.adopt.connect_names import HEADERS, KEYS, VALUE, SinkFile
from lakecleaner.adopt.originals import AdoptedSource, Original


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
    """Per partition, the bundles to read in start order; what was left and why: adopted before
    (the ledger's identity matches), re-delivered, not settled, or arrived after its records were
    adopted (`late`); what changed after adoption (`changed`: read again, its records checked
    against the log); and the offsets from which the ledger starts tracking partitions it did not."""

    partitions: dict[int, list[Bundle]] = field(default_factory=dict)
    adopted_before: list[str] = field(default_factory=list)
    re_delivered: list[tuple[str, str]] = field(default_factory=list)  # (read, not read)
    unsettled: dict[str, str] = field(default_factory=dict)  # key -> why
    changed: dict[str, str] = field(default_factory=dict)  # key -> how it changed after adoption
    late: dict[str, str] = field(default_factory=dict)  # key -> why it is kept and not adopted
    tracked_from: dict[int, int] = field(default_factory=dict)

    @property
    def already_adopted(self) -> int:
        return len(self.adopted_before)

    def to_dict(self) -> dict[str, object]:
        return {
            "partitions": {str(p): [b.main.key for b in bundles] for p, bundles in sorted(self.partitions.items())},
            "already_adopted": self.already_adopted,
            "adopted_before": self.adopted_before,
            "re_delivered": [{"read": a, "not_read": b} for a, b in self.re_delivered],
            "unsettled": self.unsettled,
            "changed": self.changed,
            "late": self.late,
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
    ledger: AdoptedSource | None = None,
    prefer: Collection[str] = (),
) -> AdoptionPlan:
    """What to read of the sink's files (the rules above, and the ledger's: `adopt.originals`).
    `prefer`: keys of objects that changed after adoption to take as they are now."""
    plan = AdoptionPlan()
    known = ledger.by_key() if ledger is not None else {}
    by_partition: dict[int, list[Bundle]] = defaultdict(list)
    for bundle in _without_re_deliveries(bundles_of(files), plan):
        by_partition[bundle.main.partition].append(bundle)
    for partition, bundles in sorted(by_partition.items()):
        bundles.sort(key=lambda b: (b.start, b.main.tombstones))
        ready = _settled_prefix(bundles, now_ms, settle_ms, keys_from_sidecars, plan)
        position = next_offsets.get(partition, 0)
        tracked = ledger.tracked_from.get(partition) if ledger is not None else None
        if tracked is None:
            tracked = plan.tracked_from[partition] = position
        to_read = _by_ledger(ready, known, position, tracked, set(prefer), plan)
        if to_read:
            plan.partitions[partition] = to_read
    return plan


def _by_ledger(
    bundles: Sequence[Bundle],
    known: Mapping[str, Original],
    position: int,
    tracked: int,
    prefer: set[str],
    plan: AdoptionPlan,
) -> list[Bundle]:
    """A partition's settled bundles to read: not those the ledger says were adopted (the same
    objects, and the log reached their offset), nor those adopted the earlier way (below `tracked`,
    all but the last starting below the position, whose records from there on are new). A bundle
    with an object that changed after adoption is read again (`changed`): its records below the
    position are checked against the log, so a re-delivery that only adds records is adopted and one
    with other bytes is a conflict. A bundle adopted but for an object that came later (a `.headers`
    sidecar) is adopted before; the late object is kept."""
    legacy = [b for b in bundles if b.start < tracked and not _in_ledger(b, known)]
    straddling = max((b.start for b in legacy if b.start < position), default=None)
    to_read = []
    for bundle in bundles:
        changed = {
            f.key: known[f.key].changed(f.size, f.tag, f.mtime_ms)
            for f in bundle.objects
            if f.key in known and not known[f.key].is_object(f.size, f.tag, f.mtime_ms)
        }
        if changed or any(f.key in prefer for f in bundle.objects):
            plan.changed.update(changed)
            to_read.append(_without_late_sidecars(bundle, known, plan))
            continue
        if any(f.key in known and known[f.key].through_offset <= position for f in bundle.objects):
            plan.adopted_before.append(bundle.main.key)
            for f in bundle.objects:
                if f.key not in known:
                    plan.late[f.key] = "arrived after the records of its file were adopted without it; kept"
            continue
        if bundle in legacy and bundle.start != straddling:
            plan.adopted_before.append(bundle.main.key)  # adopted before the ledger kept identities
            continue
        to_read.append(bundle)
    return to_read


def _without_late_sidecars(bundle: Bundle, known: Mapping[str, Original], plan: AdoptionPlan) -> Bundle:
    """A bundle read again, less a `.headers` sidecar that came after its file was adopted (its
    headers cannot reach records already in the log: reported and kept, never recorded)."""
    if bundle.headers is None or bundle.headers.key in known or bundle.main.key not in known:
        return bundle
    plan.late[bundle.headers.key] = "arrived after the records of its file were adopted without it; kept"
    return replace(bundle, headers=None)


def _in_ledger(bundle: Bundle, known: Mapping[str, Original]) -> bool:
    return any(f.key in known for f in bundle.objects)


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


def record_offsets(files: Sequence[tuple[int, bool, int, int | None]], previous: int = -1) -> list[np.ndarray]:
    """The offsets of each file's records (int64 arrays), for files given as (start, is
    tombstones', record count, next start of its kind) in start order, after offset `previous`; a
    record a later file re-delivers gets -1 (the rules above). Files that neither overlap nor reach
    back to `previous` (what a sink writes, but for re-deliveries and tombstone folders) take their
    offsets a file at a time, the rest a record at a time."""
    kept = _kept(files)
    if _apart(files, kept, previous):
        return [_filled(start, kept[n], count) for n, (start, _, count, _) in enumerate(files)]
    places = _places(files, kept)
    merged = sorted((place, n, i) for n, file_places in enumerate(places) for i, place in enumerate(file_places))
    out = [np.full(count, -1, np.int64) for _, _, count, _ in files]
    for place, n, i in merged:
        previous = max(place, previous + 1)
        out[n][i] = previous
    return out


def _apart(files: Sequence[tuple[int, bool, int, int | None]], kept: Sequence[int], previous: int) -> bool:
    """Whether each file's kept records lie after `previous` and before the next file's start."""
    end = previous + 1
    for n, (start, _, _, _) in enumerate(files):
        if start < end:
            return False
        end = start + kept[n]
    return True


def _filled(start: int, kept: int, count: int) -> np.ndarray:
    """A file's offsets: start + i for its kept records, -1 for the rest (re-delivered later)."""
    out = np.full(count, -1, np.int64)
    out[:kept] = np.arange(start, start + kept, dtype=np.int64)
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
