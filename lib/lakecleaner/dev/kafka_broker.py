"""A real one-node Apache Kafka broker (KRaft) on 127.0.0.1, for trying `lakecleaner mirror`
(`lakecleaner dev kafka`, `make kafka`) and for the end-to-end Kafka tests.

Its jars come from Maven Central (org.apache.kafka:kafka_2.13 and its runtime dependencies,
`dev.maven`); the broker is formatted once with `kafka.tools.StorageTool` (a folder formatted before
is started again as it is, with its topics and groups) and run with `kafka.Kafka` as broker and
controller. Its own cleaner runs every half second, so a compacted topic gets gaps in its offsets
within seconds, as a long-lived topic has. Needs Java 17 and, the first time, Maven.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from lakecleaner.dev.maven import DevToolMissing, fetched_jars
from lakecleaner.dev.ports import free_port

KAFKA_VERSION = "4.1.1"
#: The broker and its runtime dependencies; log4j's SLF4J binding keeps its logging in one place.
ARTIFACTS = (f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}", "org.apache.logging.log4j:log4j-slf4j2-impl:2.24.3")
#: The JVMs of a broker for development: C1 only, and (the broker) the serial collector on a small
#: heap. A one-node broker serving a developer's or a test's few thousand records never pays back
#: C2's compiles: measured, 7.7 -> 4.9 CPU-seconds to format and start, 4.9 -> 3.4 to restart.
JAVA_OPTIONS = ("-XX:TieredStopAtLevel=1",)
BROKER_JAVA_OPTIONS = (*JAVA_OPTIONS, "-XX:+UseSerialGC", "-Xmx512m")


def broker_jars() -> Path:
    """The folder of the broker's jars, fetched with Maven the first time."""
    return fetched_jars(f"kafka-{KAFKA_VERSION}", ARTIFACTS)


@dataclass(frozen=True)
class SaslUser:
    """The one user of a SASL_PLAINTEXT listener (SASL/PLAIN)."""

    name: str
    password: str


def _properties(folder: Path, port: int, controller: int, sasl: tuple[int, SaslUser] | None) -> str:
    """server.properties of a one-node KRaft broker on 127.0.0.1 (and a SASL/PLAIN listener)."""
    listeners = [f"PLAINTEXT://127.0.0.1:{port}"]
    protocols = "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    lines = []
    if sasl is not None:
        sasl_port, user = sasl
        listeners.append(f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}")
        protocols += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
        lines += [
            "sasl.enabled.mechanisms=PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config="
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'user_{user.name}="{user.password}";',
        ]
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{controller}",
            f"listeners={','.join(listeners)},CONTROLLER://127.0.0.1:{controller}",
            f"advertised.listeners={','.join(listeners)}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            f"listener.security.protocol.map={protocols}",
            *lines,
            f"log.dirs={folder / 'data'}",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=1",
            "group.initial.rebalance.delay.ms=0",
            "log.cleaner.backoff.ms=500",
            "auto.create.topics.enable=false",
            # a broker killed (`stop(crash=True)`) registers again once its lease ends
            "broker.session.timeout.ms=2000",
            "broker.heartbeat.interval.ms=500",
        ]
    )


class KafkaBroker:
    """A running one-node broker; `bootstrap` is its PLAINTEXT listener (on `port`, else a free
    one), and with `sasl` a SASL_PLAINTEXT one at `sasl_bootstrap` that takes that user."""

    def __init__(
        self, folder: Path, *, port: int | None = None, controller_port: int | None = None, sasl: SaslUser | None = None
    ) -> None:
        if shutil.which("java") is None:
            raise DevToolMissing("a Kafka broker needs Java 17 (java on the PATH): install a JDK and try again")
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        lib = broker_jars()
        port = port or free_port()
        sasl_port = free_port() if sasl is not None else None
        self.bootstrap = f"127.0.0.1:{port}"
        self.sasl_bootstrap = f"127.0.0.1:{sasl_port}" if sasl_port is not None else None
        properties = folder / "server.properties"
        sasl_listener = None if sasl is None or sasl_port is None else (sasl_port, sasl)
        properties.write_text(_properties(folder, port, controller_port or free_port(), sasl_listener) + "\n")
        self._classpath = f"{lib}/*"
        if not (folder / "data" / "meta.properties").exists():
            self._format(properties)
        self._command = ["java", *BROKER_JAVA_OPTIONS, "-cp", self._classpath, "kafka.Kafka", str(properties)]
        self.start()

    def _format(self, properties: Path) -> None:
        """Format the broker's log folder for a new cluster (KRaft's storage format)."""

        def tool(*args: str) -> str:
            done = subprocess.run(
                ["java", *JAVA_OPTIONS, "-cp", self._classpath, "kafka.tools.StorageTool", *args],
                capture_output=True,
                text=True,
                timeout=120,
            )
            if done.returncode != 0:
                raise DevToolMissing(f"Kafka's StorageTool {args[0]} failed: {(done.stdout + done.stderr)[-2000:]}")
            return done.stdout

        cluster_id = tool("random-uuid").split()[-1]
        tool("format", "-t", cluster_id, "-c", str(properties))

    def start(self, timeout_s: float = 90) -> None:
        """Run the broker and wait until it answers; after `stop`, on the same ports and log (a
        restart as clients see one: connections refused, then the same records at the same offsets)."""
        self._log = (self.folder / "broker.log").open("a")
        self.process = subprocess.Popen(self._command, stdout=self._log, stderr=subprocess.STDOUT)
        self._wait_until_ready(timeout_s)

    def _wait_until_ready(self, timeout_s: float) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self._log.close()
                log = (self.folder / "broker.log").read_text()[-3000:]
                raise DevToolMissing(f"the Kafka broker exited (is {self.bootstrap} taken?): {log}")
            try:
                admin.list_topics(timeout=2)
                return
            except Exception:  # not answering yet
                time.sleep(0.5)
        self.stop(crash=True)
        raise TimeoutError(f"the Kafka broker at {self.bootstrap} did not answer within {timeout_s} s")

    def stop(self, crash: bool = False) -> None:
        """Stop the broker: gracefully (SIGTERM; it serves fetches for seconds while it shuts
        down) or, with `crash`, at once (SIGKILL), as a machine lost for good."""
        if crash:
            self.process.kill()
        else:
            self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        self._log.close()


__all__ = ["ARTIFACTS", "KAFKA_VERSION", "KafkaBroker", "SaslUser", "broker_jars"]
