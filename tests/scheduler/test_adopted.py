"""Issue #49: a topic whose records Kafka Connect's S3 sink writes has a DAG that starts with
`adopt` under the real scheduler: the sink's files written since the last run are appended at
their offsets before the topic is assessed and compacted, and the run's summary carries what was
adopted. Issue #75: a file that does not parse fails the task (once: no retry) after the other
partitions were adopted, and the run's summary names the file and its line."""

from __future__ import annotations

from lakecleaner.io import open_store
from lakecleaner.runs.naming import report_run_id
from lakecleaner.runs.outcome import failures as summary_failures
from lakecleaner.runs.reports import load_report
from tests.scheduler.conftest import World
from tests.scheduler.topics import ADOPTED
from tests.support.connect_sink import SinkConfig, SinkRecord, write_sink

ORDER_SCHEMA = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}


def test_an_adopted_topics_run_adopts_the_sinks_new_files_first_and_compacts_them(world: World) -> None:
    spec = world.lake.config.topics[ADOPTED].adopt
    assert spec is not None
    records = [SinkRecord(0, o, f"k{o % 7}", {"id": o}) for o in range(300)]
    write_sink(
        open_store(spec.uri, world.lake.config.storage),
        "",
        ADOPTED,
        records,
        SinkConfig("parquet", ORDER_SCHEMA, flush_size=10),
    )

    run_id, states = world.run_now(ADOPTED)
    assert states["adopt"][0] == "success" and states["assess"][0] == "success"
    log = world.lake.topic(ADOPTED).partition(0)
    assert log.manifest().next_offset == 300  # every record, at its own offset
    rows = log.read().to_pylist()
    latest = {r["key"]: r["offset"] for r in rows}  # every key's latest record stays
    assert latest == {f"k{k}".encode(): max(o for o in range(300) if o % 7 == k) for k in range(7)}
    assert len(rows) < 300  # and compaction took superseded ones out
    summary = load_report(world.lake.store, ADOPTED, report_run_id(run_id), "run")
    assert summary["adopt"]["partitions"]["0"]["records"] == 300
    assert summary["compaction"] is not None  # the adopted records were compacted in the same run

    store = open_store(spec.uri, world.lake.config.storage)
    more = [SinkRecord(p, o, f"k{o % 7}", {"id": o}) for p in (0, 1) for o in range(300 if p == 0 else 0, 310)]
    write_sink(store, "", ADOPTED, more, SinkConfig("parquet", ORDER_SCHEMA, flush_size=10))
    store.write(f"partition=0/{ADOPTED}+0+0000000300.snappy.parquet", b"not parquet")
    failed_id, tries = world.run_failing(ADOPTED)
    assert tries["adopt"] == ("failed", 1) and tries["assess"][0] == "success"
    summary = load_report(world.lake.store, ADOPTED, report_run_id(failed_id), "run")
    assert summary["adopt"]["partitions"]["1"]["records"] == 310  # the other partition was adopted
    (failure,) = [f for f in summary_failures(summary) if f.startswith("adoption of partition 0")]
    assert f"partition=0/{ADOPTED}+0+0000000300.snappy.parquet is not readable as parquet" in failure
