"""When a ConsumerGroup is resynced, and when a resync gives way: one loop per ConsumerGroup, stopped by kopf.

kopf pauses a replica when a peer with a higher priority is alive (peering), stops it when the ConsumerGroup is
deleted or the operator exits. It tells only daemons and timers (their stop flag); handlers of changes and events
run on while paused, for every event that reached the replica before its watch streams closed. So every resync runs
in the ConsumerGroup's loop (a kopf daemon), and a spec change or a pod's event only asks it for one.

- No resync starts once the loop is asked to stop, whatever the reason (paused, deleted, exiting).
- The first resync runs at once (the group is new, or the replica starts or resumes); a requested one at once
  after the one running; otherwise one `interval` after the last ended.
- A resync asked to stop gives way at its next step: its waits (its turn, a Secret, the broker) are abandoned,
  and no step begins — a member removal, a rollout step, the status write with its Events, the budget Lease, the
  snapshot on the events topic. A step already begun ends (a removal's Event, a rollout step's pod deletion after
  its persisted bridge): the replica that acts next reads a consistent status.

Pure: (stop reason, requested, when the last resync ended, interval, now) → the loop's next move.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Resync:
    why: str
    """"first", "requested" or "interval"."""


@dataclass(frozen=True)
class Wait:
    seconds: float
    """At most this long, unless a resync is requested or the loop is asked to stop first."""


@dataclass(frozen=True)
class End:
    why: str
    """The stop reason, as kopf names it (e.g. "operator pausing")."""


Move = Resync | Wait | End


def next_move(*, stopping: str | None, requested: bool, last_ended: float | None, interval: float,
              now: float) -> Move:  # fmt: skip
    """The loop's next move. `stopping`: kopf's stop reason, None while not asked to stop; `requested`: a spec change
    or a pod's event asked for a resync; `last_ended`: when the last resync ended (None: none yet), on `now`'s
    clock."""
    if stopping is not None:
        return End(stopping)
    if last_ended is None:
        return Resync("first")
    if requested:
        return Resync("requested")
    due = last_ended + interval
    if now >= due:
        return Resync("interval")
    return Wait(due - now)


def may_begin_step(*, stopping: str | None) -> bool:
    """Whether a resync may begin its next step (act or write). Once asked to stop, for any reason, it begins none:
    paused, another replica acts on the same group; deleted, the group is gone; exiting, the next operator resyncs."""
    return stopping is None


def stop_reason(reason: object) -> str:
    """kopf's stop reason (a flag enum member, or several) as words: OPERATOR_PAUSING → "operator pausing"."""
    name = getattr(reason, "name", None) or str(reason).rsplit(".", 1)[-1]
    return name.lower().replace("_", " ").replace("|", ", ")
