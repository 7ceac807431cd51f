"""`vigil demo` / `make demo`: the story so far, on real parts.

Starts the local Kafka, runs a real 3-member confluent-kafka group on a real topic, prints the group as the
broker describes it and the coordinator's own log line for its last rebalance, and stops the stack. Later
issues grow this into the whole story (stall, eviction, bridging, report).
"""

import re
import shutil
import sys
import time

from vigil_dev import paths, stack
from vigil_dev.errors import DevError
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.waiting import WaitTimeoutError, wait_for


def run() -> int:
    state = paths.cache_dir() / "demo"
    shutil.rmtree(state, ignore_errors=True)
    try:
        stack.up(state, kube=False, progress=_say)  # the story so far needs no Kubernetes (yet)
        kafka = KafkaCluster.load(state)
        assert kafka is not None
        _story(kafka)
        return 0
    except (DevError, WaitTimeoutError) as exc:
        print(f"vigil demo: {exc}", file=sys.stderr)
        return 1
    finally:
        stopped = stack.down(state)
        _say(f"stack down ({', '.join(stopped) or 'nothing was running'}); logs kept in {state / 'logs'}")


def _story(kafka: KafkaCluster) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, "orders", partitions=3)
    group = "billing"
    _say(f"topic {topic!r} (3 partitions); starting 3 consumers in group {group!r} ...")
    members = clients.start_group(conn, group, [topic], size=3)
    try:
        clients.produce(conn, topic, [f"order-{i}" for i in range(300)])
        wait_for(
            lambda: sum(len(m.consumed) for m in members),
            lambda n: n >= 300,
            timeout=60,
            what="300 messages consumed",
        )
        _say("300 messages produced and consumed; the group as the broker describes it:")
        desc = clients.describe_group(conn, group)
        print(f"  group       {desc.group_id}")
        print(f"  state       {desc.state.name}   type {desc.type.name}   assignor {desc.partition_assignor}")
        print(f"  coordinator node {desc.coordinator.id} ({desc.coordinator.host}:{desc.coordinator.port})")
        for m in sorted(desc.members, key=lambda m: m.client_id):
            parts = ",".join(f"{tp.topic}-{tp.partition}" for tp in m.assignment.topic_partitions)
            consumed = next(len(x.consumed) for x in members if x.client_id == m.client_id)
            print(f"  member      {m.client_id:12} {m.member_id}  host {m.host}  owns {parts}  consumed {consumed}")
        pattern = re.compile(rf".*Stabilized group {group} generation \d+ with \d+ members.*")
        lines = pattern.findall(kafka.server_log(1).read_text())
        if lines:
            _say(f"the coordinator's log ({kafka.server_log(1)}):")
            print(f"  {lines[-1].strip()}")
    finally:
        for member in members:
            member.close()


def _say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)
