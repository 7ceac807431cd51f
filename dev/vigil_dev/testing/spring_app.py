"""A real Spring Kafka listener app (`java/SpringListenerApp.java`: a `KafkaMessageListenerContainer` whose consumers
are vigil's, through the consumer factory JAVA.md gives Spring users) as a process by pid.

Spring Kafka's jars (`java/spring-kafka/pom.xml`, kafka-clients left out) are resolved by Maven into the cache once;
the app runs on the broker's own kafka-clients. Compiled and started as `java_consumer` does for the Java consumer.
Its listener is stuck in processing a record while the app's stall file exists.
"""

from collections.abc import Callable, Mapping
from pathlib import Path

from vigil_core.kafka.security import KafkaConnection, Protocol
from vigil_core.sidecar_contract import BEACON_ADDR_ENV
from vigil_dev.errors import DevError
from vigil_dev.kafka.install import resolve_jars
from vigil_dev.testing.java_consumer import CLASSIC_DEFAULTS, JavaApp, compiled, launch, lib_jar

SOURCE = Path(__file__).with_name("java") / "SpringListenerApp.java"
POM = Path(__file__).with_name("java") / "spring-kafka" / "pom.xml"


def spring_libs(progress: Callable[[str], None] = print) -> Path:
    """Spring Kafka's runtime jars (without kafka-clients), resolved once."""
    return resolve_jars(POM, "Spring Kafka's jars", "spring-kafka", {}, progress)


def start(
    libs: Path,
    connection: KafkaConnection,
    *,
    group: str,
    topic: str,
    client_id: str,
    state_dir: Path,
    beacon_addr: str,
    properties: Mapping[str, str] | None = None,
    log_level: str = "INFO",
) -> JavaApp:
    """Compile if needed and start the app as `client_id` on the classic protocol with the test rules' timings
    (`properties` override them), its consumers beaconing to `beacon_addr`; returns at once."""
    if connection.security_protocol is not Protocol.PLAINTEXT:
        raise DevError("the Spring Kafka test app speaks PLAINTEXT only")
    spring = spring_libs()
    classes = compiled(SOURCE, [lib_jar(libs, "kafka-clients"), *sorted(spring.glob("*.jar"))])
    stall_file = state_dir / f"spring-{client_id}.stall"
    stall_file.unlink(missing_ok=True)
    args = ["--bootstrap", connection.bootstrap_servers, "--topic", topic, "--group", group, "--client-id", client_id,
            "--stall-file", str(stall_file)]  # fmt: skip
    for key, value in {**CLASSIC_DEFAULTS, **(properties or {})}.items():
        args += ["--property", f"{key}={value}"]
    process, log = launch(
        f"spring-{client_id}", classes, libs, SOURCE.stem, args, state_dir=state_dir, log_level=log_level,
        env={BEACON_ADDR_ENV: beacon_addr}, more_libs=[spring],
    )  # fmt: skip
    return JavaApp(process, log, stall_file)


if __name__ == "__main__":
    import sys

    try:
        print(f"spring-kafka: {spring_libs()}")
    except DevError as exc:
        print(f"vigil setup: {exc}", file=sys.stderr)
        sys.exit(1)
