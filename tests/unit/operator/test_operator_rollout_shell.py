"""The rollout shell (`vigil_operator.shells.rollout`) carrying out the plan against fakes of the API server, the
brokers and the bridges: a step's state is persisted before its pod is deleted, a step that cannot begin pauses the
rollout with one RolloutPaused Event, a KIP-848 group's raised session is restored when the rollout pauses."""

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from vigil_core.bridge import engine as bridge
from vigil_core.kafka.group_client import GroupClientError, GroupTimings
from vigil_core.kafka.model import GroupState, GroupType, GroupView, MemberView
from vigil_core.kafka.outcomes import Api, classify
from vigil_core.kafka.security import KafkaConnection
from vigil_core.rules import BrokerLimits
from vigil_operator.domain import rollout
from vigil_operator.domain.reconcile import GroupFacts, Notice, PodFacts
from vigil_operator.domain.spec import parse_spec
from vigil_operator.domain.status import ConsumerGroupStatus, RolloutPhase
from vigil_operator.k8s.api import KubeError
from vigil_operator.metrics import OperatorMetrics
from vigil_operator.rollouts import Rollouts
from vigil_operator.shells import rollout as shell
from vigil_operator.shells.events import Emitter

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
OLD, NEW = "orders-aaa", "orders-bbb"
CONNECTION = KafkaConnection(bootstrap_servers="127.0.0.1:1")
BODY = {"metadata": {"uid": "cg-uid", "namespace": "shop", "name": "orders", "generation": 3}}


def spec(protocol: str = "classic") -> Any:
    return parse_spec({
        "groupId": "orders", "kafka": {"bootstrapServers": "kafka:9092"},
        "workload": {"kind": "StatefulSet", "name": "orders"}, "membership": "static",
        "restart": {"strategy": "Coordinated", "maxRestartSeconds": 60}, "client": {"groupProtocol": protocol},
    })  # fmt: skip


@dataclass
class FakeKube:
    calls: list[tuple[str, Any]] = field(default_factory=list)
    refuse_delete: bool = False

    async def apply_status(self, namespace: str, name: str, body: dict[str, Any]) -> None:
        self.calls.append(("apply_status", body.get("rollout")))

    async def delete_pod(self, namespace: str, pod: str, uid: str) -> None:
        self.calls.append(("delete_pod", (pod, uid)))
        if self.refuse_delete:
            raise KubeError(f"pods {pod}: forbidden", 403)


@dataclass
class FakeBrokers:
    sessions: list[int | None] = field(default_factory=list)
    refuse_session: bool = False

    async def subscriptions(self, connection: KafkaConnection, group_id: str) -> tuple[str, ...]:
        return ("t",)

    async def group_timings(self, connection: KafkaConnection, group_id: str) -> GroupTimings:
        return GroupTimings(session_ms=45000, heartbeat_ms=5000, session_override_ms=None)

    async def set_group_session(self, connection: KafkaConnection, group_id: str, session_ms: int | None) -> None:
        if self.refuse_session and session_ms is not None:
            raise GroupClientError(classify(Api.DESCRIBE_GROUP, 29), "incrementalAlterConfigs")  # authorization
        self.sessions.append(session_ms)


class FakeBridges(Rollouts):
    def __init__(self) -> None:
        super().__init__()
        self.ran: list[bridge.BridgeState] = []

    async def member_of(self, sidecar_url: str | None, pod: str) -> bridge.Member:
        return bridge.Member("m2", 7, "shop-orders-2")

    def run(self, uid: str, state: bridge.BridgeState, connection: KafkaConnection, *, resumed: bool) -> None:
        self.ran.append(state)


def pods() -> list[PodFacts]:
    return [
        PodFacts(
            f"orders-{i}",
            f"shop-orders-{i}",
            i,
            uid=f"uid-{i}",
            revision=OLD,
            ready=True,
            sidecar_url=f"http://10.0.0.{i}:8080",
        )
        for i in range(3)
    ]


def facts(group_type: GroupType = GroupType.CLASSIC) -> GroupFacts:
    members = tuple(MemberView(f"m{i}", f"shop-orders-{i}", f"orders-{i}", "/10.0.0.1", ()) for i in range(3))
    view = GroupView("orders", GroupState.STABLE, group_type, "range", 1, members)
    return GroupFacts("cluster", view, {}, {}, BrokerLimits())


def roll(kube: FakeKube, brokers: FakeBrokers, bridges: FakeBridges, protocol: str = "classic") -> tuple[
    ConsumerGroupStatus, list[Notice]
]:  # fmt: skip
    posted: list[Notice] = []
    rollouts = shell.RolloutShell(kube, brokers, OperatorMetrics(), Emitter(None), bridges)  # type: ignore[arg-type]
    group_type = GroupType.CONSUMER if protocol == "consumer" else GroupType.CLASSIC
    status = asyncio.run(rollouts.roll(
        BODY, spec(protocol), ConsumerGroupStatus(), rollout.SetFacts("OnDelete", NEW, 3), facts=facts(group_type),
        pods=pods(), connection=CONNECTION, now=NOW, post=posted.append, stop=None,
    ))  # fmt: skip
    return status, posted


def test_a_step_persists_its_bridge_before_it_deletes_the_pod_then_bridges() -> None:
    kube, bridges = FakeKube(), FakeBridges()
    status, posted = roll(kube, FakeBrokers(), bridges)
    assert [n.reason for n in posted] == ["RolloutStarted", "RolloutStep"]
    assert [name for name, _ in kube.calls] == ["apply_status", "delete_pod"]
    persisted = kube.calls[0][1]
    assert (persisted["currentPod"], persisted["oldMemberId"]) == ("orders-2", "m2")
    assert persisted["bridge"]
    assert kube.calls[1][1] == ("orders-2", "uid-2")
    assert [s.member_id for s in bridges.ran] == ["m2"]
    assert status.rollout is not None
    assert (status.rollout.phase, status.rollout.subscribed_before) == (RolloutPhase.ROLLING, ("t",))


def test_a_refused_delete_pauses_the_rollout_once_and_runs_no_bridge() -> None:
    kube, bridges = FakeKube(refuse_delete=True), FakeBridges()
    status, posted = roll(kube, FakeBrokers(), bridges)
    assert [n.reason for n in posted] == ["RolloutStarted", "RolloutPaused"]
    assert posted[-1] == Notice("Warning", "RolloutPaused", "pods orders-2: forbidden")
    assert bridges.ran == []
    assert status.rollout is not None
    assert (status.rollout.phase, status.rollout.message, status.rollout.bridge) == (
        RolloutPhase.PAUSED, "pods orders-2: forbidden", None)  # fmt: skip
    assert status.rollout.old_member_id == "m2"  # what was persisted before the delete was refused


def test_a_kip848_step_raises_the_session_waits_a_heartbeat_then_deletes(monkeypatch: pytest.MonkeyPatch) -> None:
    waited: list[int] = []
    monkeypatch.setattr(rollout, "session_raise_wait", lambda heartbeat_ms: waited.append(heartbeat_ms) or 0.0)
    kube, brokers = FakeKube(), FakeBrokers()
    status, posted = roll(kube, brokers, FakeBridges(), protocol="consumer")
    assert [n.reason for n in posted] == ["RolloutStarted", "RolloutStep"]
    assert brokers.sessions == [60000]  # maxRestartSeconds, within the broker's limits
    assert waited == [5000]  # the group's heartbeat interval
    assert [name for name, _ in kube.calls] == ["apply_status", "apply_status", "delete_pod"]
    assert kube.calls[0][1]["sessionRestore"] == ""  # the original (none: the broker's default) persisted first
    assert status.rollout is not None
    assert (status.rollout.phase, status.rollout.old_member_id) == (RolloutPhase.ROLLING, "m2")


def test_a_kip848_session_that_cannot_be_raised_pauses_and_is_restored() -> None:
    kube, brokers = FakeKube(), FakeBrokers(refuse_session=True)
    status, posted = roll(kube, brokers, FakeBridges(), protocol="consumer")
    assert [n.reason for n in posted] == ["RolloutStarted", "RolloutPaused"]
    assert posted[-1].message.startswith("orders-2: could not raise the group's session timeout to 60000 ms")
    assert brokers.sessions == [None]  # restored as it was (the broker's default) once paused
    assert status.rollout is not None
    assert (status.rollout.phase, status.rollout.session_restore) == (RolloutPhase.PAUSED, None)
    assert "delete_pod" not in [name for name, _ in kube.calls]
