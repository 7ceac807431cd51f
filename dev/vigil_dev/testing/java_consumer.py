"""A real Java consumer (`java/StallingConsumer.java`, kafka-clients from the broker jars) as a process by pid.

The source is compiled once with javac into `<cache>/java/<hash>/` — keyed by the source and the kafka-clients jar,
so an upgrade of either recompiles — and started with `java -Xmx128m -cp <classes>:<libs>/*`. The test reads the
app's `vigil-java {json}` lines from its log and stalls it (no poll, its client threads still running) by creating
a file.
"""

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from vigil_core.kafka.security import KafkaConnection, Protocol
from vigil_dev import paths, procs
from vigil_dev.errors import DevError
from vigil_dev.testing.waiting import wait_for

SOURCE = Path(__file__).with_name("java") / "StallingConsumer.java"
MAIN_CLASS = "StallingConsumer"
EVENT_PREFIX = "vigil-java "

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


def clients_jar(libs: Path) -> Path:
    """The kafka-clients jar among the broker's libs (exactly one)."""
    jars = sorted(libs.glob("kafka-clients-*.jar"))
    if len(jars) != 1:
        raise DevError(f"expected one kafka-clients jar in {libs}, found {[j.name for j in jars]}")
    return jars[0]


def compiled(libs: Path) -> Path:
    """The directory holding StallingConsumer's classes, compiled now if this source and jar never were."""
    jar = clients_jar(libs)
    key = hashlib.sha256(SOURCE.read_bytes() + b"\0" + jar.name.encode() + b"\0" + jar.read_bytes()).hexdigest()
    target = paths.cache_dir() / "java" / key[:16]
    if (target / f"{MAIN_CLASS}.class").exists():
        return target
    javac = shutil.which("javac")
    if javac is None:
        raise DevError("cannot compile the Java test consumer: javac not found (a JDK >= 17 is needed)")
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".javac-", dir=target.parent))
    try:
        done = subprocess.run(
            [javac, "-Xlint:all", "-Werror", "-cp", str(jar), "-d", str(scratch), str(SOURCE)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise DevError(f"javac {SOURCE.name} failed: {(done.stderr or done.stdout).strip()[:2000]}")
        try:
            scratch.rename(target)  # atomic: a concurrent compile of the same key may have won; both are equal
        except OSError:
            if not (target / f"{MAIN_CLASS}.class").exists():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


@dataclass(frozen=True)
class JavaConsumer:
    """A started StallingConsumer: its process, its log (stdout and the client's log4j output) and stall file."""

    process: procs.Managed
    log: Path
    stall_file: Path

    def events(self) -> list[dict[str, Any]]:
        """Every `vigil-java` event line so far, in order."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return [json.loads(line[len(EVENT_PREFIX) :]) for line in text.splitlines() if line.startswith(EVENT_PREFIX)]

    def last(self, kind: str) -> dict[str, Any] | None:
        found = [e for e in self.events() if e["event"] == kind]
        return found[-1] if found else None

    def wait_event(
        self, accept: Callable[[dict[str, Any]], bool], *, after: int = 0, timeout: float, what: str
    ) -> tuple[int, dict[str, Any]]:
        """The first event from index `after` on that `accept` takes, as (index, event)."""

        def probe() -> tuple[int, dict[str, Any]] | None:
            if self.process.exited():
                raise AssertionError(f"the Java consumer exited (log: {self.log})")
            return next(((i, e) for i, e in enumerate(self.events()) if i >= after and accept(e)), None)

        found = wait_for(probe, lambda x: x is not None, timeout=timeout, what=f"{what} (log: {self.log})")
        assert found is not None
        return found

    def stall(self) -> None:
        """Stop calling poll() (no call on the consumer at all); the client's own threads keep running."""
        self.stall_file.touch()

    def resume(self) -> None:
        self.stall_file.unlink(missing_ok=True)

    def stop(self) -> None:
        """SIGTERM: the shutdown hook wakes the consumer up and closes it (a LeaveGroup)."""
        self.process.stop(grace=15)


def start(
    libs: Path,
    connection: KafkaConnection,
    *,
    group: str,
    topic: str,
    client_id: str,
    state_dir: Path,
    protocol: Literal["classic", "consumer"],
    listener: bool,
    beacon_addr: str | None,
    instance_id: str | None = None,
    properties: Mapping[str, str] | None = None,
    log_level: str = "INFO",
) -> JavaConsumer:
    """Compile if needed and start the consumer (`properties` override the test defaults); returns at once. The
    client logs at `log_level` into the same log: the artifact that says what it did after an eviction."""
    if connection.security_protocol is not Protocol.PLAINTEXT:
        raise DevError("the Java test consumer speaks PLAINTEXT only")
    classes = compiled(libs)
    defaults = CLASSIC_DEFAULTS if protocol == "classic" else KIP848_DEFAULTS
    argv = [
        "java", "-Xmx128m", f"-Dorg.apache.logging.log4j.level={log_level}",  # log4j2's default configuration
        "-cp", f"{classes}{os.pathsep}{libs}/*", MAIN_CLASS,
        "--bootstrap", connection.bootstrap_servers, "--topic", topic, "--group", group,
        "--client-id", client_id, "--protocol", protocol,
    ]  # fmt: skip
    if instance_id is not None:
        argv += ["--instance-id", instance_id]
    if listener:
        argv.append("--listener")
    if beacon_addr is not None:
        argv += ["--beacon", beacon_addr]
    stall_file = state_dir / f"java-{client_id}.stall"
    stall_file.unlink(missing_ok=True)
    argv += ["--stall-file", str(stall_file)]
    for key, value in {**defaults, **(properties or {})}.items():
        argv += ["--property", f"{key}={value}"]
    marker_key, marker_value = "VIGIL_TEST_JAVA_CONSUMER", str(state_dir / f"java-{client_id}")
    java_home = os.environ.get("JAVA_HOME")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), marker_key: marker_value}
    if java_home:
        env["JAVA_HOME"] = java_home
    log = state_dir / f"java-{client_id}.log"
    process = procs.start(
        f"java-{client_id}",
        argv,
        pid_file=state_dir / f"java-{client_id}.pid",
        marker=f"{marker_key}={marker_value}",
        log_file=log,
        env=env,
    )
    return JavaConsumer(process, log, stall_file)
