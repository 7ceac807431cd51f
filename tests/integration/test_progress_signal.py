"""The progress signal alone (no helper, no beacon) against the real broker: `ProgressSampler` + `progress_rules` +
the adapter driven directly with real time, one check per second. It finds a stalled member; it does not act on an
idle transactional topic (lag 1 from the commit marker), a paused partition, or an app that never commits."""

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from vigil_core.kafka.group_client import GroupClient
from vigil_core.kafka.model import TopicPartitionRef
from vigil_core.kafka.security import ClientConfig, KafkaConnection
from vigil_core.liveness import StallAction
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.waiting import bound, wait_for
from vigil_sidecar.signals.progress import ProgressSampler
from vigil_sidecar.signals.progress_adapter import AdapterState, NoCommits, ProgressOutput, adapt
from vigil_sidecar.watchdog.decide import decide
from vigil_sidecar.watchdog.progress_rules import MemberProgress, ProgressStatus
from vigil_sidecar.watchdog.state import (
    Action,
    Alert,
    AlertKind,
    Beacon,
    CoordinatorResult,
    Describe,
    DescribeResult,
    LookupCoordinator,
    Observation,
    Tick,
    WatchdogConfig,
    WatchdogState,
)

pytestmark = pytest.mark.integration

STALL = 6.0
CHECK = 1.0
STALLED = (ProgressStatus.STALL, ProgressStatus.STOP)
UNJUDGED = ("is_group_unsettled", "is_not_yet_judged")


@dataclass
class Watched:
    """One member watched as its sidecar would: sampler, adapter, and what each check said."""

    pod: str
    sampler: ProgressSampler
    adapter: AdapterState = field(default_factory=AdapterState)
    progress: MemberProgress | None = None
    outputs: list[ProgressOutput] = field(default_factory=list)
    history: list[ProgressStatus] = field(default_factory=list)


class Watcher:
    """The sidecar's check loop for several pods of one group, minus the process around it."""

    def __init__(self, conn: KafkaConnection, group: str, pods: list[str], client: GroupClient | None = None) -> None:
        self.client = client or GroupClient(conn)
        self.group = group
        self.pods = {pod: Watched(pod, ProgressSampler(self.client, conn, group, pod_name=pod)) for pod in pods}
        self.checks = 0

    def check(self) -> dict[str, MemberProgress | None]:
        """One check of every pod (a pod without a member in the view is skipped: None)."""
        view = self.client.describe(self.group)
        now = time.monotonic()
        out: dict[str, MemberProgress | None] = {}
        for pod, w in self.pods.items():
            member = next((m for m in view.members if m.client_id == pod), None)
            if member is None:
                out[pod] = None
                continue
            w.progress = w.sampler.check(view, member, now, stall_timeout=STALL)
            w.adapter, outputs = adapt(w.adapter, w.progress, member, now)
            w.outputs.extend(outputs)
            w.history.append(w.progress.status)
            out[pod] = w.progress
        self.checks += 1
        return out

    def watch(self, accept: Callable[[dict[str, MemberProgress | None]], bool], *, timeout: float, what: str) -> None:
        wait_for(self.check, accept, timeout=timeout, what=what, interval=CHECK)

    def close(self) -> None:
        for w in self.pods.values():
            w.sampler.close()
        self.client.close()


def judged_ok(progress: MemberProgress | None) -> bool:
    """OK with every partition judged on an observed commit (the stall rules apply from here on)."""
    return (
        progress is not None
        and progress.status is ProgressStatus.OK
        and all(rule not in UNJUDGED for _, _, rule in progress.partitions)
    )


class Traffic:
    """Keeps records arriving on every partition of a topic (10 per second each) until stopped."""

    def __init__(self, conn: KafkaConnection, topic: str, partitions: int) -> None:
        self._producer = Producer(conn.confluent_config() | clients.QUIET | {"linger.ms": 5})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(topic, partitions), daemon=True)
        self.sent = 0

    def __enter__(self) -> "Traffic":
        self._thread.start()
        return self

    def _run(self, topic: str, partitions: int) -> None:
        while not self._stop.wait(0.1):  # the production rate, not a wait for a condition
            for p in range(partitions):
                self._producer.produce(topic, value=f"r{self.sent}".encode(), partition=p)
                self.sent += 1
            self._producer.poll(0)
        self._producer.flush(10)

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=15)


@pytest.fixture
def conn(kafka: KafkaCluster) -> KafkaConnection:
    return kafka.connection()


@pytest.fixture
def closing() -> Iterator[list[Any]]:
    """Things with a `close()` to close after the test, last first."""
    things: list[Any] = []
    yield things
    for thing in reversed(things):
        thing.close()


# --- (a) a stalled member ----------------------------------------------------------------------------------------


def _drive(state: WatchdogState, observation: Observation, client: GroupClient, group: str) -> tuple[
    WatchdogState, list[Alert]
]:  # fmt: skip
    """Feed one observation to the unchanged watchdog, answering its requests with real ones; return its alerts."""
    alerts: list[Alert] = []
    pending: list[Observation] = [observation]
    while pending:
        state, actions = decide(state, pending.pop(), time.monotonic())
        for action in actions:
            pending.extend(_answer(action, client, group))
            if isinstance(action, Alert):
                alerts.append(action)
    return state, alerts


def _answer(action: Action, client: GroupClient, group: str) -> list[Observation]:
    if isinstance(action, LookupCoordinator):
        return [CoordinatorResult(client.coordinator(group))]
    if isinstance(action, Describe):
        return [DescribeResult(client.describe(group))]
    return []


def test_a_stalled_member_is_found_and_alerted_on_the_others_stay_ok(conn: KafkaConnection, closing: list[Any]) -> None:
    topic = clients.create_topic(conn, clients.unique("prog-stall"), partitions=3)
    group = clients.unique("g-prog-stall")
    members = clients.start_group(conn, group, [topic], size=3)
    closing.extend(members)
    watcher = Watcher(conn, group, [m.client_id for m in members])
    closing.append(watcher)
    victim, others = members[0], members[1:]
    config = WatchdogConfig(victim.client_id, stall_timeout=STALL, check_interval=CHECK, cooldown=60.0,
                            session_timeout=6.0, action=StallAction.ALERT)  # fmt: skip
    watchdog = WatchdogState.initial(config)
    alerts: list[tuple[float, Alert]] = []

    def check_and_drive() -> dict[str, MemberProgress | None]:
        nonlocal watchdog
        seen = len(watcher.pods[victim.client_id].outputs)
        result = watcher.check()
        for output in [*watcher.pods[victim.client_id].outputs[seen:], Tick()]:
            if isinstance(output, Beacon | Tick):
                watchdog, said = _drive(watchdog, output, watcher.client, group)
                alerts.extend((time.monotonic(), a) for a in said)
        return result

    with Traffic(conn, topic, 3):
        wait_for(check_and_drive, lambda r: all(judged_ok(p) for p in r.values()), timeout=bound(STALL + 10),
                 what="every member judged OK on observed commits", interval=CHECK)  # fmt: skip
        assert len(victim.assigned) == 1  # range, 3 partitions, 3 members
        victim.paused_polling.set()  # no poll, while librdkafka keeps heartbeating: alive to the coordinator
        stalled_at = time.monotonic()
        before = len(watcher.pods[victim.client_id].history)

        def victim_status() -> ProgressStatus | None:
            progress = check_and_drive()[victim.client_id]
            return None if progress is None else progress.status

        wait_for(victim_status, lambda s: s in STALLED, timeout=bound(STALL + CHECK), what="the victim's STALL",
                 interval=CHECK)  # fmt: skip
        found = time.monotonic() - stalled_at
        progress = watcher.pods[victim.client_id].progress
        assert progress is not None
        assert progress.stalled_partitions == (TopicPartitionRef(topic, victim.assigned[0][1]),)
        assert found >= STALL - CHECK, f"a STALL only {found:.1f}s after the last poll"
        # the unchanged watchdog, fed only the adapter's beacons, says so one of its stall timeouts later
        wait_for(lambda: (check_and_drive(), [a for _, a in alerts if a.kind is AlertKind.STALL])[1],
                 timeout=bound(STALL + CHECK), what="the watchdog's stall alert", interval=CHECK)  # fmt: skip
        alerted = next(at for at, a in alerts if a.kind is AlertKind.STALL) - stalled_at
    for other in others:
        statuses = watcher.pods[other.client_id].history[before:]
        assert statuses, other.client_id
        assert all(s is ProgressStatus.OK for s in statuses), (other.client_id, statuses)
    assert STALLED[0] not in watcher.pods[victim.client_id].history[:before]
    assert alerted >= 2 * STALL - 2 * CHECK, f"alerted {alerted:.1f}s after the stall"
    print(f"STALL found {found:.1f}s, watchdog alert {alerted:.1f}s after the victim stopped polling")


# --- (b) an idle transactional topic -------------------------------------------------------------------------


@dataclass
class AdminStats:
    """librdkafka's own count of the requests an AdminClient sent, per request type (statistics JSON)."""

    latest: dict[str, int] = field(default_factory=dict)
    updates: int = 0

    def __call__(self, raw: str) -> None:
        counts: dict[str, int] = {}
        for broker in json.loads(raw)["brokers"].values():
            for name, n in broker.get("req", {}).items():
                counts[name] = counts.get(name, 0) + n
        self.latest, self.updates = counts, self.updates + 1

    def snapshot(self, admin: AdminClient) -> dict[str, int]:
        seen = self.updates
        wait_for(lambda: (admin.poll(0.1), self.updates)[1], lambda n: n >= seen + 2, timeout=10, what="fresh stats")
        return {k: v for k, v in self.latest.items() if v}


class RecordCommitter:
    """An app committing `record.offset() + 1` after each record (the common Java pattern). librdkafka's own
    commits (auto or `commit()`) already skip a trailing marker; this one leaves the marker's lag of 1."""

    def __init__(self, conf: ClientConfig) -> None:
        self._consumer = Consumer(conf)

    def poll(self, timeout: float) -> Any:
        msg = self._consumer.poll(timeout)
        if msg is not None and msg.error() is None:
            topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
            assert topic is not None
            assert partition is not None
            assert offset is not None
            done = TopicPartition(topic, partition, offset + 1)
            self._consumer.commit(offsets=[done], asynchronous=False)
        return msg

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


def test_an_idle_transactional_topic_is_never_a_stall(conn: KafkaConnection, closing: list[Any]) -> None:
    topic = clients.create_topic(conn, clients.unique("prog-tx"), partitions=1)
    group = clients.unique("g-prog-tx")
    extra: ClientConfig = {"isolation.level": "read_committed", "enable.auto.commit": False}
    member = clients.Member(conn, group, [topic], "tx-app", extra=extra, consumer_factory=RecordCommitter).start()
    closing.append(member)
    wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 1, timeout=60, what="the app Stable")
    # the AdminClient counts its own requests (statistics), to measure what one check costs the broker
    stats = AdminStats()
    client = GroupClient(conn, client_id="vigil-measured")
    measured: dict[str, Any] = {"statistics.interval.ms": 100, "stats_cb": stats, "log_level": 3}
    admin = AdminClient(conn.confluent_config() | measured)
    client._admin = admin  # noqa: SLF001 - the same requests, counted
    watcher = Watcher(conn, group, ["tx-app"], client)
    closing.append(watcher)
    part = TopicPartitionRef(topic, 0)
    watcher.check()  # watching from before the app's commits, so a commit is seen moving
    producer = Producer(conn.confluent_config() | {"transactional.id": clients.unique("tx"), "log_level": 3})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=f"tx{i}".encode(), partition=0)
    producer.commit_transaction(30)
    wait_for(lambda: len(member.consumed), lambda n: n == 5, timeout=30, what="the app consuming the 5 records")

    def last_sample() -> tuple[int | None, int, bool | None]:
        watcher.check()
        sampler = watcher.pods["tx-app"].sampler
        s = sampler._histories[part][-1]  # noqa: SLF001 - what the rules were given
        return s.committed, s.lso, s.data

    committed, lso, data = wait_for(last_sample, lambda s: s[0] is not None and s[0] >= 5, timeout=30,
                                    what="the app's commit seen", interval=CHECK)  # fmt: skip
    watched = watcher.pods["tx-app"]
    # librdkafka commits the offset after its last record: the commit marker stays behind it, a lag of 1
    assert (committed, lso, data) == (5, 6, False), (committed, lso, data)
    start, before, checks_before = time.monotonic(), stats.snapshot(admin), watcher.checks
    probes = 0
    while time.monotonic() - start < 2 * STALL:  # a steady state, judged every check for two stall timeouts
        progress = watcher.check()["tx-app"]
        probes += watched.sampler.last_requests.probes
        assert progress is not None
        assert progress.status not in STALLED
        time.sleep(CHECK)  # the check interval, not a wait for a condition
    after, checks = stats.snapshot(admin), watcher.checks - checks_before
    assert progress is not None
    assert progress.partitions == ((part, ProgressStatus.OK, "has_no_data_waiting"),)
    assert all(isinstance(o, Beacon) for o in watched.outputs)
    assert probes == 0  # the probe's answer is cached while the committed offset and the LSO stand still
    per_check = {k: (after.get(k, 0) - before.get(k, 0)) / checks for k in after}
    per_check = {k: round(v, 2) for k, v in per_check.items() if v}
    print(f"steady state, 1 assigned partition, {checks} checks: admin requests per check {per_check}")
    counted = watched.sampler.last_requests
    assert (counted.offset_fetch, counted.list_offsets, counted.probes) == (1, 1, 0)
    # librdkafka's statistics count ListOffsets and the describe (ConsumerGroupDescribe, then DescribeGroups for a
    # classic group), not the admin OffsetFetch; no FindCoordinator or Metadata in a steady state
    assert per_check.get("ListOffsets") == 1.0, per_check
    assert per_check.get("DescribeGroups") == 1.0, per_check
    assert "FindCoordinator" not in per_check, per_check
    assert "Metadata" not in per_check, per_check


# --- (c) a paused partition ----------------------------------------------------------------------------------


class PausingConsumer:
    """A confluent-kafka Consumer that pauses partition 0 from inside poll(), i.e. in the member's own thread."""

    def __init__(self, conf: ClientConfig) -> None:
        self._consumer = Consumer(conf)
        self.pause_partition_0 = threading.Event()
        self.paused: list[int] = []

    def poll(self, timeout: float) -> Any:
        if self.pause_partition_0.is_set() and not self.paused:
            held = [tp for tp in self._consumer.assignment() if tp.partition == 0]
            if held:
                self._consumer.pause(held)
                self.paused = [tp.partition for tp in held]
        return self._consumer.poll(timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


def test_a_paused_partition_is_not_a_stall(conn: KafkaConnection, closing: list[Any]) -> None:
    topic = clients.create_topic(conn, clients.unique("prog-pause"), partitions=2)
    group = clients.unique("g-prog-pause")
    member = clients.Member(conn, group, [topic], "pause-app", consumer_factory=PausingConsumer).start()
    closing.append(member)
    wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 1, timeout=60, what="the app Stable")
    watcher = Watcher(conn, group, ["pause-app"])
    closing.append(watcher)
    with Traffic(conn, topic, 2):
        watcher.watch(lambda r: judged_ok(r["pause-app"]), timeout=bound(STALL + 10), what="the app judged OK")
        member.consumer.pause_partition_0.set()
        wait_for(lambda: member.consumer.paused, timeout=10, what="partition 0 paused by the app")
        paused_at = time.monotonic()
        while time.monotonic() - paused_at < 2 * STALL:
            progress = watcher.check()["pause-app"]
            assert progress is not None
            assert progress.status not in STALLED, progress
            time.sleep(CHECK)  # the check interval, not a wait for a condition
    held = TopicPartitionRef(topic, 0)
    assert progress is not None
    assert dict((tp, (status, rule)) for tp, status, rule in progress.partitions)[held] == (
        ProgressStatus.OK,
        "is_paused",
    )
    last = watcher.pods["pause-app"].sampler._histories[held][-1]  # noqa: SLF001
    assert last.lag > 0  # data really waits on it
    assert last.data is True
    assert all(isinstance(o, Beacon) for o in watcher.pods["pause-app"].outputs)


# --- (d) an app that never commits ---------------------------------------------------------------------------


def test_an_app_that_never_commits_is_a_finding_not_a_stall(conn: KafkaConnection, closing: list[Any]) -> None:
    topic = clients.create_topic(conn, clients.unique("prog-nocommit"), partitions=1)
    group = clients.unique("g-prog-nocommit")
    member = clients.Member(conn, group, [topic], "lazy-app", extra={"enable.auto.commit": False}).start()
    closing.append(member)
    wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 1, timeout=60, what="the app Stable")
    watcher = Watcher(conn, group, ["lazy-app"])
    closing.append(watcher)
    watched = watcher.pods["lazy-app"]
    with Traffic(conn, topic, 1):
        started = time.monotonic()
        watcher.watch(lambda r: r["lazy-app"] is not None and r["lazy-app"].status is ProgressStatus.NO_COMMITS,
                      timeout=bound(3 * STALL + CHECK), what="the NO_COMMITS finding")  # fmt: skip
        took = time.monotonic() - started
        for _ in range(3):  # and it stays a finding: no second one, beacons go on
            watcher.check()
            time.sleep(CHECK)  # the check interval, not a wait for a condition
    assert len(member.consumed) > 0  # the app does consume
    assert took >= 3 * STALL
    assert not any(s in STALLED for s in watched.history)
    findings = [o for o in watched.outputs if isinstance(o, NoCommits)]
    assert findings == [NoCommits(findings[0].member_id, (TopicPartitionRef(topic, 0),))]
    beacons = [o for o in watched.outputs if isinstance(o, Beacon)]
    assert len(beacons) == watcher.checks  # never silent: the watchdog never sees a stall
