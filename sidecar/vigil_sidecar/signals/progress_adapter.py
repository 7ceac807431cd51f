"""The progress signal as watchdog observations (pure): a member judged by its commits looks like an app that beacons.

Why this reuses the watchdog unchanged: the watchdog acts when its poll timer runs out, and every guardrail (identity
proof, Stable view, cooldown, budget, one action per silence, idle members never evicted) hangs off that timer. So
the adapter speaks the beacon's language: while the progress rules find the member OK (or SUSPENDED, or only
NO_COMMITS: never a reason to act), it emits a synthetic `Beacon` at every check, which restarts the poll timer as a
real poll would. Once the rules say STALL or STOP it goes silent, and the watchdog's own stall timer expires one
stall timeout later, exactly as for an app that stopped polling. The cost is latency: the rules need a stall timeout
to prove a stall, then the watchdog waits its own (its `stall_timeout` may be set lower in progress mode).

The beacon carries generation -1 ("unknown": the watchdog then never uses it) and `app_time = now`; the member id
and instance id are the ones the caller proved are this pod's, so the watchdog's identity check agrees.
"""

from dataclasses import dataclass, field
from typing import Final

from vigil_core.kafka.model import MemberView, TopicPartitionRef
from vigil_sidecar.watchdog.progress_rules import MemberProgress, ProgressStatus
from vigil_sidecar.watchdog.state import Beacon

UNKNOWN_GENERATION: Final = -1


@dataclass(frozen=True)
class NoCommits:
    """A finding for a human, never an action: data waited for N stall timeouts and no commit was ever seen (the app
    commits elsewhere, only at shutdown, or not at all)."""

    member_id: str
    partitions: tuple[TopicPartitionRef, ...]

    @property
    def message(self) -> str:
        listed = ", ".join(str(tp) for tp in self.partitions)
        return f"Member {self.member_id!r} has never committed on {listed} while data waited: progress unknown"


ProgressOutput = Beacon | NoCommits


@dataclass(frozen=True)
class AdapterState:
    member_id: str | None = None
    reported: frozenset[TopicPartitionRef] = field(default_factory=frozenset)
    """Partitions already named in a NoCommits finding (named again only after they leave that status)."""


def adapt(
    state: AdapterState, progress: MemberProgress, member: MemberView, now: float
) -> tuple[AdapterState, list[ProgressOutput]]:
    """One check's judgement of `member` → what the watchdog and the operator hear about it."""
    reported = state.reported if state.member_id == member.member_id else frozenset()
    no_commits = frozenset(tp for tp, status, _ in progress.partitions if status is ProgressStatus.NO_COMMITS)
    out: list[ProgressOutput] = []
    new = no_commits - reported
    if new:
        out.append(NoCommits(member.member_id, tuple(sorted(new))))
    if not progress.status.stalled:
        out.append(
            Beacon(
                member_id=member.member_id,
                generation=UNKNOWN_GENERATION,
                instance_id=member.instance_id,
                assigned_partitions=len(member.assignment),
                app_time=now,
            )
        )
    return AdapterState(member.member_id, no_commits), out
