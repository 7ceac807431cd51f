"""Operator at scale: N ConsumerGroups over N real groups — status convergence, footprint, requests per round.

A private stack (one KRaft node, the real control plane) under `--state-dir`. This process hosts `--live` real
confluent-kafka consumers, each the single member of its own group, all polled by one thread; the other groups
are real groups with committed offsets and no member (made with the admin API, as a consumer that committed and
left leaves them). N ConsumerGroup CRs name them; then a real `vigil operator` (no webhook, no events topic: only
the resync's own requests reach the broker) starts, and the run measures, against the apiserver polled once a
second (every N/2000 s past 2,000):

- first convergence: operator launch → every status as it should be (live: Stable, memberCount 1, Ready True;
  empty: Empty);
- steady rounds: per resync round, from its first group's resync until every group was resynced (each group's
  `vigil_operator_consumergroup_last_resync_timestamp_seconds` on the operator's /metrics, read once a second), the
  spread of those times within the round, and the status writes it made (none while nothing changes);
- the operator's RSS and CPU (from /proc of its process) over whole resync periods;
- broker requests per group resync, from the operator's own counters (its liveness probe) and, as a cross-
  check, from the broker's request metrics (JMX, enabled in the running broker with `jcmd`);
- the stock comparison in the same run: Kafka's `kafka-consumer-groups --describe --all-groups`, once.

    .venv/bin/python bench/operator_scale.py [--groups 200] [--live N] [--resync-seconds 30] [--rounds 3]
"""

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from vigil_core.kafka.security import ClientConfig, KafkaConnection
from vigil_dev import ports, procs
from vigil_dev.kafka import cluster as kafka_cluster
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.kube import controlplane
from vigil_dev.testing import clients
from vigil_dev.testing.operator import RunningOperator, start_operator
from vigil_dev.testing.waiting import wait_for
from vigil_operator import crd
from vigil_operator.domain import injection

G, V, PLURAL = "vigil.dev", "v1alpha1", "consumergroups"
ROOT = Path(__file__).resolve().parents[1]
TOOL_JVM = ["-Xms64m", "-Xmx256m", "-XX:+UseSerialGC"]
GROUP_TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
#: The request types a resync can cause (the consumers send none of them at steady state but Metadata).
OPERATOR_APIS = ("ListGroups", "DescribeGroups", "ConsumerGroupDescribe", "OffsetFetch", "ListOffsets",
                 "FindCoordinator", "Metadata", "DescribeCluster", "DescribeConfigs")  # fmt: skip
SCRAPE_SECONDS = 15.0
"""How often the operator's /metrics is read: half the chart's PodMonitor interval (30 s). Each read renders five series
per group (at 10,000 groups, once a second would make the bench the operator's biggest load); the resync times it
carries are exact whenever it is read, and a 30 s resync is seen every round."""
#: Light members: heartbeat 1 s, session 10 s, no statistics, long fetch waits (the topic is idle).
MEMBER_CONF: ClientConfig = (
    clients.CONSUMER_DEFAULTS
    | clients.QUIET
    | {
        "session.timeout.ms": 10000,
        "heartbeat.interval.ms": 1000,
        "statistics.interval.ms": 0,
        "fetch.wait.max.ms": 5000,
        "auto.commit.interval.ms": 5000,
    }
)


def say(line: str) -> None:
    print(f"# {line}", flush=True)


# -- the consumers ------------------------------------------------------------------------------------------------


@dataclass
class Fleet:
    """N consumers, each alone in its own group, polled round-robin by one thread (poll(0) every 100 ms)."""

    conn: KafkaConnection
    topic: str
    groups: list[str]
    consumers: list[Any] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> "Fleet":
        self._thread = threading.Thread(target=self._run, name="fleet-poll", daemon=True)
        self._thread.start()
        for i, group in enumerate(self.groups):
            conf = self.conn.confluent_config() | MEMBER_CONF | {"group.id": group, "client.id": f"{group}-m0"}
            consumer = Consumer(conf)
            consumer.subscribe([self.topic])
            with self._lock:
                self.consumers.append(consumer)
            if (i + 1) % 50 == 0 or i + 1 == len(self.groups):
                say(f"consumers: {i + 1}/{len(self.groups)} started")
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                current = list(self.consumers)
            for consumer in current:
                consumer.poll(0)
            self._stop.wait(0.1)

    def leave(self, group: str) -> None:
        """The group's one member leaves: its consumer closes (LeaveGroup), out of the poll loop first."""
        with self._lock:
            consumer = self.consumers.pop(self.groups.index(group))
            self.groups.remove(group)
        consumer.close()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with ThreadPoolExecutor(max_workers=16) as pool:  # LeaveGroup each; close() releases the GIL
            list(pool.map(lambda c: c.close(), self.consumers))
        self.consumers.clear()


def stable_groups(admin: Any, groups: list[str]) -> int:
    """How many of `groups` are Stable with their one member assigned something."""
    futures = admin.describe_consumer_groups(groups, request_timeout=20)
    count = 0
    for future in futures.values():
        try:
            desc = future.result(30)
        except KafkaException:
            continue
        state = str(desc.state).split(".")[-1].upper()
        if state == "STABLE" and len(desc.members) == 1 and desc.members[0].assignment.topic_partitions:
            count += 1
    return count


# -- the broker's request counters (JMX via jcmd + JmxTool): a cross-check of the operator's own count -----------


@dataclass
class BrokerRequests:
    kafka: KafkaCluster
    port: int = 0
    error: str = ""

    def enable(self) -> bool:
        pid = self.kafka.process(1).pid()
        self.port = ports.free_ports(1)[0]
        opts = [f"jmxremote.port={self.port}", f"jmxremote.rmi.port={self.port}", "jmxremote.authenticate=false",
                "jmxremote.ssl=false", "jmxremote.host=127.0.0.1"]  # fmt: skip
        done = subprocess.run(["jcmd", str(pid), "ManagementAgent.start", *opts], capture_output=True, text=True,
                              check=False, timeout=60)  # fmt: skip
        if done.returncode != 0 or "exception" in done.stdout.lower():
            self.error = f"jcmd ManagementAgent.start failed: {(done.stdout + done.stderr).strip()[:200]}"
            return False
        return True

    def counts(self) -> dict[str, int]:
        """Requests handled since the broker started, per API, for the APIs a resync sends."""
        argv = ["java", *TOOL_JVM, "-cp", f"{self.kafka.libs}/*", "org.apache.kafka.tools.JmxTool",
                "--jmx-url", f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{self.port}/jmxrmi",
                "--object-name", "kafka.network:type=RequestMetrics,name=RequestsPerSec,*",
                "--attributes", "Count", "--one-time", "true", "--report-format", "properties"]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
        out: dict[str, int] = {}
        for match in re.finditer(r"request=(\w+),version=\d+:Count=([0-9.]+)", done.stdout):
            out[match.group(1)] = out.get(match.group(1), 0) + int(float(match.group(2)))
        if not out:
            self.error = f"JmxTool printed no request counts: {(done.stdout + done.stderr).strip()[:300]}"
        return out


# -- the operator side -------------------------------------------------------------------------------------------


def probe(running: RunningOperator) -> dict[str, Any]:
    url = f"http://127.0.0.1:{running.liveness_port}/healthz"
    with urllib.request.urlopen(url, timeout=5) as response:
        data: dict[str, Any] = json.loads(response.read())
        return data


def consumer_group(name: str, group: str, bootstrap: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{G}/{V}",
        "kind": "ConsumerGroup",
        "metadata": {"name": name},
        "spec": {
            "groupId": group,
            "kafka": {"bootstrapServers": bootstrap},
            "workload": {"kind": "StatefulSet", "name": name},
            "liveness": {"stallTimeoutSeconds": 30},
        },
    }


def ready(status: dict[str, Any], *, live: bool) -> bool:
    """As the operator should show it: a live group Stable with its member and Ready, an empty one Empty."""
    if not live:
        return status.get("state") == "Empty" and status.get("memberCount") == 0
    conds = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    return status.get("state") == "Stable" and status.get("memberCount") == 1 and conds.get("Ready") == "True"


def resync_times(running: RunningOperator) -> dict[str, float]:
    """ConsumerGroup name → the time of its last resync, from the operator's /metrics ({} while it does not answer)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{running.metrics_port}/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return {}
    return {
        s.labels["consumergroup"]: float(s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == RESYNCED
    }


RESYNCED = "vigil_operator_consumergroup_last_resync_timestamp_seconds"
STATUS_WRITES = "vigil_operator_status_writes_total"


@dataclass
class Round:
    index: int
    start: float
    """The earliest resync time of the round (the operator's /metrics)."""
    all_current: float
    """max − min resync time across the N groups: the last status was current this long after the round began (a
    group's resync time is set once its status is written)."""


ROUND_GAP = 5.0
"""Seconds without a resync that end a round (a round's resyncs end one after the other; rounds are a resync period
apart)."""


@dataclass
class Watch:
    """What the poll saw: per CR, every resync time (/metrics); how many statuses were Stable and Ready (the list of
    the N CRs). Rounds are told apart by time, not by counting each CR's resyncs: a CR resynced twice between two reads
    of /metrics (the 10,000-group first round takes minutes, and the next begins as it ends) shows one, and a resync
    asked for between rounds (a pod's event) is one more."""

    names: list[str]
    live: set[str] = field(default_factory=set)
    """The CRs whose group has a live member (the others: committed offsets, no member)."""
    times: dict[str, set[float]] = field(default_factory=dict)
    ready: int = 0

    def see(self, items: list[dict[str, Any]], resynced: dict[str, float]) -> None:
        self.ready = sum(ready(item.get("status") or {}, live=item["metadata"]["name"] in self.live) for item in items)
        for name, synced in resynced.items():
            self.times.setdefault(name, set()).add(synced)

    def _rounds(self) -> list[tuple[float, float, int]]:
        """(first resync, last resync, CRs resynced) of each round: resyncs no more than ROUND_GAP apart, of at least
        half the CRs (a lone resync asked for between rounds is none)."""
        stamps = sorted((t, name) for name, ts in self.times.items() for t in ts)
        runs: list[list[tuple[float, str]]] = []
        for t, name in stamps:
            if not runs or t - runs[-1][-1][0] > ROUND_GAP:
                runs.append([])
            runs[-1].append((t, name))
        found = [(run[0][0], run[-1][0], len({name for _, name in run})) for run in runs]
        return [r for r in found if r[2] >= len(self.names) / 2]

    def round(self, k: int) -> Round | None:
        """Round k, once every CR was resynced in it."""
        rounds = self._rounds()
        if k >= len(rounds) or rounds[k][2] < len(self.names):
            return None
        first, last, _ = rounds[k]
        return Round(k, first, last - first)

    def started(self, k: int) -> float | None:
        """When round k began (its earliest resync time), once it has."""
        rounds = self._rounds()
        return rounds[k][0] if k < len(rounds) else None

    def complete(self) -> int | None:
        """The last round every CR was resynced in (None: none yet)."""
        done = [k for k, (_, _, crs) in enumerate(self._rounds()) if crs >= len(self.names)]
        return done[-1] if done else None


# -- the stock tool ------------------------------------------------------------------------------------------------


def stock_describe(kafka: KafkaCluster, groups: list[str]) -> tuple[float, float, int]:
    """Wall time of `kafka-consumer-groups --describe --all-groups` once, of its JVM start alone (`--version`),
    and how many of our groups its output names."""
    base = ["java", *TOOL_JVM, "-cp", f"{kafka.libs}/*", GROUP_TOOL]
    started = time.monotonic()
    subprocess.run([*base, "--version"], capture_output=True, text=True, check=False, timeout=120)
    jvm = time.monotonic() - started
    started = time.monotonic()
    done = subprocess.run([*base, "--bootstrap-server", kafka.bootstrap, "--describe", "--all-groups"],
                          capture_output=True, text=True, check=False, timeout=600)  # fmt: skip
    wall = time.monotonic() - started
    if done.returncode != 0:
        say(f"stock tool exited {done.returncode}: {done.stderr.strip()[:300]}")
    named = set(done.stdout.split())
    return wall, jvm, sum(1 for g in groups if g in named)


# -- the run ------------------------------------------------------------------------------------------------------


@contextmanager
def stack(state: Path) -> Iterator[tuple[KafkaCluster, controlplane.KubeCluster]]:
    kafka = kube = None
    try:
        kafka = kafka_cluster.create(state / "kafka", progress=say)
        kube = controlplane.create(state / "kube", progress=say)
        yield kafka, kube
    finally:
        say("stopping the stack ...")
        if kube is not None:
            kube.stop()
            shutil.rmtree(kube.home / "etcd", ignore_errors=True)
        if kafka is not None:
            kafka.stop()


@dataclass
class Results:
    groups: int
    stable_after: float = float("nan")
    operator_up: float = float("nan")
    converged: float = float("nan")
    rounds: list[Round] = field(default_factory=list)
    window: float = float("nan")
    rss: float = float("nan")
    hwm: float = float("nan")
    cpu: float = float("nan")
    syncs: int = 0
    requests: int = 0
    writes: int = 0
    """Status writes over the measured rounds (every group Stable: none is due)."""
    broker: dict[str, int] = field(default_factory=dict)
    broker_note: str = ""
    threads: int = 0
    min_ready: int = 0
    """The fewest statuses Stable+Ready in any poll after first convergence."""
    stock: float = float("nan")
    stock_jvm: float = float("nan")
    stock_named: int = 0
    departures: list["Departure"] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def start_groups(args: argparse.Namespace, conn: KafkaConnection, fleet: Fleet, res: Results) -> None:
    """Start the consumers and wait (with progress) until every group is Stable with its member assigned."""
    admin = clients.admin(conn)
    started = time.monotonic()
    fleet.start()
    deadline, stable, shown = started + args.stable_timeout, 0, 0.0
    while time.monotonic() < deadline:
        stable = stable_groups(admin, fleet.groups)
        if time.monotonic() - shown >= 5 or stable == len(fleet.groups):
            say(f"groups Stable: {stable}/{len(fleet.groups)} after {time.monotonic() - started:.0f} s "
                f"({os_threads()} threads in this process)")  # fmt: skip
            shown = time.monotonic()
        if stable == len(fleet.groups):
            break
        time.sleep(2)
    if stable != len(fleet.groups):
        res.notes.append(f"only {stable}/{len(fleet.groups)} groups were Stable after {args.stable_timeout:.0f} s")
        say(res.notes[-1] + ": measuring anyway")
    res.stable_after = time.monotonic() - started
    res.threads = os_threads()


def commit_empty_groups(conn: KafkaConnection, topic: str, groups: list[str]) -> None:
    """Real groups with committed offsets and no member (as a consumer that committed and left leaves them), made
    with the admin API (one group per call, 200 in flight); retried while the offsets topic loads (its failures come
    back per partition, not raised)."""
    admin = clients.admin(conn)
    pending, deadline = list(groups), time.monotonic() + 300
    while pending and time.monotonic() < deadline:
        failed: list[str] = []
        for start in range(0, len(pending), 200):
            batch = pending[start : start + 200]
            futures = {g: admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(g, [TopicPartition(topic, 0, 1)])])[g] for g in batch}  # fmt: skip
            for group, future in futures.items():
                try:
                    if any(tp.error is not None for tp in future.result(30).topic_partitions):
                        failed.append(group)
                except KafkaException:
                    failed.append(group)
        say(f"empty groups: {len(groups) - len(failed)}/{len(groups)} with committed offsets")
        pending = failed
        if failed:
            time.sleep(1)
    if pending:
        raise SystemExit(f"operator_scale: {len(pending)} empty groups could not commit offsets")


def poll_seconds(crs: int) -> float:
    """How often the CRs are listed: once a second, less often past 2,000 (a list of 10,000 is ~30 MB of JSON)."""
    return max(1.0, crs / 2000)


def os_threads() -> int:
    match = re.search(r"Threads:\s+(\d+)", Path("/proc/self/status").read_text())
    return int(match.group(1)) if match else 0


def create_crs(custom: Any, ext: Any, core: Any, *, namespace: str, crs: dict[str, str], bootstrap: str) -> None:
    ext.create_custom_resource_definition(crd.load())

    def served() -> bool:
        try:
            custom.list_cluster_custom_object(G, V, PLURAL)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    wait_for(served, timeout=60, what="the ConsumerGroup CRD served")
    core.create_namespace({"metadata": {"name": namespace}})
    for name, group in crs.items():
        custom.create_namespaced_custom_object(G, V, namespace, PLURAL, consumer_group(name, group, bootstrap))
    say(f"{len(crs)} ConsumerGroup CRs created in namespace {namespace}")


@dataclass
class Sample:
    """The operator's counters (one probe snapshot) and the broker's, at a quiet moment between rounds."""

    probe: dict[str, Any]
    broker: dict[str, int]
    writes: float
    """`vigil_operator_status_writes_total`."""


PROBE_CACHE = 10.0
"""kopf serves the probe handlers' results cached for 10 s (`probing_max_age`)."""


def sample(running: RunningOperator, broker: BrokerRequests | None, probed: list[float]) -> Sample:
    """Fresh counters: wait out kopf's probe cache since the last probe (`probed[0]`) first."""
    time.sleep(max(0.0, probed[0] + PROBE_CACHE + 0.5 - time.time()))
    probed[0] = time.time()
    return Sample(probe(running), broker.counts() if broker is not None else {}, running.metric(STATUS_WRITES))


@dataclass
class Monitor:
    """The measuring loop's state, advanced once a second from one list of the N CRs."""

    args: argparse.Namespace
    running: RunningOperator
    pid: int
    broker: BrokerRequests | None
    res: Results
    watch: Watch
    launched: float
    probed: list[float]
    cpu: list[tuple[float, float]] = field(default_factory=list)
    """(wall, operator CPU seconds), once a second."""
    converged_at: float | None = None
    settled: bool = False
    first: int | None = None
    before: Sample | None = None
    after: Sample | None = None
    shown: float = 0.0
    scraped: float = 0.0

    def step(self, items: list[dict[str, Any]], now: float) -> bool:
        """True once the measured rounds are written and the round after them has begun."""
        scrape = now - self.scraped >= SCRAPE_SECONDS
        if scrape:
            self.scraped = now
        self.watch.see(items, resync_times(self.running) if scrape else {})
        self.cpu.append((now, procs.cpu_seconds(self.pid)))
        if self.converged_at is None:
            self._converging(now)
            return False
        self.res.min_ready = min(self.res.min_ready, self.watch.ready)
        if not self.settled or self.first is None:
            self._settle(force=False)
        else:
            last = self.first + self.args.rounds - 1
            if self.after is None and self.watch.round(last) is not None:
                self.finish()
            return self.after is not None and self.watch.started(last + 1) is not None
        return False

    def _converging(self, now: float) -> None:
        n = len(self.watch.names)
        if now - self.shown >= 5 or self.watch.ready == n:
            say(f"statuses Stable+Ready: {self.watch.ready}/{n} at {now - self.launched:.0f} s")
            self.shown = now
        if self.watch.ready == n:
            self.converged_at, self.res.converged, self.res.min_ready = now, now - self.launched, n
            say("converged; watching the steady resync rounds ...")
            self._settle(force=True)

    def _settle(self, *, force: bool) -> None:
        """The `before` counters at a quiet moment: a round fully counted (a first round's resyncs also provision the
        budget Lease and Role after the status write), the next not begun. At 10,000 groups the first round takes
        minutes of status writes and the next one begins as soon as it ends: then the gap after a later round."""
        done = self.watch.complete()
        if done is None or self.watch.started(done + 1) is not None:
            return
        if force or time.time() >= self.probed[0] + PROBE_CACHE + 0.5:
            self.before = sample(self.running, self.broker, self.probed)
            self.settled = done >= 1 or int(self.before.probe.get("resyncs", 0)) >= len(self.watch.names)
            if self.settled:
                self.first = done + 1

    def finish(self) -> None:
        self.after = sample(self.running, self.broker, self.probed)
        self.res.rss, self.res.hwm = procs.memory_mb(self.pid, "VmRSS"), procs.memory_mb(self.pid, "VmHWM")


@dataclass(frozen=True)
class Departure:
    cr: str
    pod_event: bool
    """Its pod was deleted as its member left (the operator hears of it at once), or only the member left."""
    seconds: float | None
    """From the member's LeaveGroup (and the pod's deletion) to the status showing it gone; None: not within the
    bound."""


def departing(crs: dict[str, str], live: int, k: int) -> list[tuple[str, str]]:
    """The (CR, group) pairs of the live groups that leave in the departures measurement: the last 2·k live ones."""
    return list(crs.items())[max(0, live - 2 * k) : live]


def create_pods(core: Any, namespace: str, leaving: list[tuple[str, str]]) -> None:
    """Per leaving group, the pod its member would run in: named as its client.id (so the operator matches the
    member to it), annotated with its ConsumerGroup, never scheduled (a scheduling gate): only its events count."""
    for cr, group in leaving:
        core.create_namespaced_pod(namespace, {
            "metadata": {"name": f"{group}-m0", "annotations": {injection.GROUP_ANNOTATION: cr}},
            "spec": {"schedulingGates": [{"name": "vigil.dev/bench"}],
                     "containers": [{"name": "app", "image": "localhost/vigil-pause:3.10.1"}]},
        })  # fmt: skip


def measure_departures(args: argparse.Namespace, fleet: Fleet, apis: tuple[Any, Any], namespace: str,
                       leaving: list[tuple[str, str]]) -> list[Departure]:  # fmt: skip
    """One at a time, at a random moment of the resync period: a member leaves and its pod is deleted (the first
    half), or only the member leaves (the second half); the time until its CR's status says memberCount 0."""
    custom, core = apis
    out: list[Departure] = []
    pace = random.Random(7)
    bound = 2 * args.resync_seconds + 30
    for i, (cr, group) in enumerate(leaving):
        with_pod = i < len(leaving) // 2
        time.sleep(pace.uniform(0, args.resync_seconds))
        fleet.leave(group)
        if with_pod:
            core.delete_namespaced_pod(f"{group}-m0", namespace, grace_period_seconds=0)
        left = time.monotonic()
        seconds: float | None = None
        while time.monotonic() - left < bound:
            status = custom.get_namespaced_custom_object(G, V, namespace, PLURAL, cr).get("status") or {}
            if status.get("memberCount") == 0:
                seconds = time.monotonic() - left
                break
            time.sleep(0.1)
        out.append(Departure(cr, with_pod, seconds))
        shown = f"{seconds:.1f} s" if seconds is not None else f"not within {bound:.0f} s"
        say(f"departure {i + 1}/{len(leaving)} ({'member and pod' if with_pod else 'member only'}): {shown}")
    return out


def measure_operator(
    args: argparse.Namespace, state: Path, kube: controlplane.KubeCluster, *, list_crs: Any, names: list[str],
    broker: BrokerRequests | None, res: Results, departures: Callable[[], list[Departure]],
) -> None:  # fmt: skip
    """Start the operator; watch first convergence, then `--rounds` steady rounds, then the departures (the operator
    is stopped after).

    Counters are sampled once round 0 is complete (every create handler done, round 1 not begun) and right after
    the last measured round is written: quiet moments, so the broker's counts and the operator's cover the same
    resyncs. CPU is taken over whole resync periods: from the first measured round's start to the next one's.
    """
    say(f"starting the operator (resync {args.resync_seconds:.0f} s, no webhook, no events topic) ...")
    launched = time.time()
    running = start_operator(kube.kubeconfig, state, events_topic="", resync_seconds=args.resync_seconds,
                             webhook=False)  # fmt: skip
    probed = [time.time()]  # start_operator's last liveness GET filled kopf's probe cache
    try:
        res.operator_up = time.time() - launched
        pid = running.process.pid()
        assert pid is not None
        mon = Monitor(args, running, pid, broker, res, Watch(names, set(names[: args.live])), launched, probed)
        end_by = launched + args.converge_timeout
        while time.time() < end_by:
            now = time.time()
            if mon.step(list_crs(), now):
                break
            if mon.converged_at is not None:
                end_by = mon.converged_at + (args.rounds + 2) * args.resync_seconds + args.converge_timeout
            time.sleep(max(0.0, poll_seconds(len(names)) - (time.time() - now)))
        if mon.converged_at is None:
            res.notes.append(
                f"never converged: {mon.watch.ready}/{len(names)} Ready after {args.converge_timeout:.0f} s"
            )
            return
        if mon.first is None or mon.after is None:
            res.notes.append("stopped waiting: the steady rounds did not all complete in time")
            mon.finish()
        assert mon.before is not None
        assert mon.after is not None
        summarize(res, mon.watch, mon.cpu, first=mon.first or 1, rounds=args.rounds, before=mon.before,
                  after=mon.after)  # fmt: skip
        res.departures = departures()
        say(f"operator log: {running.log}")
    finally:
        running.stop()


def nearest(samples: list[tuple[float, float]], moment: float) -> tuple[float, float]:
    return min(samples, key=lambda s: abs(s[0] - moment))


def summarize(
    res: Results, watch: Watch, cpu: list[tuple[float, float]], *, first: int, rounds: int, before: Sample,
    after: Sample,
) -> None:  # fmt: skip
    res.rounds = [r for k in range(first, first + rounds) if (r := watch.round(k))]
    a, b = watch.started(first), watch.started(first + rounds)
    if a is not None and b is not None:  # whole resync periods, from the /proc samples nearest to them
        ca, cb = nearest(cpu, a), nearest(cpu, b)
        res.window, res.cpu = cb[0] - ca[0], (cb[1] - ca[1]) / (cb[0] - ca[0]) * 100
    res.syncs = int(after.probe.get("resyncs", 0)) - int(before.probe.get("resyncs", 0))
    res.writes = int(after.writes - before.writes)
    res.requests = int(after.probe.get("kafka_requests", 0)) - int(before.probe.get("kafka_requests", 0))
    if res.syncs != rounds * len(watch.names):
        res.notes.append(f"the counters cover {res.syncs} group resyncs, not {rounds} × {len(watch.names)}")
    if before.broker and after.broker:
        res.broker = {api: after.broker.get(api, 0) - before.broker.get(api, 0) for api in OPERATOR_APIS}


def run(args: argparse.Namespace, state: Path) -> Results:
    res = Results(args.groups)
    tag = uuid.uuid4().hex[:6]
    crs = {f"cg-{i:03d}": f"scale-{tag}-{i:03d}" for i in range(args.groups)}
    with stack(state) as (kafka, kube):
        conn = kafka.connection()
        topic = clients.create_topic(conn, f"scale-{tag}", partitions=args.partitions)
        clients.produce_spread(conn, topic, [f"m{i}" for i in range(10 * args.partitions)], args.partitions)
        fleet = Fleet(conn, topic, list(crs.values())[: args.live])
        api: Any = config.new_client_from_config(config_file=str(kube.kubeconfig))  # type: ignore[no-untyped-call]
        try:
            start_groups(args, conn, fleet, res)
            commit_empty_groups(conn, topic, list(crs.values())[args.live :])
            custom: Any = client.CustomObjectsApi(api)
            namespace = f"scale-{tag}"
            core: Any = client.CoreV1Api(api)
            create_crs(custom, client.ApiextensionsV1Api(api), core, namespace=namespace, crs=crs,
                       bootstrap=kafka.bootstrap)  # fmt: skip
            leaving = departing(crs, args.live, args.departures)
            create_pods(core, namespace, leaving[: len(leaving) // 2])

            def list_crs() -> list[dict[str, Any]]:
                resp = custom.list_namespaced_custom_object(G, V, namespace, PLURAL, _preload_content=False)
                items: list[dict[str, Any]] = json.loads(resp.data)["items"]
                return items

            broker: BrokerRequests | None = BrokerRequests(kafka)
            if broker is not None and not broker.enable():
                res.broker_note, broker = broker.error, None
            measure_operator(
                args,
                state,
                kube,
                list_crs=list_crs,
                names=list(crs),
                broker=broker,
                res=res,
                departures=lambda: measure_departures(args, fleet, (custom, core), namespace, leaving),
            )
            if broker is not None and not res.broker:
                res.broker_note = broker.error or "no JMX samples"
            say(f"stock: kafka-consumer-groups --describe --all-groups over {len(crs)} groups ...")
            res.stock, res.stock_jvm, res.stock_named = stock_describe(kafka, list(crs.values()))
        finally:
            say("closing the consumers ...")
            fleet.close()
            api.close()
    return res


def report(args: argparse.Namespace, res: Results, command: str, elapsed: float) -> None:
    n, r = res.groups, args.resync_seconds
    current = [x.all_current for x in res.rounds]
    med = statistics.median(current) if current else float("nan")
    per_sync = res.requests / res.syncs if res.syncs else float("nan")
    print(f"\n{date()}, `{command}` ({elapsed / 60:.1f} min wall)")
    print(f"{n} consumers in this process ({res.threads} OS threads), every group Stable after "
          f"{res.stable_after:.0f} s; operator liveness up {res.operator_up:.1f} s after launch")  # fmt: skip
    print(
        f"after first convergence, the fewest statuses Stable with 1 member and Ready in any poll: {res.min_ready}/{n}"
    )
    for note in res.notes:
        print(f"NOTE: {note}")
    print("\n| resync round | all groups resynced after the round began (/metrics resync times) |\n|---|---|")
    for x in res.rounds:
        print(f"| {x.index} | {x.all_current:.2f} s |")
    print(
        f"\n| ConsumerGroups | resync | first convergence | all current (median of {len(current)} rounds) "
        "| stock describe --all-groups (JVM start) | vigil / stock | operator RSS (peak) | operator CPU "
        "| broker requests per group resync |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print(
        f"| {n} | {r:.0f} s | {res.converged:.0f} s | {med:.2f} s (max {max(current, default=float('nan')):.2f} s) "
        f"| {res.stock:.1f} s ({res.stock_jvm:.1f} s) | {med / res.stock:.2f}× | {res.rss:.0f} MB ({res.hwm:.0f} MB) "
        f"| {res.cpu:.1f} % over {res.window:.0f} s | {per_sync:.2f} |"
    )
    print(f"\nfirst convergence / stock: {res.converged / res.stock:.2f}×; stock output named {res.stock_named}/{n} "
          f"groups; operator counters over the measured rounds: {res.requests} requests / {res.syncs} group resyncs "
          f"({len(res.rounds)} rounds × {n} = {len(res.rounds) * n}) = {res.requests * n / max(1, res.syncs):.0f} "
          f"requests per round of {n}; status writes: {res.writes}")  # fmt: skip
    if res.broker:
        total = sum(res.broker.values())
        detail = ", ".join(f"{k} {v}" for k, v in res.broker.items() if v)
        per = total / res.syncs if res.syncs else float("nan")
        print(f"broker-side (JMX RequestsPerSec counts) over the same {res.syncs} group resyncs: {total} "
              f"requests = {per:.2f} per group resync ({detail}); Metadata would include the consumers' "
              "periodic refreshes")  # fmt: skip
    else:
        print(f"broker-side (JMX) counts not measured: {res.broker_note}")
    for with_pod, what in ((True, "a member leaves and its pod is deleted"), (False, "a member leaves, no event")):
        times = [d.seconds for d in res.departures if d.pod_event is with_pod]
        if times:
            shown = ", ".join(f"{t:.1f} s" if t is not None else "not seen" for t in times)
            print(f"{what} → its status says memberCount 0 after: {shown}")
    print(f"a round of {n} groups = {per_sync * n:.0f} operator-counted requests every {r:.0f} s "
          f"({per_sync * n / r:.1f}/s); the stock tool gives one snapshot to a terminal, vigil keeps {n} statuses "
          f"current every {r:.0f} s")  # fmt: skip


def date() -> str:
    return time.strftime("%Y-%m-%d")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--groups", type=int, default=200, help="ConsumerGroups = real groups")
    parser.add_argument(
        "--live", type=int, default=None, help="groups with a live consumer (default: all); the others: offsets only"
    )
    parser.add_argument("--resync-seconds", type=float, default=30.0)
    parser.add_argument("--rounds", type=int, default=3, help="steady resync rounds to measure")
    parser.add_argument(
        "--departures",
        type=int,
        default=3,
        help="after the rounds: this many members leave with their pod deleted, then as many alone",
    )
    parser.add_argument("--partitions", type=int, default=3, help="of the one topic every group consumes")
    parser.add_argument("--stable-timeout", type=float, default=300.0, help="for all groups to be Stable, s")
    parser.add_argument("--converge-timeout", type=float, default=600.0, help="for all statuses to be Ready, s")
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="default: test-artifacts/bench-operator-<time> (kept: logs)")  # fmt: skip
    args = parser.parse_args()
    args.live = args.groups if args.live is None else min(args.live, args.groups)
    state = args.state_dir or ROOT / "test-artifacts" / f"bench-operator-{time.strftime('%Y%m%d-%H%M%S')}"
    state = state.resolve()
    state.mkdir(parents=True, exist_ok=True)
    os.environ[procs.DIE_WITH_PARENT_ENV] = str(os.getpid())  # servers die with this process, even on SIGKILL
    command = " ".join([".venv/bin/python", "bench/operator_scale.py", *sys.argv[1:]])
    say(f"state and logs: {state}")
    started = time.monotonic()
    res = run(args, state)
    report(args, res, command, time.monotonic() - started)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # the stack and the consumers were stopped on the way out
        sys.exit(130)
