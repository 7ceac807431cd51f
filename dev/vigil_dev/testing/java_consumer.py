"""A real Java consumer (`java/StallingConsumer.java`, kafka-clients from the broker jars) as a process by pid, and
what every Java test app shares (`streams_app` starts the Kafka Streams one).

A source is compiled once with javac into `<cache>/java/<hash>/` — keyed by the source and the jars it compiles
against, so an upgrade of either recompiles — and started with `java -Xmx128m -cp <classes>:<libs>/*`. The test
reads the app's `vigil-java {json}` lines from its log; it stalls the consumer (no poll, its client threads still
running) by creating a file.
"""

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from vigil_core.kafka.security import KafkaConnection, Protocol
from vigil_dev import paths, procs
from vigil_dev.errors import DevError
from vigil_dev.testing.waiting import wait_for

SOURCE = Path(__file__).with_name("java") / "StallingConsumer.java"
SHARED = SOURCE.with_name("Events.java")
"""What the test apps share (their event lines, their stall): compiled with each."""
LIBRARY = Path(__file__).parents[3] / "java" / "src" / "main" / "java"
"""vigil's Java library (`java/`, built by Maven as dev.vigil:vigil-kafka-clients): the test apps compile against
its sources, so what they run is the library as it is in this checkout."""
EVENT_PREFIX = "vigil-java "
Subscription = Literal["topics", "listener", "broker-regex"]
"""How the test app subscribes: subscribe(topics), which VigilConsumer gives a no-op listener; with the app's own
listener; subscribe(SubscriptionPattern) with none (KIP-848 only; the one subscription VigilConsumer cannot wrap)."""

#: The test rules' client timings, in Java's names (`clients.CONSUMER_DEFAULTS`); KIP-848 keeps session,
#: heartbeat and assignor on the broker and kafka-clients refuses them with `group.protocol=consumer`.
CLASSIC_DEFAULTS: Mapping[str, str] = {
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": "1000",
    "max.poll.interval.ms": "300000",
    "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RangeAssignor",
    "enable.auto.commit": "true",
    "auto.commit.interval.ms": "500",
}
KIP848_DEFAULTS: Mapping[str, str] = {
    "max.poll.interval.ms": "300000",
    "enable.auto.commit": "true",
    "auto.commit.interval.ms": "500",
}


def lib_jar(libs: Path, artifact: str) -> Path:
    """The jar of `artifact` (`kafka-clients`, `kafka-streams`) among the broker's libs (exactly one)."""
    jars = sorted(j for j in libs.glob(f"{artifact}-*.jar") if j.name[len(artifact) + 1].isdigit())
    if len(jars) != 1:
        raise DevError(f"expected one {artifact} jar in {libs}, found {[j.name for j in jars]}")
    return jars[0]


def compiled(source: Path, classpath: Sequence[Path]) -> Path:
    """The directory holding the classes of `source` (its main class named as the file) and of the library classes
    and `Events` it uses, compiled against `classpath` now if these sources and jars never were."""
    main_class = f"{source.stem}.class"
    key = hashlib.sha256(source.read_bytes() + b"\0" + SHARED.read_bytes())
    for library_source in sorted(LIBRARY.rglob("*.java")):
        key.update(b"\0" + str(library_source.relative_to(LIBRARY)).encode() + b"\0" + library_source.read_bytes())
    for jar in classpath:
        key.update(b"\0" + jar.name.encode() + b"\0" + jar.read_bytes())
    target = paths.cache_dir() / "java" / key.hexdigest()[:16]
    if (target / main_class).exists():
        return target
    javac = shutil.which("javac")
    if javac is None:
        raise DevError(f"cannot compile the Java test app {source.name}: javac not found (a JDK >= 17 is needed)")
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".javac-", dir=target.parent))
    try:
        cp = os.pathsep.join(map(str, classpath))
        sources = os.pathsep.join([str(LIBRARY), str(SHARED.parent)])
        done = subprocess.run(
            [javac, "-Xlint:all", "-Werror", "-cp", cp, "-sourcepath", sources, "-d", str(scratch), str(source)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise DevError(f"javac {source.name} failed: {(done.stderr or done.stdout).strip()[:2000]}")
        try:
            scratch.rename(target)  # atomic: a concurrent compile of the same key may have won; both are equal
        except OSError:
            if not (target / main_class).exists():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def launch(
    name: str,
    classes: Path,
    libs: Path,
    main_class: str,
    args: Sequence[str],
    *,
    state_dir: Path,
    log_level: str,
    env: Mapping[str, str] | None = None,
    more_libs: Sequence[Path] = (),
) -> tuple[procs.Managed, Path]:
    """Start `main_class` (128 MB of heap: the machine has 2 cores and a broker) as `name` with its pid file and log
    (stdout and the client's log4j2 output at `log_level`) in `state_dir`, `env` added to its environment, the jars
    of `libs` and `more_libs` on its classpath; returns (process, log) at once."""
    classpath = os.pathsep.join([str(classes), *(f"{d}/*" for d in (libs, *more_libs))])
    argv = [
        "java", "-Xmx128m", f"-Dorg.apache.logging.log4j.level={log_level}",  # log4j2's default configuration
        "-cp", classpath, main_class, *args,
    ]  # fmt: skip
    marker_key, marker_value = "VIGIL_TEST_JAVA_APP", str(state_dir / name)
    java_home = os.environ.get("JAVA_HOME")
    environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **(env or {}), marker_key: marker_value}
    if java_home:
        environment["JAVA_HOME"] = java_home
    log = state_dir / f"{name}.log"
    process = procs.start(
        name, argv, pid_file=state_dir / f"{name}.pid", marker=f"{marker_key}={marker_value}", log_file=log,
        env=environment,
    )  # fmt: skip
    return process, log


@dataclass(frozen=True)
class JavaApp:
    """A started Java test app: its process, its log (stdout and the client's log4j output) and the file that stalls
    it (its polling thread stops polling while the file exists; the client's own threads keep running)."""

    process: procs.Managed
    log: Path
    stall_file: Path

    def stall(self) -> None:
        self.stall_file.touch()

    def resume(self) -> None:
        self.stall_file.unlink(missing_ok=True)

    def events(self) -> list[dict[str, Any]]:
        """Every `vigil-java` event line so far, in order."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return [json.loads(line[len(EVENT_PREFIX) :]) for line in text.splitlines() if line.startswith(EVENT_PREFIX)]

    def last(self, kind: str) -> dict[str, Any] | None:
        found = [e for e in self.events() if e["event"] == kind]
        return found[-1] if found else None

    def holding(self) -> dict[str, Any] | None:
        """The app's last group event if it shows a member holding partitions (an event may show partitions before
        the member id: not yet), else None."""
        event = self.last("group")
        return event if event and event["member_id"] and event["assigned"] else None

    def wait_event(
        self, accept: Callable[[dict[str, Any]], bool], *, after: int = 0, timeout: float, what: str
    ) -> tuple[int, dict[str, Any]]:
        """The first event from index `after` on that `accept` takes, as (index, event)."""

        def probe() -> tuple[int, dict[str, Any]] | None:
            if self.process.exited():
                raise AssertionError(f"the Java app exited (log: {self.log})")
            return next(((i, e) for i, e in enumerate(self.events()) if i >= after and accept(e)), None)

        found = wait_for(probe, lambda x: x is not None, timeout=timeout, what=f"{what} (log: {self.log})")
        assert found is not None
        return found

    def stop(self) -> None:
        """SIGTERM: the app's shutdown hook closes its client (a dynamic member leaves the group, a static one for
        now)."""
        self.process.stop(grace=15)


@dataclass(frozen=True)
class JavaConsumer(JavaApp):
    """A started StallingConsumer: stalled, it makes no call on the consumer at all."""


def start(
    libs: Path,
    connection: KafkaConnection,
    *,
    group: str,
    topic: str,
    client_id: str,
    state_dir: Path,
    protocol: Literal["classic", "consumer"],
    beacon_addr: str | None,
    subscription: Subscription = "topics",
    instance_id: str | None = None,
    properties: Mapping[str, str] | None = None,
    log_level: str = "INFO",
) -> JavaConsumer:
    """Compile if needed and start the consumer (`properties` override the test defaults); returns at once. The
    client logs at `log_level` into the same log: the artifact that says what it did after an eviction."""
    if connection.security_protocol is not Protocol.PLAINTEXT:
        raise DevError("the Java test consumer speaks PLAINTEXT only")
    classes = compiled(SOURCE, [lib_jar(libs, "kafka-clients")])
    defaults = CLASSIC_DEFAULTS if protocol == "classic" else KIP848_DEFAULTS
    args = ["--bootstrap", connection.bootstrap_servers, "--topic", topic, "--group", group,
            "--client-id", client_id, "--protocol", protocol]  # fmt: skip
    if instance_id is not None:
        args += ["--instance-id", instance_id]
    args += ["--subscription", subscription]
    if beacon_addr is not None:
        args += ["--beacon", beacon_addr]
    stall_file = state_dir / f"java-{client_id}.stall"
    stall_file.unlink(missing_ok=True)
    args += ["--stall-file", str(stall_file)]
    for key, value in {**defaults, **(properties or {})}.items():
        args += ["--property", f"{key}={value}"]
    process, log = launch(
        f"java-{client_id}", classes, libs, SOURCE.stem, args, state_dir=state_dir, log_level=log_level
    )
    return JavaConsumer(process, log, stall_file)
