"""One `vigil report` run at a time per output directory.

Runs on one output share its checkpoints and tables: a second run at the same time replays the same micro-batches
into the same partitions, and each fails reading what the other is rewriting (seen when the chart's schedule fired
beside a run started by hand). The first run writes `<out>/run.lock` naming itself; a run that finds it skips, unless
the holder is older than the longest a run may take (a killed run leaves its lock behind). Pure: the clock, the
holder's name and the file I/O are the caller's.
"""

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

LOCK_NAME: Final = "run.lock"


@dataclass(frozen=True)
class Holder:
    """The run that holds the lock: who (pod or host, and pid) and since when (UTC)."""

    who: str
    since: datetime

    def encode(self) -> str:
        return json.dumps({"who": self.who, "since": self.since.isoformat()})


def decode(text: str) -> Holder | None:
    """The holder written by `encode`, or None for anything else (a torn or foreign file: nobody holds it)."""
    try:
        found = json.loads(text)
        since = datetime.fromisoformat(found["since"])
        who = found["who"]
    except (ValueError, TypeError, KeyError):
        return None
    if not isinstance(who, str) or since.tzinfo is None:
        return None
    return Holder(who, since)


def is_stale(holder: Holder | None, now: datetime, stale_after: timedelta) -> bool:
    """Whether a run may take the lock over: nobody readable holds it, or the holder started `stale_after` ago."""
    return holder is None or now - holder.since >= stale_after


def busy(where: str, holder: Holder, now: datetime, stale_after: timedelta) -> str:
    """The one line of a run that skips."""
    age = max(now - holder.since, timedelta(0))
    left = max(stale_after - age, timedelta(0))
    return (
        f"skipped: another run ({holder.who}, started {holder.since:%Y-%m-%dT%H:%M:%SZ}, {_minutes(age)} ago) holds "
        f"{where}; runs on one output must not overlap. It is taken over in {_minutes(left)} (--lock-stale-after), "
        "or delete it once that run is gone"
    )


def _minutes(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    return f"{seconds // 60} min" if seconds >= 60 else f"{seconds} s"
