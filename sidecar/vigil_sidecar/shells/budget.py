"""The eviction budget (budget mode "lease"): this pod's poll age kept in the group's ledger, and a permit asked
for before each eviction (vigil_core.budget: the ledger decides, `verdict` says what a refusal means). Owns the
Lease, or why it cannot be used (then the sidecar only alerts)."""

import asyncio
import logging
import os
import time
from collections.abc import Callable

from vigil_core import events
from vigil_core.budget import ledger, verdict
from vigil_core.budget.lease_api import BudgetPolicy, BudgetUnavailable, LeaseApi, publish, request_permit
from vigil_core.kafka.group_client import GroupClientError
from vigil_core.kafka.model import GroupView
from vigil_core.kafka.outcomes import Api, Outcome
from vigil_sidecar.shells.common import Background, Shared, Shell
from vigil_sidecar.watchdog.state import Evict

log = logging.getLogger("vigil.sidecar")


class Budget(Shell):
    def __init__(self, shared: Shared, *, poll_age: Callable[[], float | None]) -> None:
        super().__init__(shared)
        self.poll_age = poll_age
        """This pod's poll age now (None: the app has not polled yet)."""
        self._lease: LeaseApi | None = None
        self.problem: BudgetUnavailable | None = None
        """Why the Lease cannot be used (found at start): the sidecar only alerts."""
        self._published: ledger.Entry | None = None

    def open(self, background: Background) -> None:
        """The group's Lease from the pod's service account; this pod's poll age published from now on."""
        name = self.settings.budget_lease or ledger.lease_name(self.settings.group_id)
        answer = LeaseApi.in_cluster(
            name, namespace=self.settings.namespace, env=os.environ, account_dir=self.settings.service_account_dir
        )
        if isinstance(answer, BudgetUnavailable):
            self.problem = answer
            log.warning("eviction budget unavailable (%s): %s; vigil will only alert", answer.cause, answer.message)
            return
        self._lease = answer
        background.start(self._publish_loop(answer))

    def status(self) -> str:
        """The budget as /v1/status shows it."""
        if self.problem is None:
            return self.settings.budget.value
        return f"unavailable ({self.problem.cause}): alert only"

    def _policy(self) -> BudgetPolicy:
        s = self.settings
        return BudgetPolicy(
            stall_timeout=s.stall_timeout_seconds,
            max_concurrent=s.max_concurrent_evictions,
            cooldown=s.cooldown,
            systemic_percent=s.systemic_stall_percent,
            settle=s.settle_seconds,
        )

    async def _publish_loop(self, lease: LeaseApi) -> None:
        """Keep this pod's poll age in the group's ledger, so peers can count stalls before they evict."""
        stall = self.settings.stall_timeout_seconds
        while True:
            age = self.poll_age()
            if age is not None and ledger.should_publish(self._published, age, stall, time.time()):
                written = await publish(lease, self.settings.pod_name, age, stall_timeout=stall)
                if isinstance(written, ledger.Ledger):
                    self._published = written.members.get(self.settings.pod_name)
                else:
                    self.said.once("budget", f"eviction budget: {written.cause}: {written.message}")
            await asyncio.sleep(self.settings.check_interval)

    async def permit(self, evict: Evict, view: GroupView | None) -> Outcome | None:
        """Ask the group's budget for a permit to evict: None with one (evict now), else the watchdog's answer to
        its Evict (`verdict.answer`: retry later or stop), told as its own cause (alert metric, event, log)."""
        age = self.poll_age() or self.settings.stall_timeout_seconds
        answer: ledger.Permit | ledger.Refusal | BudgetUnavailable
        if self._lease is None:
            assert self.problem is not None
            answer = self.problem
        else:
            member = view.member(evict.member_id) if view is not None else None
            owned = tuple((tp.topic, tp.partition) for tp in member.assignment) if member is not None else ()
            committed = await self.worker.run(self._committed, owned)
            answer = await request_permit(
                self._lease, self.settings.pod_name, evict.member_id, age, self._policy(),
                partitions=owned, committed=committed,
            )  # fmt: skip
        if isinstance(answer, ledger.Permit):
            return None
        self._tell(evict, answer)
        return verdict.answer(answer)

    def _tell(self, evict: Evict, refused: verdict.NoPermit) -> None:
        member = (evict.member_id, evict.instance_id)
        if isinstance(refused, ledger.Refusal) and refused.cause == "poison-suspected":
            partitions = [
                {"topic": m.topic, "partition": m.partition, "committed_offset": m.offset} for m in refused.suspects
            ]
            self.emitter.emit(events.PoisonSuspected, {"partitions": partitions, "message": refused.message},
                              member=member)  # fmt: skip
        if isinstance(refused, ledger.Refusal) and refused.cause == "systemic-stall":
            self.emitter.emit(
                events.SystemicStall,
                {
                    "stalled_members": refused.count.stalled,
                    "members": refused.count.members,
                    "threshold_percent": self.settings.systemic_stall_percent,
                },
            )
        self.metrics.alerts.labels(f"budget-{refused.cause}").inc()
        if verdict.told(refused):
            log.warning("eviction of %s refused (%s): %s", evict.member_id, refused.cause, refused.message)
            self.emitter.emit(
                events.EvictionRefused,
                {"action": "leave-group", "cause": refused.cause, "message": refused.message},
                member=member,
            )

    def _committed(self, owned: tuple[tuple[str, int], ...]) -> dict[tuple[str, int], int]:
        """On the worker: the group's committed offsets of `owned` (the poison-pill guard's evidence); empty when
        unknown."""
        if not owned:
            return {}
        try:
            offsets = self.worker.client().committed_offsets(self.settings.group_id)
        except (GroupClientError, ConnectionError, OSError) as exc:
            log.warning("committed offsets of %s unknown for the poison-pill guard: %s", self.settings.group_id, exc)
            return {}
        self.metrics.requests.labels(Api.OFFSET_FETCH.value, "NONE").inc()
        wanted = set(owned)
        return {(tp.topic, tp.partition): o for tp, o in offsets.items() if (tp.topic, tp.partition) in wanted}
