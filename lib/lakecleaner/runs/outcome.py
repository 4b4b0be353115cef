"""What a run's summary (run.json) says of its outcome, as sentences and counts: pure functions
of the summary, read by the report task that fails the run (`orchestration/tasks.py`), the
run history (`runs/records.py`) and the lake-wide views, so that none of them imports another."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

#: The compaction and retention statuses of a partition that fail the run.
_FAILED_STATUSES = {"failed", "failed-quality", "uncleanable"}


def partitions_of(part: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """A step's report's partitions (none when the step did not run)."""
    return list((part or {}).get("partitions") or [])


def mirror_failures(report: Mapping[str, Any] | None) -> list[str]:
    """What went wrong in a mirror task, one sentence each: its error, or each partition that
    stopped and why."""
    if report is None:
        return []
    if report.get("error"):
        return [f"the mirror from Kafka failed: {report['error']}"]
    return [
        f"mirror of partition {p.get('partition')}: {p.get('error')}"
        for p in partitions_of(report)
        if p.get("status") == "failed"
    ]


def adopt_failures(report: Mapping[str, Any] | None) -> list[str]:
    """Each partition an adoption stopped, and why, one sentence each."""
    failed = (report or {}).get("failures") or {}
    return [f"adoption of partition {p}: {why}" for p, why in sorted(failed.items(), key=lambda item: int(item[0]))]


def failures(summary: Mapping[str, Any]) -> list[str]:
    """What went wrong in a run, one sentence each (empty when it succeeded)."""
    out = []
    for step in ("compaction", "retention"):
        for p in partitions_of(summary.get(step)):
            if p.get("status") in _FAILED_STATUSES:
                out.append(
                    f"{step} of partition {p.get('partition')}: {p.get('status')}: {p.get('error') or ''}".strip()
                )
    for p in partitions_of(summary.get("physical_deletion")):
        if p.get("error"):
            out.append(f"physical deletion of partition {p.get('partition')}: {p['error']}")
    if (summary.get("physical_deletion") or {}).get("blocked"):
        out.append(f"physical deletion: {summary['physical_deletion']['blocked']}")
    if summary.get("compaction_gate") and not summary.get("compaction"):
        out.append("the compaction job failed before writing its report; see the compact task's log")
    if summary.get("assess") is None:
        out.append("the assessment failed; see the assess task's log")
    if (summary.get("iceberg") or {}).get("error"):
        out.append(f"the Iceberg table could not be synced: {summary['iceberg']['error']}")
    if "mirror" in summary and summary["mirror"] is None:
        out.append("the mirror from Kafka failed; see the mirror task's log")
    out += mirror_failures(summary.get("mirror"))
    if "adopt" in summary and summary["adopt"] is None:
        out.append("the adoption of the Kafka Connect sink's files failed; see the adopt task's log")
    out += adopt_failures(summary.get("adopt"))
    for partition, reason in ((summary.get("assess") or {}).get("unreadable") or {}).items():
        out.append(f"{'partitions' if '..' in partition else 'partition'} {partition} could not be read: {reason}")
    return out


def skipped_uncleanable(summary: Mapping[str, Any]) -> list[str]:
    """The partitions the run did not compact because an earlier compaction of theirs failed
    (Kafka's uncleanable partitions), one sentence each. They do not fail the run again: the run
    where they failed did, and the uncleanable-partitions-count gauge keeps them visible."""
    marked = (summary.get("assess") or {}).get("uncleanable") or {}
    return [f"partition {partition} is skipped: {reason}" for partition, reason in marked.items()]


def changed_log(summary: Mapping[str, Any]) -> bool:
    """Whether the run committed anything: a roll, a compaction or a retention deletion."""
    assessment = summary.get("assess") or {}
    compacted = any(p.get("status") == "committed" for p in partitions_of(summary.get("compaction")))
    retained = any(p.get("status") == "committed" for p in partitions_of(summary.get("retention")))
    return bool(assessment.get("rolled")) or compacted or retained


#: Sentences of a kind (failures, skipped partitions) the report task logs and raises; run.json
#: holds every one.
SENTENCES_SHOWN = 20


def run_digest(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The run as the report task logs it and hands on (XCom), in a size that does not grow with
    the topic's partitions: each step's partitions counted by status, what retention and physical
    deletion removed, whether the log changed, the failures and the uncleanable partitions skipped
    (`SENTENCES_SHOWN` of each, and how many there are), and where run.json is, which holds the
    whole summary. At 1,000 partitions the summary is megabytes, and the report task printed it
    into its log and pushed it as its XCom on every run."""
    retention = summary.get("retention") or {}
    deletion = summary.get("physical_deletion") or {}
    assessment = summary.get("assess") or {}
    found, skipped = failures(summary), skipped_uncleanable(summary)
    return {
        "topic": summary.get("topic"),
        "run_id": summary.get("run_id"),
        "location": summary.get("location"),
        "changed_log": changed_log(summary),
        "partitions_selected": len(assessment.get("selected") or []),
        "partitions_rolled": len(assessment.get("rolled") or []),
        "compaction": statuses(summary.get("compaction")),
        "retention": {
            **statuses(retention),
            "segments_deleted": retention.get("segments_deleted", 0),
            "bytes_deleted": retention.get("bytes_deleted", 0),
        },
        "physical_deletion": {
            "files_deleted": deletion.get("files_deleted", 0),
            "partitions_failed": deletion.get("partitions_failed", 0),
        },
        "failure_count": len(found),
        "failures": found[:SENTENCES_SHOWN],
        "skipped_count": len(skipped),
        "skipped": skipped[:SENTENCES_SHOWN],
    }


def statuses(part: Mapping[str, Any] | None) -> dict[str, int]:
    """A step's partitions counted by status."""
    return dict(sorted(Counter(str(p.get("status")) for p in partitions_of(part)).items()))


def shown(sentences: Sequence[str], count: int, location: str | None) -> str:
    """The sentences a digest shows, and how many more run.json has."""
    more = f"; and {count - len(sentences)} more in {location}" if count > len(sentences) else ""
    return "; ".join(sentences) + more
