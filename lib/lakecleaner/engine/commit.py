"""Committing a compaction (DESIGN section 3): one conditional manifest write per partition.

Output files are written straight under `segments/` with new, never-reused names
(`segment_files.new_segment_path`) — S3 has no rename, so the staged files ARE the final files.
Until the manifest references them they are orphans that no reader sees; a crashed or aborted
run leaves only such orphans, which the garbage collection of a later issue removes after
file.delete.delay.ms like any unreferenced file. (DESIGN section 2 names a `_staging/<run>/`
directory; nothing is written there, so "staged" below means "written, not yet referenced".)

The commit (`apply_compaction`, the `change` given to PartitionLog.commit) checks that every input
segment is still in the current manifest, unchanged, and that the log start has not moved;
otherwise another writer (a compaction, retention, a trim) got there first and the run aborts
(InputsChanged), discarding its files; when the manifest already references files the run wrote, a
`repair` took them in, and the run reports that (AdoptedByRepair) and deletes nothing. Segments
appended or rolled after U are kept as they are now (rebase). The input segments are replaced by
the output segments, the files that left the log go to pending_deletes with delete_after_ms = now +
file.delete.delay.ms, and the cleaner checkpoint becomes U (Kafka's `doneCleaning`), never moving
back.
"""

from __future__ import annotations

from collections.abc import Sequence

from lakecleaner.engine.inputs import CompactionInput
from lakecleaner.errors import ConcurrentModification
from lakecleaner.log.manifest import Manifest, Segment
from lakecleaner.log.partition import adopted_by_repair


class InputsChanged(ConcurrentModification):
    """Another writer replaced or deleted an input segment, or moved the log start."""


def apply_compaction(
    current: Manifest,
    plan: CompactionInput,
    outputs: Sequence[Segment],
    *,
    now_ms: int,
    delete_delay_ms: int,
    run_id: str,
) -> Manifest:
    """The manifest after replacing the plan's input segments by `outputs` (rebased on `current`).
    AdoptedByRepair when `current` already references a file this run wrote (a `repair` took it in:
    the run must report that, and delete nothing)."""
    inputs = plan.input_segments
    written = {f.path for s in outputs for f in s.files} - {f.path for s in inputs for f in s.files}
    if written & current.referenced_paths():
        raise adopted_by_repair(current)
    where = f"partition {current.topic}-{current.partition}"
    if current.log_start_offset != plan.manifest.log_start_offset:
        raise InputsChanged(
            f"{where}: the log start offset moved from {plan.manifest.log_start_offset} to "
            f"{current.log_start_offset} during the compaction; the run is aborted"
        )
    index = {s.id: i for i, s in enumerate(current.segments)}
    for segment in inputs:
        i = index.get(segment.id)
        if i is None or current.segments[i] != segment:
            change = "was replaced or deleted" if i is None else "was changed"
            raise InputsChanged(
                f"{where}: input segment {segment.id} [{segment.base_offset}, {segment.next_offset}) {change} "
                f"by another writer (manifest version {current.version}); the run is aborted"
            )
    first, last = index[inputs[0].id], index[inputs[-1].id]
    segments = (*current.segments[:first], *outputs, *current.segments[last + 1 :])
    kept = {path for s in outputs for f in s.files for path in f.paths()}
    removed = [path for s in inputs for f in s.files for path in f.paths() if path not in kept]
    u = plan.first_uncleanable_offset
    checkpoint = current.cleaner_checkpoint
    if checkpoint is None or not u <= checkpoint <= current.next_offset:
        checkpoint = u
    return current.next_version(
        now_ms,
        segments=segments,
        cleaner_checkpoint=checkpoint,
        pending_deletes=current.with_pending_deletes(removed, now_ms + delete_delay_ms, f"compacted by run {run_id}"),
    )
