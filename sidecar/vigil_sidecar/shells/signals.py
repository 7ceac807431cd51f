"""The signals that stand in for the app's beacons: "progress" (the group's committed offsets, judged by
`ProgressSampler` and `progress_adapter`) and "stats" (librdkafka's statistics the app forwards, judged by
`signals.stats`). Either becomes synthetic beacons through the same path as the app's own. Their apps send no
member id: this pod's member is proven from the group's description by Core's identity rules (`_pods_member`,
one proof for both). Owns the sampler, the adapter's and the stats judge's state, the member proven."""

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable

from vigil_core import identity
from vigil_core.kafka.group_client import GroupClientError
from vigil_core.kafka.model import GroupView, MemberView
from vigil_core.kafka.outcomes import Api
from vigil_core.liveness import Signal
from vigil_sidecar.shells.common import Background, Shared, Shell
from vigil_sidecar.signals import stats as stats_signal
from vigil_sidecar.signals.progress import ProgressSampler
from vigil_sidecar.signals.progress_adapter import UNKNOWN_GENERATION, AdapterState, NoCommits, ProgressOutput, adapt
from vigil_sidecar.watchdog.state import Beacon

log = logging.getLogger("vigil.sidecar")


class Signals(Shell):
    def __init__(self, shared: Shared, *, beacon: Callable[[Beacon, str], None]) -> None:
        super().__init__(shared)
        self.beacon = beacon
        """Where a synthetic beacon goes (the sidecar's own input, as the app's beacons), with its transport."""
        self._sampler: ProgressSampler | None = None
        self._adapter = AdapterState()
        self._stats = stats_signal.StatsState()
        self._stats_progressed = False
        """A forwarded statistics document counted as progress since the last check (the stats signal)."""
        self._stats_member: tuple[int, Beacon] | None = None
        """The member proven this pod's, by the rebalance count it was found under (found again after a change)."""

    def start(self, background: Background) -> None:
        """The configured signal's loop (none for beacons: the app sends them)."""
        if self.settings.signal is Signal.PROGRESS:
            background.start(self._progress_loop())
        if self.settings.signal is Signal.STATS:
            background.start(self._stats_loop())

    def _pods_member(self, source: str) -> tuple[GroupView, MemberView] | None:
        """On the worker: the group as described now and this pod's member in it, proven by Core's identity rules
        (instance id, then client.id == pod name); None when none is or Kafka did not answer, said once per
        `source`."""
        try:
            view = self.worker.describe(self.settings.group_id)
        except GroupClientError as exc:
            self.said.once(source, f"{source}: {exc}")
            return None
        except (ConnectionError, OSError) as exc:
            self.said.once(source, f"{source}: Kafka unreachable: {exc}")
            return None
        self.metrics.requests.labels(Api.DESCRIBE_GROUP.value, "NONE").inc()
        observed = [identity.ObservedMember(m.member_id, m.instance_id, m.client_id, m.host) for m in view.members]
        match = identity.find_member(observed, identity.PodIdentity(self.settings.pod_name, self.settings.instance_id))
        if isinstance(match, identity.NoMatch):
            self.said.once(source, f"{source}: no member of the group is this pod's: {match.reason}")
            return None
        member = view.member(match.member.member_id)
        return None if member is None else (view, member)

    # -- the progress signal: committed offsets instead of beacons ---------------------------------------------
    async def _progress_loop(self) -> None:
        """Each check: judge the member's progress on the worker; while it progresses, the adapter's synthetic
        beacons keep the watchdog's stall timer from expiring, exactly as the app's own beacons would."""
        while True:
            for item in await self.worker.run(self._progress_check):
                if isinstance(item, NoCommits):
                    self.metrics.alerts.labels("no-commits").inc()
                    log.warning("no-commits: %s", item.message)
                else:
                    self.beacon(item, "progress")
            await asyncio.sleep(self.settings.check_interval)

    def _progress_check(self) -> list[ProgressOutput]:
        found = self._pods_member("progress")
        if found is None:
            return []
        view, member = found
        try:
            if self._sampler is None:
                self._sampler = ProgressSampler(
                    self.worker.client(), self.worker.connection, self.settings.group_id,
                    pod_name=self.settings.pod_name,
                )  # fmt: skip
            now = time.monotonic()
            progress = self._sampler.check(view, member, now, stall_timeout=self.settings.stall_timeout_seconds)
            self._count_progress_requests(self._sampler)
            self._adapter, out = adapt(self._adapter, progress, member, now)
        except GroupClientError as exc:
            self.said.once("progress", f"progress: {exc}")
            return []
        except (ConnectionError, OSError) as exc:
            self.said.once("progress", f"progress: Kafka unreachable: {exc}")
            return []
        self.said.over("progress")
        return out

    def _count_progress_requests(self, sampler: ProgressSampler) -> None:
        """What the sampler sent (the footprint benchmark; the describe is counted where it is sent)."""
        sent = sampler.last_requests
        requests = self.metrics.requests
        requests.labels(Api.OFFSET_FETCH.value, "NONE").inc(sent.offset_fetch)
        requests.labels(Api.LIST_OFFSETS.value, "NONE").inc(sent.list_offsets)
        requests.labels("Fetch", "NONE").inc(sent.probes)

    # -- the stats signal: librdkafka's statistics forwarded by the app ---------------------------------------
    def stats(self, doc: stats_signal.StatsDoc) -> stats_signal.Verdict:
        """A forwarded statistics document: judged at once (no broker request); a progressing one becomes a
        synthetic beacon at the next check, through the same path as the progress signal's."""
        self._stats, verdict = stats_signal.judge(
            self._stats, doc, time.monotonic(), stall_timeout=self.settings.stall_timeout_seconds
        )
        if verdict is stats_signal.Verdict.FIRST:
            self._stats_member = None  # a restarted app is a new member: prove it again
        if verdict.progressed:
            self._stats_progressed = True
        return verdict

    async def _stats_loop(self) -> None:
        while True:
            if self._stats_progressed and self._stats.last is not None:
                self._stats_progressed = False
                beacon = await self.worker.run(self._stats_member_beacon, self._stats.last)
                if beacon is not None:
                    self.beacon(dataclasses.replace(beacon, app_time=time.monotonic()), "stats")
            await asyncio.sleep(self.settings.check_interval)

    def _stats_member_beacon(self, doc: stats_signal.StatsDoc) -> Beacon | None:
        """This pod's member as a beacon; one describe per assignment change, none while the rebalance count
        stays."""
        if self._stats_member is not None and self._stats_member[0] == doc.rebalance_cnt:
            return self._stats_member[1]
        found = self._pods_member("stats")
        if found is None:
            return None
        _, member = found
        self.said.over("stats")
        beacon = Beacon(
            member_id=member.member_id,
            generation=UNKNOWN_GENERATION,
            instance_id=member.instance_id,
            assigned_partitions=len(member.assignment),
            app_time=0.0,
        )
        self._stats_member = (doc.rebalance_cnt, beacon)
        return beacon

    def close(self) -> None:
        if self._sampler is not None:
            self._sampler.close()
