"""`vigil demo` / `make demo`: the whole story on the real local stack, narrated step by step.

1. Kafka, a Kubernetes control plane and a real node (kubelet, containerd, runc) holding vigil's images; vigil
   installed with `helm install` of charts/vigil (its operator in a pod, its webhook behind a Service).
2. A 3-pod static consumer group on a StatefulSet (`updateStrategy: OnDelete`, each pod labelled for injection),
   in a namespace that enforces the `restricted` Pod Security Standard: the webhook adds the sidecar to every
   pod, the kubelet runs them as containers, records keep arriving.
3. A stall: one app stops polling (its librdkafka keeps heartbeating — stalled but alive, stock Kafka never
   notices). Its sidecar sees no poll for the stall timeout and fails the app's liveness probe; the app container
   is restarted; its heartbeats are bridged meanwhile, so the group does not even rebalance.
4. A coordinated rolling restart (a template change): every pod restarted one by one, zero rebalances.
5. The report job over what happened: the summary, and where the HTML report is.

Every step has a bound; missing one ends the demo with exit code 1 (and says which). The stack is stopped at the
end either way; its logs stay under the demo's state directory. Generations are counted from the broker's log.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kubernetes import config

from vigil_dev import paths, stack
from vigil_dev.errors import DevError
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.kube.controlplane import KubeCluster
from vigil_dev.spark import install as spark_install
from vigil_dev.testing import clients, images
from vigil_dev.testing.broker_log import generations
from vigil_dev.testing.chart import Tools
from vigil_dev.testing.e2e import CG, ConsumerSet, Producing
from vigil_dev.testing.kube_fixtures import Kube, container_status
from vigil_dev.testing.release import install_operator
from vigil_dev.testing.waiting import WaitTimeoutError, wait_for
from vigil_operator import crd
from vigil_operator.domain.injection import SIDECAR_NAME

STALL_TIMEOUT = 10
REPLICAS = 3
PARTITIONS = 6
SESSION_MS = 10_000
STARTUP = 15
"""Each app needs this long to start (like a real one warming up): longer than the session timeout."""
RELEASE = "vigil"
"""The Helm release and its namespace, as the README's quickstart names them."""


class MissedBoundError(Exception):
    """A step took longer than it may, or rebalanced where it must not."""


def main(argv: Sequence[str]) -> int:
    """The entry point `vigil.commands: demo` (dev/pyproject.toml): `vigil demo`, no arguments."""
    parser = argparse.ArgumentParser(prog="vigil demo", description="the whole story on the real local stack")
    parser.parse_args(list(argv))
    return run()


def run() -> int:
    state = paths.cache_dir() / "demo"
    started = time.monotonic()
    subprocess.run(["rm", "-rf", str(state)], check=False)  # a previous demo's state (its stack is down)
    try:
        _say("1. building vigil's images (cached), starting Kafka, a Kubernetes control plane and a real node ...")
        archives = images.archives(progress=lambda line: _say(f"   {line}"))
        stack.up(state, archives=archives, progress=lambda line: _say(f"   {line}"))
        kafka = KafkaCluster.load(state)
        cluster = KubeCluster.load(state)
        if kafka is None or cluster is None:
            raise DevError(f"the stack in {state} did not come up")
        loader: Any = config
        kube = Kube(cluster, loader.new_client_from_config(config_file=str(cluster.kubeconfig)))
        events_topic = clients.create_topic(kafka.connection(), "vigil-events", partitions=3)
        kube.apply(crd.load())
        wait_for(lambda: _served(kube), timeout=30, what="the ConsumerGroup CRD served")
        kube.create_namespace(RELEASE)
        tools = Tools.from_binaries(cluster.binaries, cluster.kubeconfig, state / "helm-home")
        installed = install_operator(kube, tools, RELEASE, namespace=RELEASE, events_topic=events_topic)
        _say(f"   helm install {RELEASE} charts/vigil: operator pod {installed.replica().pod} running")
        _story(kube, kafka, events_topic, state)
        _say(f"done in {time.monotonic() - started:.0f}s")
        return 0
    except (DevError, WaitTimeoutError, MissedBoundError) as exc:
        print(f"vigil demo: {exc}", file=sys.stderr)
        return 1
    finally:
        stopped = stack.down(state)
        _say(f"stack down ({', '.join(stopped) or 'nothing was running'}); logs kept in {state}")


def _story(kube: Kube, kafka: KafkaCluster, events_topic: str, state: Path) -> None:
    spec = {
        "liveness": {"stallTimeoutSeconds": STALL_TIMEOUT, "action": "restart", "bridge": {"enabled": True}},
        "restart": {"strategy": "Coordinated", "maxRestartSeconds": 90},
    }
    _say(f"2. a static group of {REPLICAS} pods (StatefulSet orders, OnDelete), session {SESSION_MS // 1000}s,"
         f" apps taking {STARTUP}s to start, stall timeout {STALL_TIMEOUT}s, action restart, bridging on")  # fmt: skip
    s = ConsumerSet(kube, kafka, replicas=REPLICAS, membership="static", session_ms=SESSION_MS,
                    partitions=PARTITIONS, spec=spec, env={"STARTUP_DELAY_SECONDS": str(STARTUP)},
                    on_delete=True)  # fmt: skip
    producing = Producing(s, interval=1.0)
    try:
        members = s.mapped(REPLICAS, timeout=180)
        pods = kube.core.list_namespaced_pod(s.namespace).items
        sidecars = sum(1 for p in pods for c in [*(p.spec.init_containers or []), *p.spec.containers]
                       if c.name == SIDECAR_NAME)  # fmt: skip
        _say(f"   namespace {s.namespace}: {len(pods)} pods, {sidecars} with the injected sidecar; kubectl get kcg:")
        kubectl = [kube.cluster.binaries["kubectl"], "--kubeconfig", str(kube.kubeconfig)]
        shown = subprocess.run([*kubectl, "get", "kcg", "-n", s.namespace], capture_output=True, text=True, timeout=30,
                               check=False)  # fmt: skip
        for line in (shown.stdout or shown.stderr).splitlines():
            print(f"   | {line}", flush=True)
        for pod, member in sorted(members.items()):
            print(f"   {pod}: member {member['memberId']}", flush=True)
        _stall(kube, kafka, s)
        _rollout(kube, kafka, s)
    finally:
        producing.stop()
        s.close()
    _report(kafka, events_topic, state)


def _stall(kube: Kube, kafka: KafkaCluster, s: ConsumerSet) -> None:
    victim = f"{s.name}-1"
    before = generations(kafka, s.group)
    pod = kube.wait_ready(s.namespace, victim, timeout=60)
    restarts = _restarts(pod)
    _say(f"3. {victim}'s app stops polling (POST /stall); librdkafka keeps heartbeating, so stock Kafka never"
         " notices ...")  # fmt: skip
    urllib.request.urlopen(urllib.request.Request(f"http://{pod['status']['podIP']}:8080/stall", method="POST"),
                           timeout=5).close()  # fmt: skip
    stalled = time.monotonic()
    wait_for(s.status, lambda st: st.get("stalledCount") == 1, timeout=STALL_TIMEOUT + 20, interval=0.5,
             what=f"{victim} reported stalled by its sidecar")  # fmt: skip
    _say(f"   its sidecar reported the stall after {time.monotonic() - stalled:.0f}s (no poll for {STALL_TIMEOUT}s);"
         " it now fails the app's liveness probe (/v1/probe/app) ...")  # fmt: skip
    bound = STALL_TIMEOUT + 60  # the stall timeout, the probe's failure threshold, the restart
    wait_for(lambda: _restarts(kube.pod(s.namespace, victim)), lambda n: n > restarts, timeout=bound, interval=0.5,
             what=f"{victim}'s app container restarted by its failing liveness probe")  # fmt: skip
    _say(f"   the app container restarted {time.monotonic() - stalled:.0f}s after the stall; its sidecar heartbeats"
         " for the member meanwhile ...")  # fmt: skip
    wait_for(lambda: _consumed(kube, s.namespace, victim), lambda n: n > 0, timeout=STARTUP + 60, interval=0.5,
             what=f"{victim}'s restarted app consuming")  # fmt: skip
    back = time.monotonic() - stalled
    after = generations(kafka, s.group)
    _say(f"   {victim} consuming again {back:.0f}s after the stall; generations {before[-1:]} -> {after[-1:]}"
         f" ({len(after) - len(before)} rebalances: the restart was bridged)")  # fmt: skip
    if len(after) != len(before):
        raise MissedBoundError(f"the stall's restart rebalanced the group: generations {before} -> {after}")


def _rollout(kube: Kube, kafka: KafkaCluster, s: ConsumerSet) -> None:
    before = generations(kafka, s.group)
    _say("4. a template change (a new StatefulSet revision): the operator restarts the pods one by one, highest"
         " ordinal first, bridging each member's heartbeats; `vigil rollout status` waits:")  # fmt: skip
    patch = {"spec": {"template": {"metadata": {"annotations": {"demo.vigil.dev/revision": str(time.time())}}}}}
    kube.apps.patch_namespaced_stateful_set(s.name, s.namespace, patch)
    started = time.monotonic()
    waited = subprocess.run(
        [sys.executable, "-m", "vigil_cli", "rollout", "status", s.name, "-n", s.namespace, "--timeout", "300",
         "--kubeconfig", str(kube.kubeconfig)],
        capture_output=True, text=True, timeout=330, check=False,
    )  # fmt: skip
    for line in waited.stdout.splitlines():
        print(f"   | {line}", flush=True)
    if waited.returncode != 0:
        raise MissedBoundError(f"the rollout did not complete: {waited.stderr.strip() or waited.stdout.strip()}")
    after = generations(kafka, s.group)
    _say(f"   {REPLICAS} pods restarted in {time.monotonic() - started:.0f}s; generations {before[-1:]} ->"
         f" {after[-1:]} ({len(after) - len(before)} rebalances; stock, each {STARTUP}s restart outlasts the"
         f" {SESSION_MS // 1000}s session and rebalances the group)")  # fmt: skip
    if len(after) != len(before):
        raise MissedBoundError(f"the coordinated rollout rebalanced: generations {before} -> {after}")


def _report(kafka: KafkaCluster, events_topic: str, state: Path) -> None:
    out = state / "report"
    logs = [str(kafka.server_log(node.node_id)) for node in kafka.nodes]
    _say("5. the report job over everything above (__consumer_offsets, the events topic, the broker's log) ...")
    from vigil_spark import session  # noqa: PLC0415 - imports pyspark: only this step needs it

    jars = spark_install.ensure_jars(progress=lambda line: _say(f"   {line}"))  # the job has no default jars
    env = os.environ | kafka.connection().to_env() | {session.JARS_ENV: str(jars)}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "vigil_spark", "--out", str(out), "--cluster", "demo", "--master", "local[2]",
         "--events-topic", events_topic, "--broker-logs", *logs],
        capture_output=True, text=True, timeout=600, check=False, env=env,
    )  # fmt: skip
    for line in done.stdout.splitlines():
        print(f"   | {line}", flush=True)
    if done.returncode != 0:
        raise MissedBoundError(f"the report failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    html = out / "report.html"
    if not html.is_file():
        raise MissedBoundError(f"the report wrote no {html}")
    _say(f"   report in {time.monotonic() - started:.0f}s: open {html}")
    found = re.search(r'<p id="prevented">(.*?)</p>', html.read_text())
    if found is not None:  # the report's own sentence, as a manager would read it
        _say(f"   what vigil prevented: {re.sub(r'<[^>]+>', '', found.group(1))}")


def _restarts(pod: dict[str, Any] | None) -> int:
    app = container_status(pod, "app") or {}
    return int(app.get("restartCount") or 0)


def _consumed(kube: Kube, namespace: str, pod: str) -> int:
    """Records the pod's app consumed since it started (its control endpoint); 0 while it is not up."""
    ip = ((kube.pod(namespace, pod) or {}).get("status") or {}).get("podIP")
    try:
        with urllib.request.urlopen(f"http://{ip}:8080/whoami", timeout=2) as response:
            return int(json.loads(response.read()).get("consumed") or 0)
    except (OSError, ValueError):
        return 0


def _served(kube: Kube) -> bool:
    try:
        kube.custom.list_cluster_custom_object(*CG)
    except Exception:  # noqa: BLE001 - not served yet (404) or the apiserver still settling
        return False
    return True


def _say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)
