"""`lakecleaner dev kafka`: a real Kafka broker with a sample topic, to try the mirror on (issue 78)."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from types import FrameType

import click

from lakecleaner.cli.base import Context, cli, pass_ctx
from lakecleaner.cli.output import console, err_console


@cli.group()
def dev() -> None:
    """What to run beside lakecleaner to try it."""


@dev.command()
@click.option("--port", type=click.IntRange(1, 65535), default=9092, show_default=True, help="The broker's port.")
@click.option(
    "--controller-port", type=click.IntRange(1, 65535), help="The KRaft controller's port (default: a free one)."
)
@click.option(
    "--folder",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".kafka"),
    show_default=True,
    help="The broker's data and log, and the config it writes; started again on it, it keeps its topics.",
)
@click.option("--topic", default="customers", show_default=True, help="The sample topic's name.")
@click.option("--records", type=click.IntRange(min=1), default=10_000, show_default=True, help="Records it holds.")
@pass_ctx
def kafka(ctx: Context, port: int, controller_port: int | None, folder: Path, topic: str, records: int) -> None:
    """Run Apache Kafka (one KRaft node on 127.0.0.1, the version the tests use, fetched from Maven
    Central the first time: needs Java 17 and Maven) with a sample CDC topic and a consumer group
    that has read half of it; write FOLDER/lakecleaner.yaml, a lake that mirrors it, print how to
    try it, and serve until Ctrl-C or SIGTERM."""
    from lakecleaner.dev.kafka_broker import KAFKA_VERSION, KafkaBroker
    from lakecleaner.dev.kafka_sample import SampleTopic, ensure_sample, mirror_config, write_mirror_config

    folder = folder.resolve()
    sample = SampleTopic(name=topic, records=records)
    err_console.print(f"starting Kafka {KAFKA_VERSION} on 127.0.0.1:{port} (its data and log in {folder}) ...")
    broker = KafkaBroker(folder, port=port, controller_port=controller_port)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        state = ensure_sample(broker.bootstrap, sample)
        config_path = folder / "lakecleaner.yaml"
        text = write_mirror_config(config_path, mirror_config(broker.bootstrap, sample, f"file://{folder / 'lake'}"))
        tries = [
            f"lakecleaner --config {config_path} mirror --topic {topic} --once --batch-bytes 16384",
            f"lakecleaner --config {config_path} plan --topic {topic}",
            f"lakecleaner --config {config_path} compact --topic {topic}",
        ]
        facts = {
            "bootstrap": broker.bootstrap,
            "kafka_version": KAFKA_VERSION,
            "topic": topic,
            "records": state.records,
            "end_offsets": state.end_offsets,
            "group": sample.group,
            "committed": state.committed,
            "config": str(config_path),
            "try": tries,
        }

        def human() -> None:
            made = "created" if state.created else "found (from an earlier start)"
            console.print(f"Kafka {KAFKA_VERSION} at {broker.bootstrap}", markup=False, highlight=False)
            console.print(
                f"topic {topic} {made}: {state.records:,} records in {len(state.end_offsets)} partitions; "
                f"group {sample.group} committed {sum(state.committed.values()):,} of them",
                markup=False,
                highlight=False,
            )
            console.print(f"a lake that mirrors it, in {config_path}:", markup=False, highlight=False)
            for line in text.splitlines():
                console.print(f"  {line}", markup=False, highlight=False)
            console.print("try:", markup=False)
            for line in tries:
                console.print(f"  {line}", markup=False, highlight=False)
            console.print("Ctrl-C stops the broker (its folder keeps the topic for the next start).", markup=False)

        ctx.emit(facts, human)
        sys.stdout.flush()  # a parent reading the lines sees them while the broker serves
        stop.wait()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        broker.stop()
        err_console.print("Kafka stopped")
