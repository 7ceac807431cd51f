"""Restarts of a consumer StatefulSet: rebalances and unowned partitions, stock configurations vs vigil.

A private stack under `--state-dir` (`vigil dev up`): one KRaft node, Kubernetes with a real node running the pods as
containers from vigil's images, and vigil installed with `helm install` (its operator in a pod, its injection
webhook behind a Service). For every N of `--replicas` and every
configuration, a fresh namespace gets a StatefulSet of N real consumers (`vigil_testapps.consumerapp`, each
joining `--startup-seconds` after it starts, like an app with a slow start) on a new topic of 2·N partitions; once
the group is Stable with every partition assigned, a template change restarts every pod:

- eager dynamic (range), cooperative-sticky dynamic, KIP-848 (`group.protocol=consumer`), static with a session
  longer than a restart, static with a session shorter than one: the StatefulSet's own RollingUpdate, no
  ConsumerGroup, no sidecar (stock);
- vigil coordinated: static with the short session, `updateStrategy: OnDelete`, a ConsumerGroup with
  `restart.strategy: Coordinated` (sidecars injected); the operator restarts the pods.

Every pod has the same readiness probe (`/healthz`, first checked `--startup-seconds` + 2 s after the start), so
a stock rolling update moves on about when the restarted consumer has joined. Measured per run:

- rebalances: from the broker's log (test rules) — classic groups: new `Stabilized group … generation N`
  lines; KIP-848: `Bumped group epoch to N` lines (each epoch bump recomputes the target assignment);
- partition-seconds unowned (broker view): a sampler in this process describes the group every `--interval` s;
  a partition is owned if a member's assignment holds it — in a Stable classic group; while a classic group is
  not Stable, nothing for eager (every member revoked everything) and, for cooperative-sticky, what the last
  Stable assignment gave members still in the group; for KIP-848 in any state (members' current assignments);
- partition-seconds unconsumed (clients' view): the same sampler asks every running, non-terminating pod's app
  (`GET /whoami`, its `assignment()` after its last poll) which partitions it holds; a partition nobody holds
  is not being consumed (this includes a restarting static member's partitions, which the broker still shows
  as assigned);
- longest stop: the longest continuous span one partition was unowned / unconsumed (sampling resolution);
- rollout time: template change → every pod at the new revision and Ready, the group Stable, every partition
  owned and held by a client (for vigil also `status.rollout` Complete).

Ratios are against the best stock configuration of the same N measured in the same run.

    .venv/bin/python bench/rollout.py [--replicas 4 8] [--startup-seconds 8] [--only CONFIG ...]
"""

import argparse
import json
import math
import os
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from vigil_core.kafka.security import KafkaConnection
from vigil_dev import procs
from vigil_dev import stack as dev_stack
from vigil_dev.errors import DevError
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.kube.controlplane import KubeCluster
from vigil_dev.testing import clients, e2e, images
from vigil_dev.testing.broker_log import broker_lines, generations
from vigil_dev.testing.chart import Tools
from vigil_dev.testing.kube_fixtures import Kube, pod_ready
from vigil_dev.testing.release import RunningOperator, install_operator
from vigil_dev.testing.waiting import wait_for
from vigil_operator import crd
from vigil_operator.rollout_cli import progress as rollout_progress

ROOT = Path(__file__).resolve().parents[1]
NAME = "orders"


def say(line: str) -> None:
    print(f"# {line}", flush=True)


class BenchError(Exception):
    """One configuration could not be measured (the message says why)."""


@dataclass(frozen=True)
class Config:
    key: str
    label: str
    static: bool = False
    short_session: bool = True
    """Classic groups: the short session (`--short-session`), else the long one (`--long-session`)."""
    strategy: str = "range"
    kip848: bool = False
    coordinated: bool = False

    @property
    def stock(self) -> bool:
        return not self.coordinated

    @property
    def eager(self) -> bool:
        return not self.kip848 and self.strategy != "cooperative-sticky"


CONFIGS = {
    c.key: c
    for c in (
        Config("eager", "eager dynamic (range)"),
        Config("cooperative", "cooperative-sticky dynamic", strategy="cooperative-sticky"),
        Config("kip848", "KIP-848 (group.protocol=consumer)", kip848=True),
        Config("static-long", "static, session > restart", static=True, short_session=False),
        Config("static-short", "static, session < restart", static=True),
        Config("vigil-coordinated", "vigil coordinated, session < restart", static=True, coordinated=True),
    )
}


# -- the sampler ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    at: float
    state: str
    members: int
    broker: frozenset[int]
    """Partitions owned in the broker's view (see the module docstring)."""
    clients: frozenset[int]
    """Partitions some running, non-terminating pod's app holds."""


def state_name(value: object) -> str:
    return str(value).split(".")[-1].upper()


@dataclass
class Sampler:
    """Describes the group and asks the pods' apps what they hold, every `interval` s, from its own thread."""

    conn: KafkaConnection
    api: Any
    namespace: str
    group: str
    topic: str
    cfg: Config
    interval: float
    samples: list[Sample] = field(default_factory=list)
    errors: int = 0
    _stable: dict[str, frozenset[int]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.admin = clients.admin(self.conn)  # referenced for the sampler's life: futures resolve
        self.core = client.CoreV1Api(self.api)

    def start(self) -> "Sampler":
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def latest(self) -> Sample | None:
        return self.samples[-1] if self.samples else None

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                self.samples.append(self.sample())
            except (KafkaException, ApiException, OSError, ValueError):
                self.errors += 1
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - began)))

    def sample(self) -> Sample:
        at = time.monotonic()
        desc = self.admin.describe_consumer_groups([self.group], request_timeout=5)[self.group].result(10)
        state = state_name(desc.state)
        members = {
            m.member_id: frozenset(tp.partition for tp in m.assignment.topic_partitions if tp.topic == self.topic)
            for m in desc.members
        }
        union = frozenset().union(*members.values()) if members else frozenset()
        if self.cfg.kip848:
            broker = union  # ConsumerGroupDescribe: every member's current assignment, in any state
        elif state == "STABLE":
            broker, self._stable = union, members
        elif self.cfg.eager or state in {"EMPTY", "DEAD"}:
            broker = frozenset()
        else:  # cooperative: members still in the group keep what the last Stable assignment gave them
            kept = [self._stable[m] for m in members if m in self._stable]
            broker = frozenset().union(*kept) if kept else frozenset()
        return Sample(at, state, len(members), broker, self.held())

    def held(self) -> frozenset[int]:
        resp: Any = self.core.list_namespaced_pod(self.namespace, _preload_content=False, _request_timeout=5)
        held: set[int] = set()
        for pod in json.loads(resp.data)["items"]:
            ip = (pod.get("status") or {}).get("podIP")
            if not ip or pod["metadata"].get("deletionTimestamp"):
                continue  # a terminating pod's app stopped polling at SIGTERM
            try:
                with urllib.request.urlopen(f"http://{ip}:8080/whoami", timeout=0.4) as response:
                    view = json.loads(response.read())
            except (OSError, ValueError):
                continue  # not started, or already gone: holds nothing
            held |= {p for t, p in view.get("assigned") or [] if t == self.topic}
        return frozenset(held)


def integrate(samples: list[Sample], partitions: int, end: float, view: Callable[[Sample], frozenset[int]]
              ) -> tuple[float, float]:  # fmt: skip
    """(partition-seconds not in `view`, the longest continuous span one partition was not in it) up to `end`."""
    total, longest = 0.0, 0.0
    since: dict[int, float] = {}
    for i, s in enumerate(samples):
        until = samples[i + 1].at if i + 1 < len(samples) else end
        owned = view(s)
        total += (partitions - len(owned & set(range(partitions)))) * max(0.0, until - s.at)
        for p in range(partitions):
            if p in owned:
                if p in since:
                    longest = max(longest, s.at - since.pop(p))
            else:
                since.setdefault(p, s.at)
    for start in since.values():
        longest = max(longest, end - start)
    return total, longest


# -- one configuration ---------------------------------------------------------------------------------------------


@dataclass
class Row:
    cfg: Config
    replicas: int
    partitions: int
    rebalances: int = 0
    broker_s: float = math.nan
    broker_longest: float = math.nan
    client_s: float = math.nan
    client_longest: float = math.nan
    rollout: float = math.nan
    states: list[str] = field(default_factory=list)
    samples: int = 0
    failed: str = ""


def workload(cfg: Config, args: argparse.Namespace, *, group: str, topic: str, bootstrap: str, replicas: int
             ) -> dict[str, Any]:  # fmt: skip
    env = {"STARTUP_DELAY_SECONDS": f"{args.startup_seconds:g}"}
    if cfg.kip848:
        env["KAFKA_GROUP_PROTOCOL"] = "consumer"
    else:
        session = args.short_session if cfg.short_session else args.long_session
        env |= {"KAFKA_SESSION_TIMEOUT_MS": str(int(session * 1000)), "KAFKA_HEARTBEAT_INTERVAL_MS": "1000",
                "KAFKA_PARTITION_ASSIGNMENT_STRATEGY": cfg.strategy}  # fmt: skip
    sts = e2e.statefulset(NAME, group, topic, bootstrap, replicas, env=env, parallel=True)
    template = sts["spec"]["template"]
    app = template["spec"]["containers"][0]
    app["readinessProbe"] = {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1,
                             "initialDelaySeconds": math.ceil(args.startup_seconds) + 2}  # fmt: skip
    if cfg.coordinated:
        sts["spec"]["updateStrategy"] = {"type": "OnDelete"}  # the webhook sets the static instance id
    else:  # stock: no sidecar, no ConsumerGroup; the StatefulSet's RollingUpdate
        del template["metadata"]["labels"]["vigil.dev/inject"]
        template["metadata"]["annotations"] = {}
        if cfg.static:
            app["env"].append(
                {"name": "KAFKA_GROUP_INSTANCE_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
            )
    return sts


@dataclass
class Bench:
    args: argparse.Namespace
    kafka: KafkaCluster
    kube: Kube

    @property
    def conn(self) -> KafkaConnection:
        return self.kafka.connection()

    def run(self, cfg: Config, replicas: int) -> Row:
        row = Row(cfg, replicas, 2 * replicas)
        tag = f"{cfg.key} N={replicas}"
        namespace = f"bench-{cfg.key}-{uuid.uuid4().hex[:6]}"
        group = clients.unique(f"roll-{cfg.key}")
        topic = clients.create_topic(self.conn, clients.unique("roll"), partitions=row.partitions)
        self.kube.create_namespace(namespace)
        sampler: Sampler | None = None
        try:
            wait_for(lambda: self._exists(namespace), timeout=60, what=f"the default ServiceAccount of {namespace}")
            sts = workload(cfg, self.args, group=group, topic=topic, bootstrap=self.kafka.bootstrap, replicas=replicas)
            if cfg.coordinated:
                session_ms = int(self.args.short_session * 1000)
                spec = {"membership": "static", "restart": {"strategy": "Coordinated", "maxRestartSeconds": 90},
                        "client": {"sessionTimeoutMs": session_ms, "heartbeatIntervalMs": 1000}}  # fmt: skip
                self.kube.apply(e2e.consumer_group(NAME, group, self.kafka.bootstrap, spec=spec,
                                                   stallTimeoutSeconds=60), namespace)  # fmt: skip
                e2e.wait_injecting(self.kube, namespace, sts)
            self.kube.apply(sts, namespace)
            say(f"[{tag}] {replicas} pods starting (group {group}, {row.partitions} partitions) ...")
            sampler = Sampler(self.conn, self.kube.api, namespace, group, topic, cfg, self.args.interval).start()
            self._settle(sampler, row, namespace, tag)
            before = self._rebalances(cfg, group)
            sampler.samples.clear()
            first = sampler.sample()
            sampler.samples.insert(0, first)
            old = self.kube.apps.read_namespaced_stateful_set(NAME, namespace).status.update_revision
            patch = {
                "spec": {"template": {"metadata": {"annotations": {"bench.vigil.dev/revision": str(time.time())}}}}
            }
            self.kube.apps.patch_namespaced_stateful_set(NAME, namespace, patch)
            began = first.at
            say(f"[{tag}] template changed: rolling ({'the operator' if cfg.coordinated else 'RollingUpdate'}) ...")
            end = self._rolled(sampler, row, namespace, tag=tag, began=began, old=old)
            sampler.stop()
            samples = [s for s in sampler.samples if s.at <= end]
            row.rollout = end - began
            row.samples = len(samples)
            row.broker_s, row.broker_longest = integrate(samples, row.partitions, end, lambda s: s.broker)
            row.client_s, row.client_longest = integrate(samples, row.partitions, end, lambda s: s.clients)
            row.states = sorted({s.state for s in samples} - {"STABLE"})
            time.sleep(1)  # the broker's log lines of the last join
            row.rebalances = self._rebalances(cfg, group) - before
            say(f"[{tag}] done in {row.rollout:.1f} s: {row.rebalances} rebalance(s), {row.broker_s:.1f} "
                f"partition-s unowned (broker), {row.client_s:.1f} unconsumed (clients)")  # fmt: skip
        except (BenchError, DevError, ApiException, KafkaException, AssertionError) as exc:
            row.failed = " ".join(str(exc).split())[:300]
            say(f"[{tag}] FAILED: {row.failed}")
        finally:
            if sampler is not None:
                sampler.stop()
            self._remove(namespace, tag)
        return row

    def _exists(self, namespace: str) -> bool:
        try:
            self.kube.core.read_namespaced_service_account("default", namespace)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def _pods(self, namespace: str) -> list[dict[str, Any]]:
        resp = self.kube.core.list_namespaced_pod(namespace, _preload_content=False)
        items: list[dict[str, Any]] = json.loads(resp.data)["items"]
        return items

    def _updated(self, namespace: str, old: str) -> int:
        """Pods at the StatefulSet's new update revision (not `old`), Ready and not terminating."""
        revision = self.kube.apps.read_namespaced_stateful_set(NAME, namespace).status.update_revision
        if revision == old:
            return 0  # the controller has not seen the template change yet
        return sum(
            1
            for p in self._pods(namespace)
            if p["metadata"].get("labels", {}).get("controller-revision-hash") == revision
            and not p["metadata"].get("deletionTimestamp")
            and pod_ready(p)
        )

    @staticmethod
    def _whole(s: Sample | None, row: Row) -> bool:
        return (s is not None and s.state == "STABLE" and len(s.broker) == row.partitions
                and len(s.clients) == row.partitions and s.members == row.replicas)  # fmt: skip

    def _settle(self, sampler: Sampler, row: Row, namespace: str, tag: str) -> None:
        deadline = time.monotonic() + self.args.settle_timeout
        shown = 0.0
        while time.monotonic() < deadline:
            ready = sum(1 for p in self._pods(namespace) if pod_ready(p))
            latest = sampler.latest()
            whole = ready == row.replicas and self._whole(latest, row)
            if whole and row.cfg.coordinated:  # the operator knows every pod's member
                status = e2e.status_of(self.kube, namespace, NAME)
                pods = sorted(m.get("pod") or "" for m in status.get("members") or [])
                whole = status.get("state") == "Stable" and pods == [f"{NAME}-{i}" for i in range(row.replicas)]
            if whole:
                say(f"[{tag}] settled: {row.replicas} members Stable, every partition assigned and held")
                return
            if time.monotonic() - shown >= 10:
                say(f"[{tag}] waiting for the group: {ready}/{row.replicas} pods Ready, {describe(latest, row)}")
                shown = time.monotonic()
            time.sleep(1)
        raise BenchError(
            f"the group never settled in {self.args.settle_timeout:.0f} s: {describe(sampler.latest(), row)}"
        )

    def _rolled(self, sampler: Sampler, row: Row, namespace: str, *, tag: str, began: float, old: str) -> float:
        timeout = row.replicas * (self.args.startup_seconds + 40) + 60
        shown = began
        while (now := time.monotonic()) < began + timeout:
            updated = self._updated(namespace, old)
            latest = sampler.latest()
            line, done = f"{updated}/{row.replicas} pods updated and Ready", updated == row.replicas
            if row.cfg.coordinated:
                cr = self.kube.custom.get_namespaced_custom_object(*e2e.CG[:2], namespace, e2e.CG[2], NAME)
                sts = self.kube.apps.read_namespaced_stateful_set(NAME, namespace).to_dict()
                code, message = rollout_progress(cr, sts)
                if code == 1:
                    raise BenchError(f"vigil rollout stopped: {message}")
                line, done = f"{line}; vigil: {message}", done and code == 0
            if done and self._whole(latest, row) and latest is not None and latest.at >= now - 2 * self.args.interval:
                return latest.at
            if now - shown >= 5:
                say(f"[{tag}] {now - began:.0f} s: {line}; {describe(latest, row)}")
                shown = now
            time.sleep(0.5)
        raise BenchError(f"not rolled out after {timeout:.0f} s: {describe(sampler.latest(), row)}")

    def _rebalances(self, cfg: Config, group: str) -> int:
        if cfg.kip848:
            return len(broker_lines(self.kafka, group, r"\[GroupId {g}\] Bumped group epoch to (\d+)"))
        return len(generations(self.kafka, group))

    def _remove(self, namespace: str, tag: str) -> None:
        """Delete the namespace and wait until its pods are gone (the next run gets the machine to itself)."""
        try:
            self.kube.core.delete_namespace(namespace)
            wait_for(lambda: len(self._pods(namespace)), lambda n: n == 0, timeout=90, what=f"{namespace}: pods gone")
        except (ApiException, AssertionError) as exc:
            say(f"[{tag}] cleanup: {' '.join(str(exc).split())[:200]}")


def describe(s: Sample | None, row: Row) -> str:
    if s is None:
        return "no sample yet"
    return (f"group {s.state.title()} ({s.members} members), owned {len(s.broker)}/{row.partitions} (broker), "
            f"held {len(s.clients)}/{row.partitions} (clients)")  # fmt: skip


# -- the table -----------------------------------------------------------------------------------------------------

METRICS = (("rebalances", "rebalances"), ("broker_s", "unowned"), ("client_s", "unconsumed"),
           ("client_longest", "longest stop"), ("rollout", "rollout time"))  # fmt: skip


def ratio(value: float, best: float) -> str:
    if math.isnan(value) or math.isnan(best):
        return "—"
    if best == 0:
        return "= (0)" if value == 0 else "∞"
    return f"{value / best:.2f}×"


def best_stock(rows: list[Row], attr: str) -> tuple[float, str]:
    measured = [(getattr(r, attr), r.cfg.key) for r in rows if r.cfg.stock and not r.failed]
    return min(measured) if measured else (math.nan, "")


def report(rows: list[Row], args: argparse.Namespace, command: str, elapsed: float) -> None:
    print(f"\n{time.strftime('%Y-%m-%d', time.gmtime())}, `{command}` ({elapsed / 60:.1f} min wall)")
    print(f"startup {args.startup_seconds:g} s, short session {args.short_session:g} s, long session "
          f"{args.long_session:g} s, heartbeat 1 s, 2·N partitions, sampled every {args.interval:g} s\n")  # fmt: skip
    print("| N | configuration | rebalances | partition-s unowned (broker) | longest unowned (broker) "
          "| partition-s unconsumed (clients) | longest stop (clients) | rollout time "
          "| rebalances / best stock | unowned / best stock | unconsumed / best stock | longest stop / best stock "
          "| time / best stock |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    bests: list[str] = []
    for n in sorted({r.replicas for r in rows}):
        group = [r for r in rows if r.replicas == n]
        best = {attr: best_stock(group, attr) for attr, _ in METRICS}
        bests.append(f"N={n}: " + ", ".join(f"{label} {best[a][1]} ({best[a][0]:.1f})" for a, label in METRICS))
        for r in group:
            if r.failed:
                print(f"| {n} | {r.cfg.label} | failed: {r.failed} | | | | | | | | | | |")
                continue
            ratios = " | ".join(ratio(getattr(r, a), best[a][0]) for a, _ in METRICS)
            print(f"| {n} | {r.cfg.label} | {r.rebalances} | {r.broker_s:.1f} | {r.broker_longest:.1f} s "
                  f"| {r.client_s:.1f} | {r.client_longest:.1f} s | {r.rollout:.1f} s | {ratios} |")  # fmt: skip
    print("\nbest stock per column: " + "; ".join(bests))
    for r in rows:
        if not r.failed:
            print(f"- {r.cfg.key} N={r.replicas}: {r.samples} samples; non-Stable states seen: "
                  f"{', '.join(s.title() for s in r.states) or 'none'}")  # fmt: skip


# -- the stack -----------------------------------------------------------------------------------------------------


def start_stack(state: Path, stack: dict[str, Any]) -> tuple[KafkaCluster, Kube, RunningOperator]:
    dev_stack.up(state, archives=images.archives(progress=say), progress=say)
    stack["state"] = state
    kafka, cluster = KafkaCluster.load(state), KubeCluster.load(state)
    if kafka is None or cluster is None:
        raise DevError(f"the stack in {state} did not come up")
    loader: Any = config
    api = loader.new_client_from_config(config_file=str(cluster.kubeconfig))
    stack["api"] = api
    kube = Kube(cluster, api)
    kube.apply(crd.load())
    say("helm install vigil (no events topic) ...")
    kube.create_namespace("vigil")
    tools = Tools.from_binaries(cluster.binaries, cluster.kubeconfig, state / "helm-home")
    operator = install_operator(kube, tools, "vigil", namespace="vigil", events_topic="")
    return kafka, kube, operator


def stop_stack(stack: dict[str, Any]) -> None:
    say("stopping the stack ...")
    if "api" in stack:
        stack["api"].close()
    if "state" in stack:
        dev_stack.down(stack["state"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--replicas", type=int, nargs="+", default=[4, 8], help="pods per StatefulSet (N)")
    parser.add_argument("--startup-seconds", type=float, default=8.0, help="each app joins this long after it starts")
    parser.add_argument("--short-session", type=float, default=6.0, help="session timeout < a restart, s")
    parser.add_argument("--long-session", type=float, default=45.0, help="session timeout > a restart, s")
    parser.add_argument("--only", nargs="+", choices=list(CONFIGS), default=list(CONFIGS), metavar="CONFIG",
                        help=f"configurations to run (default all: {' '.join(CONFIGS)})")  # fmt: skip
    parser.add_argument("--interval", type=float, default=0.5, help="sampling interval, s")
    parser.add_argument("--settle-timeout", type=float, default=180.0, help="for a new group to settle, s")
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="default: test-artifacts/bench-rollout-<time> (kept: logs)")  # fmt: skip
    args = parser.parse_args()
    if args.startup_seconds <= args.short_session or args.startup_seconds >= args.long_session:
        parser.error("--startup-seconds must lie between --short-session and --long-session")
    state = (args.state_dir or ROOT / "test-artifacts" / f"bench-rollout-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    state.mkdir(parents=True, exist_ok=True)
    os.environ[procs.DIE_WITH_PARENT_ENV] = str(os.getpid())  # servers die with this process, even on SIGKILL
    command = " ".join([".venv/bin/python", "bench/rollout.py", *sys.argv[1:]])
    say(f"state and logs: {state}")
    started = time.monotonic()
    stack: dict[str, Any] = {}
    rows: list[Row] = []
    try:
        kafka, kube, _ = start_stack(state, stack)
        bench = Bench(args, kafka, kube)
        for n in args.replicas:
            for key in args.only:
                rows.append(bench.run(CONFIGS[key], n))
    except (DevError, ApiException, KafkaException, AssertionError) as exc:
        print(f"rollout bench: the stack failed: {' '.join(str(exc).split())[:300]}", file=sys.stderr)
        return 1
    finally:
        stop_stack(stack)
    report(rows, args, command, time.monotonic() - started)
    failed = [f"{r.cfg.key} N={r.replicas}" for r in rows if r.failed]
    if failed:
        print(f"rollout bench: {len(failed)} run(s) failed: {', '.join(failed)} (logs: {state})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the stack was stopped on the way out
        sys.exit(130)
