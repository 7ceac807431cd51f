"""What the sidecars said about stalls, folded into "who is stalled now" (pure; fed from the events topic).

A sidecar emits `stall-detected` when it proves a stall and again each cooldown while it lasts (alert mode),
`stall-ended` when the app polls again, `eviction-done` when it removed the member. A report therefore stays
current for `window` after its last repetition; the caller also re-checks it against the broker (the member
must still be in the group) before showing or acting on it — a sidecar's word alone is never enough.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from vigil_core import events


@dataclass(frozen=True)
class StallReport:
    group: str
    member_id: str
    pod: str | None
    namespace: str | None
    since: datetime
    """The first report of this stall."""
    last: datetime
    """The latest repetition."""


@dataclass(frozen=True)
class StallBook:
    reports: Mapping[tuple[str, str], StallReport]
    """(group id, member id) → the open report."""
    ended: Mapping[tuple[str, str], datetime] = field(default_factory=dict)
    """(group id, member id) → the latest end (stall-ended, eviction-done): a detection not after it is stale,
    whatever order the events arrive in (retries, a re-read topic)."""

    def record(self, event: events.Event) -> "StallBook":
        """The book after one event (any other event type leaves it unchanged)."""
        if isinstance(event, events.StallDetected):
            key = (event.group, event.payload.member.member_id)
            end = self.ended.get(key)
            if end is not None and event.time <= end:
                return self
            previous = self.reports.get(key)
            report = StallReport(
                group=event.group,
                member_id=key[1],
                pod=event.pod,
                namespace=event.namespace,
                since=min(previous.since, event.time) if previous else event.time,
                last=max(previous.last, event.time) if previous else event.time,
            )
            return replace(self, reports={**self.reports, key: report})
        if isinstance(event, events.StallEnded | events.EvictionDone):
            key = (event.group, event.payload.member.member_id)
            end = max(event.time, self.ended.get(key, event.time))
            previous = self.reports.get(key)
            reports = self.reports
            if previous is not None and previous.last <= end:
                reports = {k: v for k, v in self.reports.items() if k != key}
            return replace(self, reports=reports, ended={**self.ended, key: end})
        return self

    def current(self, group: str, present: Iterable[str], now: datetime, window: timedelta) -> tuple[StallReport, ...]:
        """Reports for `group` still repeated within `window` whose member is still in the group."""
        members = set(present)
        return tuple(
            sorted(
                (
                    r
                    for (g, member), r in self.reports.items()
                    if g == group and member in members and now - r.last <= window
                ),
                key=lambda r: r.member_id,
            )
        )

    def forget_before(self, horizon: datetime) -> "StallBook":
        """Drop reports not repeated since `horizon`, and ends older than it (bounded memory)."""
        return replace(
            self,
            reports={k: v for k, v in self.reports.items() if v.last >= horizon},
            ended={k: v for k, v in self.ended.items() if v >= horizon},
        )


EMPTY = StallBook(reports={})
