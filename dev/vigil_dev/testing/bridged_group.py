"""The heartbeat bridge's test harness: a static group of an in-process static member (joined first: the leader) and
the static app (`vigil_testapps.static_app`, or with `java=True` vigil's Java `VigilConsumer` in
`java_consumer`'s StallingConsumer: a real process, killable) next to its own sidecar (a real process),
with a test's sidecar settings over the defaults below. The `bridged_groups` fixture makes them for a test and
closes them after it (a pytest plugin of tests/conftest.py)."""

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from confluent_kafka import KafkaException

from vigil_core.kafka.security import KafkaConnection
from vigil_dev import procs
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients, java_consumer, static_app
from vigil_dev.testing.broker_log import generations
from vigil_dev.testing.sidecar import RunningSidecar, start_sidecar
from vigil_dev.testing.waiting import bound, wait_for

SESSION = 6.0
"""The members' and the bridged member's session timeout (s)."""
HEARTBEAT = 1.0
"""The members' and the bridge's heartbeat interval (s)."""

SIDECAR_DEFAULTS: dict[str, str | float] = {
    "bridge_enabled": "true",
    "budget": "none",
    "session_timeout_seconds": SESSION,
    "heartbeat_interval_seconds": HEARTBEAT,
    "stall_timeout_seconds": 8,
    "check_interval_seconds": 1,
    "events_topic": "",
}
"""The sidecar's settings unless a test says otherwise: bridging on, no eviction budget, no events."""


def bridging_sidecar(
    connection: KafkaConnection, group: str, pod: str, state_dir: Path, **settings: str | float
) -> RunningSidecar:
    """A sidecar of `pod` as a real process, `settings` over `SIDECAR_DEFAULTS` (bridging on)."""
    return start_sidecar(connection, group, pod, state_dir, env=None, **(SIDECAR_DEFAULTS | settings))


def bridge(sidecar: RunningSidecar) -> dict[str, Any]:
    """The sidecar's /v1/status `bridge` (the running one, else the last that ended), {} when none."""
    return dict(sidecar.status().get("bridge") or {})


class BridgedGroup:
    """One static group named after `name`: the other member `<name>-other`, the app `<name>-app` in pod `pod-<name>`
    (its sidecar's instance id), on a topic of 3 partitions (`replication` replicas); files under `tmp/<name>`."""

    def __init__(
        self,
        kafka: KafkaCluster,
        tmp: Path,
        name: str,
        *,
        replication: int = 1,
        app: Literal["python", "java"] = "python",
        **sidecar_settings: str | float,
    ) -> None:
        self.kafka = kafka
        self.conn: KafkaConnection = kafka.connection()
        self.tmp = tmp / name
        self.tmp.mkdir()
        self.topic = clients.create_topic(self.conn, clients.unique(f"bridge-{name}"), 3, replication)
        self.group = clients.unique(f"g-bridge-{name}")
        self.instance = f"{name}-app"
        settings = {"instance_id": self.instance} | sidecar_settings
        self.sidecar = bridging_sidecar(self.conn, self.group, f"pod-{name}", self.tmp, **settings)
        self.members: list[clients.Member] = []
        self.other = self.member(f"{name}-other")
        self.max_poll_ms: int | None = None
        """The app's max.poll.interval.ms at its next start (None: the app's default)."""
        self.app: procs.Managed | None = None
        self.app_kind = app
        self.java: java_consumer.JavaConsumer | None = None
        """The Java app, when `app` is java (its `process` is `self.app`)."""

    def member(self, instance: str) -> clients.Member:
        """One more in-process static member (`instance` its instance and client id), started; closed with the group."""
        started = clients.Member(
            self.conn, self.group, [self.topic], instance, extra={"group.instance.id": instance}
        ).start()
        self.members.append(started)
        return started

    def start_app(self) -> None:
        """The app as a real process, beaconing to the sidecar (again after a kill: the same log, appended)."""
        if self.app_kind == "java":
            properties = {
                "session.timeout.ms": str(int(SESSION * 1000)),
                "heartbeat.interval.ms": str(int(HEARTBEAT * 1000)),
            }
            if self.max_poll_ms is not None:
                properties["max.poll.interval.ms"] = str(self.max_poll_ms)
            self.java = java_consumer.start(
                self.kafka.libs, self.conn, group=self.group, topic=self.topic, client_id=self.instance,
                state_dir=self.tmp, protocol="classic", beacon_addr=self.sidecar.beacon_addr,
                instance_id=self.instance, properties=properties,
            )  # fmt: skip
            self.app = self.java.process
            return
        self.app = static_app.start(
            self.conn, self.group, self.topic, self.instance, self.tmp,
            beacon_addr=self.sidecar.beacon_addr, max_poll_interval_ms=self.max_poll_ms,
        )  # fmt: skip

    def app_log(self) -> str:
        path = static_app.log_path(self.tmp, self.instance)
        return path.read_text() if path.exists() else ""

    def app_generation(self) -> int:
        """The generation the app itself last reported with an assignment (its log), -1 before it has one."""
        if self.java is not None:
            held = [e for e in self.java.events() if e["event"] == "group" and e["assigned"] and e["member_id"]]
            return int(held[-1]["generation"]) if held else -1
        found = re.findall(r"generation=(-?\d+) assigned=[1-9]", self.app_log())
        return int(found[-1]) if found else -1

    def by_instance(self) -> dict[str | None, str]:
        """Instance id → member id, as DescribeGroups has them now."""
        return {m.group_instance_id: m.member_id for m in clients.describe_group(self.conn, self.group).members}

    def app_member(self) -> str | None:
        """The app's member id now (None while its instance id holds none)."""
        return self.by_instance().get(self.instance)

    def stable(self) -> int:
        """The number of members while the group is Stable, else -1 (`clients.stable_members`)."""
        return clients.stable_members(self.conn, self.group)

    def stable_instances(self) -> set[str | None]:
        """The members' instance ids while the group is Stable with every member assigned, else an empty set."""
        try:
            desc = clients.describe_group(self.conn, self.group)  # one view: the state and the members together
        except KafkaException:
            return set()
        if str(desc.state).split(".")[-1].upper() != "STABLE":
            return set()
        if any(not m.assignment.topic_partitions for m in desc.members):
            return set()
        return {m.group_instance_id for m in desc.members}

    def coordinator(self) -> int | None:
        """The node that answers DescribeGroups for the group now (None while none does)."""
        try:
            return clients.describe_group(self.conn, self.group).coordinator.id
        except KafkaException:
            return None

    def joined(self) -> tuple[int, str]:
        """The other member first, then the app; both Stable, the sidecar holding the app's connection and proving
        its member, the app reporting the group's generation (from the broker's log). Returns (that generation, the
        app's member id)."""
        wait_for(self.stable, lambda n: n == 1, timeout=60, what=f"{self.group}: the other member Stable alone")
        self.start_app()
        wait_for(self.stable, lambda n: n == 2, timeout=60, what=f"{self.group}: 2 static members Stable")
        member = self.by_instance()[self.instance]
        wait_for(
            self.sidecar.status,
            lambda s: (s.get("member") or {}).get("member_id") == member and s["app"]["helper_connections"] == 1,
            timeout=30,
            what=f"{self.group}: the sidecar holding the app's connection and proving its member {member}",
        )
        _, generation = wait_for(
            lambda: (self.app_generation(), max(generations(self.kafka, self.group), default=-2)),
            lambda seen: seen[0] == seen[1],
            timeout=10,
            what=f"{self.group}: the app reporting the group's generation (app, broker)",
        )
        return generation, member

    def kill_app_and_await_bridge(self, member: str) -> None:
        """SIGKILL the app (its helper's connection closes: the sidecar's proof) and wait for the bridge's first
        heartbeat on behalf of `member`."""
        assert self.app is not None
        self.app.kill()
        running = wait_for(lambda: bridge(self.sidecar), lambda b: b.get("heartbeats_sent", 0) >= 1,
                           timeout=bound(HEARTBEAT), what=f"{self.group}: the bridge heartbeating")  # fmt: skip
        assert running["state"] == "running", running
        assert running["member_id"] == member, running
        assert self.sidecar.metric('vigil_sidecar_bridges_started_total{proof="helper-connection-closed"}') == 1

    def close(self) -> None:
        if self.app is not None:
            self.app.stop(grace=5)
        for member in self.members:
            member.close()
        self.sidecar.stop()


@pytest.fixture
def bridged_groups(tmp_path: Path) -> Iterator[Callable[..., BridgedGroup]]:
    """`make(kafka, name, **settings)` → a `BridgedGroup` of the test's, closed after it (in the order made)."""
    made: list[BridgedGroup] = []

    def make(kafka: KafkaCluster, name: str, **settings: Any) -> BridgedGroup:
        group = BridgedGroup(kafka, tmp_path, name, **settings)
        made.append(group)
        return group

    yield make
    for group in made:
        group.close()
