"""`vigil report` on a known history of one classic group: joins, a graceful leave, a member killed with SIGKILL
(its session expires), a static member restarted within its session (no rebalance), and a stalled member evicted
by a real `vigil sidecar`.

Each generation's cause and member counts must equal the test's own action log AND an independent reading of
the broker log (regexes written here, not vigil's parser): the model is checked against two witnesses that do
not share its code, and a restart that the broker did not count must not be counted by the report either.
"""

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from vigil_core.kafka.security import KafkaConnection
from vigil_dev import ports, procs
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import broker_log, clients, report_cli, static_app
from vigil_dev.testing.sidecar import RunningSidecar, start_sidecar
from vigil_dev.testing.waiting import bound, wait_for
from vigil_sidecar.client import Consumer as BeaconingConsumer

pytestmark = [pytest.mark.integration, pytest.mark.spark]
pytest_plugins = ["vigil_dev.testing.spark_fixtures"]

SESSION_S = int(clients.CONSUMER_DEFAULTS["session.timeout.ms"]) / 1000

#: The broker's reason for a rebalance, by old generation (Kafka 4.1 GroupMetadataManager's wording).
PREPARING = r"Preparing to rebalance group {g} in state \w+ with old generation (\d+) \(reason: (.*?)\)\. \("
#: A static member that rejoined with a new member id: (instance id, its old member id).
STATIC_REJOIN = (
    r"Static member with groupInstanceId=(\S+) and unknown member id joins group {g} in Stable state\. "
    r"Replacing previously mapped member (\S+) with this groupInstanceId\."
)
#: A member that left by LeaveGroup, with the KIP-800 reason its sender gave: (member id, client reason).
LEFT_WITH_REASON = r"Member (\S+) has left group through explicit `LeaveGroup` request; client reason: (.*) \(org\."
#: The test's own reading of a reason, deliberately not vigil's REASON_RULES.
OWN_CAUSES = (("joined", "Adding new member "), ("left", "LeaveGroup"), ("heartbeat-expiry", "heartbeat expiration"))
STALL_S = 6.0


@dataclass(frozen=True)
class Step:
    """One rebalance the test caused: what, and the group's size before and after."""

    cause: str
    before: int
    after: int


def _dynamic_app(conn: KafkaConnection, group: str, topic: str, name: str, state_dir: Path) -> procs.Managed:
    """A dynamic member in its own process (the test pods' consumer app), so SIGKILL is a real crash: no
    LeaveGroup, the broker removes it only when its session expires."""
    marker_key, marker_value = "VIGIL_TEST_HISTORY_APP", str(state_dir / name)
    argv = [sys.executable, "-m", "vigil_testapps.consumerapp", "--group", group, "--topic", topic]
    argv += ["--control-port", str(ports.free_ports(1)[0])]
    env = {"PATH": "/usr/bin:/bin", **conn.to_env(), "KAFKA_CLIENT_ID": name, "VIGIL_POD_IP": "127.0.0.1",
           marker_key: marker_value}  # fmt: skip
    return procs.start(name, argv, pid_file=state_dir / f"{name}.pid", marker=f"{marker_key}={marker_value}",
                       log_file=state_dir / f"{name}.log", env=env)  # fmt: skip


def _own_cause(reason: str) -> str:
    return next((cause for cause, text in OWN_CAUSES if text in reason), f"unclassified: {reason}")


def _static_member_id(conn: KafkaConnection, group: str, instance: str) -> str | None:
    members = clients.describe_group(conn, group).members
    return next((m.member_id for m in members if m.group_instance_id == instance), None)


def test_the_report_equals_the_action_log_and_the_broker_log(
    spark_kafka: SparkSession, kafka: KafkaCluster, tmp_path: Path
) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("history"), partitions=4)
    group = clients.unique("g-history")
    instance = f"{group}-static"
    steps: list[Step] = []

    def rebalanced(step: Step, timeout: float = 60) -> None:
        """Wait until the broker logged the generation this step causes and the group is Stable again."""
        steps.append(step)
        wait_for(lambda: broker_log.generations(kafka, group), lambda g: len(g) == len(steps), timeout=timeout,
                 what=f"generation {len(steps)} ({step.cause})")  # fmt: skip
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == step.after, timeout=60,
                 what=f"{group} Stable with {step.after}")  # fmt: skip

    first, first_open = clients.Member(conn, group, [topic], f"{group}-a").start(), True
    static: procs.Managed | None = None
    crashing: procs.Managed | None = None
    sidecar: RunningSidecar | None = None
    watched: clients.Member | None = None
    try:
        rebalanced(Step("joined", 0, 1))
        static = static_app.start(conn, group, topic, instance, tmp_path, beacon_addr="")
        rebalanced(Step("joined", 1, 2))
        crashing = _dynamic_app(conn, group, topic, f"{group}-k", tmp_path)
        rebalanced(Step("joined", 2, 3))
        first.close()  # LeaveGroup
        first_open = False
        rebalanced(Step("left", 3, 2))
        crashing.kill()  # SIGKILL: no LeaveGroup
        rebalanced(Step("heartbeat-expiry", 2, 1), timeout=bound(SESSION_S, 30))

        # the static member restarted within its session: a new member id, no rebalance
        old_id = _static_member_id(conn, group, instance)
        static.kill()
        static = static_app.start(conn, group, topic, instance, tmp_path, beacon_addr="")
        rejoins = wait_for(lambda: broker_log.broker_lines(kafka, group, STATIC_REJOIN), lambda hits: len(hits) == 1,
                           timeout=bound(SESSION_S), what="the static member's rejoin (broker log)")  # fmt: skip
        assert rejoins[0][1] == (instance, old_id), rejoins
        new_id = wait_for(lambda: _static_member_id(conn, group, instance), lambda m: m not in (None, old_id),
                          timeout=30, what="the static member's new id")  # fmt: skip
        assert clients.stable_members(conn, group) == 1

        # a member watched by a real sidecar stops polling (librdkafka heartbeats on): vigil evicts it
        sidecar = start_sidecar(conn, group, f"{group}-v", tmp_path, stall_timeout_seconds=STALL_S,
                                check_interval_seconds=1, session_timeout_seconds=SESSION_S, budget="none",
                                events_topic="")  # fmt: skip
        watched = clients.Member(
            conn,
            group,
            [topic],
            f"{group}-v",
            consumer_factory=lambda conf: BeaconingConsumer(conf, beacon_addr=sidecar.beacon_addr),
        )
        watched.start()  # fmt: skip
        rebalanced(Step("joined", 1, 2))
        wait_for(lambda: sidecar.get("/v1/status")[1], lambda s: '"member": {' in s, timeout=20,
                 what="the sidecar identifying its member")  # fmt: skip
        evicted_id = watched.member_id
        watched.paused_polling.set()
        rebalanced(Step("evicted-by-vigil", 2, 1), timeout=bound(STALL_S + 1, 10))

        code, lines = report_cli.run_report(conn, kafka, tmp_path / "out", "itest-history")
        assert code == 0, lines
        generations_after_report = broker_log.stabilized(kafka, group)
    finally:
        if first_open:
            first.close()
        for app in (static, crashing):
            if app is not None:
                app.kill()
        if watched is not None:
            watched.close()
        if sidecar is not None:
            sidecar.stop()

    # witness 1: the broker log, read with the test's own regexes
    assert generations_after_report == [(g, s.after) for g, s in enumerate(steps, 1)], "a rebalance nobody caused"
    reasons = {int(old) + 1: reason for _, (old, reason) in broker_log.broker_lines(kafka, group, PREPARING)}
    left_by = {m: why for _, (m, why) in broker_log.broker_lines(kafka, group, LEFT_WITH_REASON)}
    assert evicted_id is not None
    assert left_by[evicted_id].startswith("vigil: no poll for "), left_by

    def own_cause(reason: str) -> str:
        """A LeaveGroup whose members all gave vigil's reason is vigil's eviction."""
        leavers = re.findall(r"request for \((.+?)\) members", reason)
        if leavers and all(left_by.get(m, "").startswith("vigil: ") for m in leavers):
            return "evicted-by-vigil"
        return _own_cause(reason)

    assert {g: own_cause(r) for g, r in reasons.items()} == {g: s.cause for g, s in enumerate(steps, 1)}, reasons
    assert new_id != old_id

    # the model, against both
    model = tmp_path / "out" / "model" / "rebalances" / "parquet"
    rows = sorted((r for r in spark_kafka.read.parquet(str(model)).collect() if r["group"] == group),
                  key=lambda r: r["generation"])  # fmt: skip
    assert [r["gap"] for r in rows] == [False] * len(steps), rows
    got = [(r["generation"], r["cause"], r["members_before"], r["members_after"]) for r in rows]
    assert got == [(g, s.cause, s.before, s.after) for g, s in enumerate(steps, 1)], got
    assert all(r["group_type"] == "classic" for r in rows), rows
    # the killed member's partitions sat idle for its session timeout before the broker noticed: counted
    expired = next(r for r in rows if r["cause"] == "heartbeat-expiry")
    assert expired["undetected_s"] == SESSION_S, expired
    assert expired["unavailable_partition_s"] >= SESSION_S, expired
    assert [r["undetected_s"] for r in rows if r["cause"] != "heartbeat-expiry"] == [None] * (len(rows) - 1), rows

    # the static member's restart is a replacement, not a join: no churn, its old id went by the replacement
    members = tmp_path / "out" / "model" / "members" / "parquet"
    by_id = {r["member_id"]: r for r in spark_kafka.read.parquet(str(members)).collect() if r["group"] == group}
    assert (by_id[new_id]["replaced"], by_id[old_id]["leave_cause"]) == (True, "static-replacement"), by_id
    assert (by_id[new_id]["joins"], by_id[new_id]["replacements"], by_id[new_id]["leaves"]) == (1, 1, 0), by_id


def test_own_regexes_read_the_broker_wording() -> None:
    """The witness regexes themselves, on lines of a Kafka 4.1.1 broker log (from a real run of the test above)."""
    g, tail = "g-history-be60aa63bf", " (org.apache.kafka.coordinator.group.GroupMetadataManager)"
    expired = (f"Preparing to rebalance group {g} in state PreparingRebalance with old generation 4 (reason: removing "
               f"member {g}-k-4f0a8452-f81b-410c-950d-8edf8978d984 on heartbeat expiration.).{tail}")  # fmt: skip
    hit = re.search(PREPARING.format(g=re.escape(g)), expired)
    assert hit is not None
    assert (hit.group(1), _own_cause(hit.group(2))) == ("4", "heartbeat-expiry")
    left = (f"Preparing to rebalance group {g} in state PreparingRebalance with old generation 3 (reason: explicit "
            f"`LeaveGroup` request for ({g}-a-dea8f1fb-e33e-444b-a35a-f474208a2f65) members.).{tail}")  # fmt: skip
    hit = re.search(PREPARING.format(g=re.escape(g)), left)
    assert hit is not None
    assert (hit.group(1), _own_cause(hit.group(2))) == ("3", "left")
    rejoin = (f"Static member with groupInstanceId={g}-static and unknown member id joins group {g} in Stable state. "
              f"Replacing previously mapped member {g}-static-b5395c53 with this groupInstanceId.{tail}")  # fmt: skip
    hit = re.search(STATIC_REJOIN.format(g=re.escape(g)), rejoin)
    assert hit is not None
    assert hit.groups() == (f"{g}-static", f"{g}-static-b5395c53")
