"""A real Kafka Streams app (`java/StreamsApp.java`, kafka-streams from the broker jars) as a process by pid: the
member of a streams group (KIP-1071, `group.protocol=streams`) that vigil's census and group client must read.

Compiled and started as `java_consumer` does for the Java consumer (one JVM of 128 MB per app); its topology is
stateless (input → mapValues → output), so it runs without RocksDB. The test reads its KafkaStreams state changes
from the `vigil-java {json}` lines of its log.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from vigil_core.kafka.security import KafkaConnection, Protocol
from vigil_core.sidecar_contract import BEACON_ADDR_ENV
from vigil_dev.errors import DevError
from vigil_dev.testing.java_consumer import JavaApp, compiled, launch, lib_jar

SOURCE = Path(__file__).with_name("java") / "StreamsApp.java"

#: The test rules' client timings for Kafka Streams on the classic protocol (its consumers take them unprefixed).
#: Under `group.protocol=streams` the broker sets session and heartbeat (`group.streams.*`), as for KIP-848.
CLASSIC_DEFAULTS: Mapping[str, str] = {
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": "1000",
    "max.poll.interval.ms": "300000",
}
STREAMS_DEFAULTS: Mapping[str, str] = {"max.poll.interval.ms": "300000"}


@dataclass(frozen=True)
class StreamsApp(JavaApp):
    """A started StreamsApp (its application id is its group's id)."""

    application_id: str

    def wait_state(self, state: str, *, after: int = 0, timeout: float) -> int:
        """The index of the first event from `after` on that says KafkaStreams reached `state` (RUNNING,
        REBALANCING, ...); fails at once if the app reports an error instead (it shuts itself down then)."""
        index, event = self.wait_event(
            lambda e: e["event"] == "error" or (e["event"] == "state" and e["state"] in (state, "ERROR")),
            after=after, timeout=timeout, what=f"Kafka Streams app {self.application_id} {state}",
        )  # fmt: skip
        if event["event"] == "error" or event["state"] != state:
            raise AssertionError(f"Kafka Streams app {self.application_id} failed: {event} (log: {self.log})")
        return index


def start(
    libs: Path,
    connection: KafkaConnection,
    *,
    application_id: str,
    input_topic: str,
    output_topic: str,
    name: str,
    state_dir: Path,
    protocol: Literal["classic", "streams"],
    instance_id: str | None = None,
    beacon_addr: str | None = None,
    properties: Mapping[str, str] | None = None,
    log_level: str = "INFO",
) -> StreamsApp:
    """Compile if needed and start the app as `name` (its client.id, its files in `state_dir`); returns at once.
    With `beacon_addr` its main consumers are vigil's (`VigilClientSupplier`), finding their sidecar where the
    injection webhook says it is, `$VIGIL_BEACON_ADDR`. `properties` (StreamsConfig names) override the test
    defaults."""
    if connection.security_protocol is not Protocol.PLAINTEXT:
        raise DevError("the Kafka Streams test app speaks PLAINTEXT only")
    classes = compiled(SOURCE, [lib_jar(libs, "kafka-streams"), lib_jar(libs, "kafka-clients")])
    defaults = CLASSIC_DEFAULTS if protocol == "classic" else STREAMS_DEFAULTS
    args = [
        "--bootstrap", connection.bootstrap_servers, "--application-id", application_id, "--input", input_topic,
        "--output", output_topic, "--protocol", protocol, "--state-dir", str(state_dir / f"{name}-state"),
    ]  # fmt: skip
    if instance_id is not None:
        args += ["--instance-id", instance_id]
    env = {}
    if beacon_addr is not None:
        args.append("--vigil")
        env[BEACON_ADDR_ENV] = beacon_addr
    stall_file = state_dir / f"{name}.stall"
    stall_file.unlink(missing_ok=True)
    args += ["--stall-file", str(stall_file)]
    for key, value in {**defaults, "client.id": name, **(properties or {})}.items():
        args += ["--property", f"{key}={value}"]
    process, log = launch(name, classes, libs, SOURCE.stem, args, state_dir=state_dir, log_level=log_level, env=env)
    return StreamsApp(process, log, stall_file, application_id)
