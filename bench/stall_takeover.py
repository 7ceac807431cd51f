"""Stall → partitions consumed again by the rest of the group: vigil's sidecar vs the stock client, one run.

Every figure is measured on a fresh local broker in this run: a 3-member group, one member stops polling while its
client keeps heartbeating (the stalled-but-alive member), a batch is produced, and the clock runs until the two
others have consumed all of it. The stalled member is a Python app (librdkafka, vigil's helper) or a Java app
(kafka-clients, vigil's `VigilConsumer`, subscribed without a listener, which it then gives a no-op one, or with the
app's own `ConsumerRebalanceListener`; stock, the plain KafkaConsumer without a listener, which KIP-848 rejoins from
its background thread right after an eviction, JAVA.md), on the classic protocol or KIP-848 (Kafka 4.0+), dynamic or
static; the two others are Python members. Stock runs use a short `max.poll.interval.ms` so the
run stays short; the ratio to stock at Kafka's defaults (max.poll 300 s, session 45 s) is computed from the measured
rebalance time, and says so.

    .venv/bin/python bench/stall_takeover.py [--kafka-version 4.4.0] [--protocols classic,consumer]
        [--langs python,java,java-listener] [--stall 10] [--max-poll 20] [--static-session 20]
"""

import argparse
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from vigil_core.kafka.security import ClientConfig
from vigil_dev.kafka import cluster as kafka_cluster
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients, java_consumer
from vigil_dev.testing.sidecar import RunningSidecar, start_sidecar
from vigil_dev.testing.waiting import wait_for
from vigil_sidecar.client import Consumer as BeaconingConsumer

HEARTBEAT = 1.0
"""The members' heartbeat interval: set on classic clients; the dev broker's `group.consumer.heartbeat.interval.ms`."""
KIP848_SESSION = 10.0
"""The dev broker's `group.consumer.session.timeout.ms` (KIP-848 keeps the session on the broker)."""
DYNAMIC_SESSION = 6.0
CHECK = 1.0
KAFKA_DEFAULT_MAX_POLL = 300.0
KAFKA_DEFAULT_SESSION = 45.0
JAVA_APP_SINCE = (4, 1)
"""The Java test app closes with `CloseOptions` (KIP-1092, kafka-clients 4.1+); it runs on the broker's own jars."""


@dataclass(frozen=True)
class Case:
    """One stalled member: its group protocol, static or dynamic, and the language of its app."""

    protocol: str
    static: bool
    lang: str

    @property
    def label(self) -> str:
        return f"{self.protocol} {'static' if self.static else 'dynamic'} {self.lang}"


class Watched(Protocol):
    """The member that stalls."""

    def wait_assigned(self) -> None: ...

    def stall(self) -> None: ...

    def close(self) -> None: ...


@dataclass
class Bench:
    kafka: KafkaCluster
    state: Path
    stall: float
    max_poll: float
    static_session: float

    def session(self, case: Case) -> float:
        if case.protocol == "consumer":
            return KIP848_SESSION
        return self.static_session if case.static else DYNAMIC_SESSION

    def max_poll_for(self, case: Case) -> float:
        return max(self.max_poll, self.session(case))  # librdkafka: max.poll >= session

    def client_config(self, case: Case, pod: str) -> dict[str, str]:
        """The watched member's timings in Kafka's names (KIP-848: session and heartbeat are the broker's)."""
        conf = {"max.poll.interval.ms": str(int(self.max_poll_for(case) * 1000))}
        if case.protocol == "classic":
            conf |= {"session.timeout.ms": str(int(self.session(case) * 1000)),
                     "heartbeat.interval.ms": str(int(HEARTBEAT * 1000))}  # fmt: skip
        else:
            conf["group.protocol"] = "consumer"
        return conf | ({"group.instance.id": pod} if case.static else {})

    def sidecar(self, case: Case, group: str, pod: str) -> RunningSidecar:
        settings: dict[str, str | float] = {
            "stall_timeout_seconds": self.stall, "check_interval_seconds": CHECK, "events_topic": "",
            "session_timeout_seconds": self.session(case), "budget": "none", "group_protocol": case.protocol,
        }  # fmt: skip
        if case.static:
            settings["instance_id"] = pod
        return start_sidecar(self.kafka.connection(), group, pod, self.state, env=None, **settings)

    def takeover(self, case: Case, *, vigil: bool, graceful: bool = False) -> float:
        """Seconds from the stall (or graceful close) of one member until the others consumed a new batch."""
        conn = self.kafka.connection()
        topic = clients.create_topic(conn, clients.unique("bench"), partitions=3)
        group = clients.unique("g-bench")
        running = self.sidecar(case, group, "pod-a") if vigil else None
        watched = self._watched(case, group, topic, running)
        others = [
            clients.Member(conn, group, [topic], f"pod-{x}", extra=_python_config(self.client_config(case, f"pod-{x}")))
            for x in "bc"
        ]
        for member in others:
            member.start()
        try:
            wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 3, timeout=60,
                     what="3 members stable")  # fmt: skip
            watched.wait_assigned()
            if running is not None:
                wait_for(lambda: running.get("/v1/status")[1], lambda s: '"member": {' in s, timeout=30,
                         what="sidecar identified its member")  # fmt: skip
            started = time.monotonic()
            if graceful:
                watched.close()
            else:
                watched.stall()
            batch = {f"b{i}" for i in range(300)}
            clients.produce_spread(conn, topic, sorted(batch), partitions=3)
            wait_for(
                lambda: {v for m in others for _, _, v in m.consumed} & batch,
                lambda seen: seen == batch,
                timeout=self.max_poll_for(case) + self.session(case) + 60,
                what="the others consuming the whole batch",
                interval=0.05,
            )
            return time.monotonic() - started
        finally:
            watched.close()
            for member in others:
                member.close()
            if running is not None:
                running.stop()

    def _watched(self, case: Case, group: str, topic: str, running: RunningSidecar | None) -> Watched:
        conf = self.client_config(case, "pod-a")
        if case.lang.startswith("java"):
            state = self.state / clients.unique("java")
            state.mkdir()
            instance = conf.pop("group.instance.id", None)
            conf.pop("group.protocol", None)
            java = java_consumer.start(
                self.kafka.libs, self.kafka.connection(), group=group, topic=topic, client_id="pod-a",
                state_dir=state, protocol="consumer" if case.protocol == "consumer" else "classic",
                subscription="listener" if case.lang == "java-listener" else "topics",
                beacon_addr=running.beacon_addr if running else None, instance_id=instance, properties=conf,
            )  # fmt: skip
            return JavaWatched(java)
        member = clients.Member(self.kafka.connection(), group, [topic], "pod-a", extra=_python_config(conf))
        if running is not None:
            member.consumer_factory = lambda c: BeaconingConsumer(c, beacon_addr=running.beacon_addr)
        return PythonWatched(member.start())


@dataclass
class PythonWatched:
    member: clients.Member
    closed: bool = False

    def wait_assigned(self) -> None:
        wait_for(lambda: self.member.assigned, timeout=30, what="the watched member holding partitions")

    def stall(self) -> None:
        self.member.paused_polling.set()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.member.close()


@dataclass
class JavaWatched:
    java: java_consumer.JavaConsumer

    def wait_assigned(self) -> None:
        self.java.wait_event(lambda e: e["event"] == "group" and bool(e["member_id"]) and bool(e["assigned"]),
                             timeout=60, what="the Java member holding partitions")  # fmt: skip

    def stall(self) -> None:
        self.java.stall()

    def close(self) -> None:
        self.java.process.kill()


def _python_config(conf: dict[str, str]) -> ClientConfig:
    typed: dict[str, Any] = {k: int(v) if v.isdigit() else v for k, v in conf.items()}
    return typed


@dataclass(frozen=True)
class Row:
    case: Case
    vigil: float
    floor: float
    stock: float
    max_poll: float
    session: float
    default: float


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kafka-version", default=None, help="the broker (default: the dev stack's)")
    parser.add_argument(
        "--protocols", default=None, help="classic,consumer (default: both where the broker has KIP-848)"
    )
    parser.add_argument(
        "--langs",
        default="python,java,java-listener",
        help="the stalled app: python, java (subscribed without a listener), java-listener (with its own)",
    )
    parser.add_argument("--stall", type=float, default=10.0, help="vigil stall timeout, s")
    parser.add_argument("--max-poll", type=float, default=20.0, help="stock max.poll.interval.ms for the run, s")
    parser.add_argument("--static-session", type=float, default=20.0, help="session timeout of classic static members")
    args = parser.parse_args()
    state = Path(tempfile.mkdtemp(prefix="vigil-bench-"))
    kafka = kafka_cluster.create(state / "stack", version=args.kafka_version,
                                 progress=lambda line: print(f"# {line}", flush=True))  # fmt: skip
    version = tuple(int(x) for x in kafka.version.split(".")[:2])
    protocols = (args.protocols or ("classic,consumer" if version >= (4, 0) else "classic")).split(",")
    langs = args.langs.split(",")
    if version < JAVA_APP_SINCE and any(lang.startswith("java") for lang in langs):
        kafka.stop()
        shutil.rmtree(state, ignore_errors=True)
        raise SystemExit(f"--langs: the Java test app (StallingConsumer) needs kafka-clients 4.1+ (CloseOptions),"
                         f" and it runs on the broker's own, {kafka.version}: use --langs python")  # fmt: skip
    cases = [Case(p, static, lang) for p in protocols for lang in langs for static in (False, True)]
    bench = Bench(kafka, state, args.stall, args.max_poll, args.static_session)
    rows: list[Row] = []
    rejoins: dict[str, float] = {}
    try:
        for protocol in protocols:
            print(f"# measuring: {protocol} graceful leave (the rebalance floor) ...", flush=True)
            rejoins[protocol] = bench.takeover(Case(protocol, False, "python"), vigil=False, graceful=True)
        for case in cases:
            print(f"# measuring: {case.label} stall, vigil then stock ...", flush=True)
            vigil = bench.takeover(case, vigil=True)
            stock = bench.takeover(case, vigil=False)
            session = bench.session(case)
            floor = args.stall + HEARTBEAT + rejoins[case.protocol]
            default = KAFKA_DEFAULT_MAX_POLL + (KAFKA_DEFAULT_SESSION if case.static else 0.0) + rejoins[case.protocol]
            rows.append(Row(case, vigil, floor, stock, bench.max_poll_for(case), session, default))
            print(f"# {case.label}: vigil {vigil:.1f} s, stock {stock:.1f} s", flush=True)
    finally:
        kafka.stop()
        shutil.rmtree(state, ignore_errors=True)

    measured = ", ".join(f"{p} {r:.2f} s" for p, r in rejoins.items())
    print(f"\nKafka {kafka.version}; stall timeout {args.stall:.0f} s, heartbeat {HEARTBEAT:.0f} s; measured graceful"
          f" rebalance: {measured}\n")  # fmt: skip
    print(
        "| protocol | member | app | vigil takeover | floor | vigil / floor | stock takeover (max.poll, session) "
        "| vigil / stock | stock at Kafka defaults (est.) | vigil / default |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        kind = "static" if r.case.static else "dynamic"
        print(
            f"| {r.case.protocol} | {kind} | {r.case.lang} | {r.vigil:.1f} s | {r.floor:.1f} s"
            f" | {r.vigil / r.floor:.2f}× | {r.stock:.1f} s ({r.max_poll:.0f} s, {r.session:.0f} s)"
            f" | {r.vigil / r.stock:.2f}× | {r.default:.0f} s | {r.vigil / r.default:.3f}× |"
        )


if __name__ == "__main__":
    main()
