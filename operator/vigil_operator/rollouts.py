"""Carries out coordinated restarts (domain.rollout): reads a pod's member from its sidecar, persists it with a
bridge in status, deletes the pod, and heartbeats for the member until the replacement's app takes it back.

Bridges run on Unix time (their state is persisted in `status.rollout.bridge`): an operator that restarts mid-step
finds the state in status and resumes the bridge (`Resumed`: an answer that was in flight is forgotten), before
the member's session timeout if it restarts quickly. Each bridge has its own Kafka client on its own thread.
"""

import asyncio
import json
import logging
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from vigil_core import rules
from vigil_core.bridge import engine as bridge
from vigil_core.bridge_runner import Answer, BridgeRequest, BridgeRunner, send_request, unanswered
from vigil_core.kafka.group_client import GroupClient
from vigil_core.kafka.model import GroupView
from vigil_core.kafka.security import KafkaConnection
from vigil_core.liveness import CLIENT_DEFAULT_HEARTBEAT_SECONDS
from vigil_core.sidecar_contract import STATUS_PATH, StatusMember
from vigil_operator.domain.spec import ConsumerGroupSpec

log = logging.getLogger(__name__)


class StepRefusedError(Exception):
    """A step cannot begin (one line: why); the rollout pauses with it."""


@dataclass
class _Running:
    runner: BridgeRunner
    task: "asyncio.Task[None]"
    worker: ThreadPoolExecutor
    client: list[GroupClient] = field(default_factory=list)
    ended: str | None = None
    """The engine's outcome once it ended."""


class Rollouts:
    def __init__(self) -> None:
        self._bridges: dict[str, _Running] = {}
        """Per ConsumerGroup uid: the bridge of its current step."""
        self.bridges_started = 0

    def outcome(self, uid: str) -> str | None:
        running = self._bridges.get(uid)
        return None if running is None else running.ended

    def observe(self, uid: str, view: GroupView) -> None:
        """A describe taken anyway may show the member replaced before a heartbeat's answer does."""
        running = self._bridges.get(uid)
        if running is not None and running.ended is None:
            running.runner.observe(bridge.Described(view))

    async def member_of(self, sidecar_url: str | None, pod: str) -> bridge.Member:
        """The member the pod's sidecar proved, with the generation its app last reported."""
        if sidecar_url is None:
            raise StepRefusedError(f"{pod} has no sidecar address: its member's generation cannot be read")
        try:
            body = await asyncio.to_thread(_get_json, f"{sidecar_url}{STATUS_PATH}")
        except (OSError, ValueError) as exc:
            raise StepRefusedError(f"{pod}: its sidecar did not answer {STATUS_PATH} ({exc})") from None
        member = StatusMember.from_status(body)
        if member is None or not member.member_id or not member.instance_id or member.generation is None:
            raise StepRefusedError(
                f"{pod}: its sidecar knows no static member with a generation ({body.get('member') or 'none'})"
            )
        return bridge.Member(member.member_id, member.generation, member.instance_id)

    def begin(self, spec: ConsumerGroupSpec, member: bridge.Member, now: float) -> bridge.BridgeState:
        """The bridge state for a step (persisted by the caller before the pod is deleted)."""
        heartbeat = spec.client.heartbeat_interval_ms
        config = bridge.BridgeConfig(
            heartbeat_interval=heartbeat / 1000 if heartbeat else CLIENT_DEFAULT_HEARTBEAT_SECONDS,
            max_bridge_seconds=spec.restart.max_restart_seconds,
            on_foreign_rebalance=spec.liveness.bridge.on_foreign_rebalance,
            session_timeout=(spec.client.session_timeout_ms or rules.CLIENT_DEFAULTS[rules.SESSION]) / 1000,
        )
        started = bridge.start(spec.group_id, member, proof="pod-deleted", earlier_ends=(), now=now, config=config)
        if isinstance(started, bridge.Refused):
            raise StepRefusedError(started.message)
        return started

    def run(self, uid: str, state: bridge.BridgeState, connection: KafkaConnection, *, resumed: bool) -> None:
        """Heartbeat for the member from now on (a resumed state first forgets what was in flight)."""
        self.stop(uid)
        worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vigil-rollout-bridge")
        clients: list[GroupClient] = []
        interval = state.config.heartbeat_interval

        def request(req: BridgeRequest) -> Answer:
            if not clients:
                try:
                    clients.append(GroupClient(connection, client_id="vigil-operator-bridge", max_attempts=2,
                                               request_timeout=interval))  # fmt: skip
                except (ConnectionError, OSError) as exc:
                    log.warning("rollout bridge: %s", exc)
                    return unanswered(req)
            return send_request(clients[0], req)

        async def send(req: BridgeRequest) -> Answer:
            return await asyncio.get_running_loop().run_in_executor(worker, request, req)

        runner = BridgeRunner(state, send, clock=time.time)
        if resumed:
            runner.observe(bridge.Resumed())

        async def drive() -> None:
            ended = await runner.run()
            running.ended = ended.outcome
            log.warning("rollout bridge of member %s ended: %s (%s)", state.member_id, ended.outcome, ended.reason)

        task = asyncio.create_task(drive())
        running = _Running(runner, task, worker, clients)
        self._bridges[uid] = running
        self.bridges_started += 1
        log.warning("rollout: bridging member %s (instance %s, generation %d) every %gs",
                    state.member_id, state.instance_id, state.generation, interval)  # fmt: skip

    def running(self, uid: str) -> bool:
        return uid in self._bridges

    def state(self, uid: str) -> bridge.BridgeState | None:
        running = self._bridges.get(uid)
        return None if running is None else running.runner.state

    def stop(self, uid: str) -> None:
        running = self._bridges.pop(uid, None)
        if running is None:
            return
        running.task.cancel()
        for made in running.client:
            running.worker.submit(made.close)
        running.worker.shutdown(wait=False)

    def close(self) -> None:
        for uid in list(self._bridges):
            self.stop(uid)


def _get_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=3) as response:  # noqa: S310 - the pod's own sidecar, http by design
        found = json.loads(response.read())
    if not isinstance(found, dict):
        raise ValueError("not a JSON object")
    return found
