"""Container lifecycle decisions, as the kubelet makes them; pure (every function takes `now`).

A `Record` is what the fakelet knows of one container; events (started, exited, probe result, stop sent)
turn it into a new one, and `plan` says what to do next: start, stop (SIGTERM, SIGKILL after a grace
period) or kill, and when to look again. Order follows the kubelet: plain init containers one by one to
completion, native sidecars (init containers with `restartPolicy: Always`) started in order before the app
containers and stopped after them in reverse order; restarts after an exponential back-off.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from vigil_dev.kube.fakelet.spec import Container, Kind, Pod, Probe

MIN_GRACE = 2.0
"""The kubelet never kills sooner than 2 s after SIGTERM, even for a force deletion."""

ProbeKind = Literal["liveness", "readiness", "startup"]
TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Backoff:
    """Restart delays: the kubelet's 0, 10 s, 20 s … 300 s, scaled down for tests (0, base, 2·base … cap)."""

    base: float = 1.0
    cap: float = 10.0

    def delay(self, crashes: int) -> float:
        if crashes <= 1:
            return 0.0
        return min(self.cap, self.base * 2.0 ** min(crashes - 2, 32))

    @property
    def reset_after(self) -> float:
        """A container that ran this long before exiting starts a fresh back-off (the kubelet: 2 × cap)."""
        return 2 * self.cap


@dataclass(frozen=True)
class Waiting:
    reason: str
    message: str = ""


@dataclass(frozen=True)
class Running:
    started_at: float
    pid: int


@dataclass(frozen=True)
class Terminated:
    exit_code: int
    reason: str
    started_at: float
    finished_at: float
    pid: int
    signal: int | None = None


@dataclass(frozen=True)
class Tally:
    """Consecutive probe results (a success resets failures and vice versa)."""

    successes: int = 0
    failures: int = 0


@dataclass(frozen=True)
class Record:
    state: Waiting | Running | Terminated = field(default_factory=lambda: Waiting("PodInitializing"))
    last: Terminated | None = None  # lastState
    restarts: int = 0
    ran: bool = False  # started at least once (the next start counts as a restart)
    ready: bool = False
    started: bool = False  # the startup probe passed (at once without one)
    unhealthy: str | None = None  # a liveness/startup probe failed: stop and restart it
    stop_at: float | None = None  # SIGTERM sent; SIGKILL at this time
    killed: bool = False  # SIGKILL sent
    crashes: int = 0  # consecutive runs that ended, for the back-off
    retry_at: float = 0.0  # no restart before this
    liveness: Tally = Tally()
    readiness: Tally = Tally()
    startup: Tally = Tally()

    @property
    def running(self) -> bool:
        return isinstance(self.state, Running)


def initial(c: Container, restarts: int = 0, ran: bool = False) -> Record:
    """A container not started yet; `restarts`/`ran` carry over what the pod's status says (fakelet restart)."""
    state = Waiting(*c.problem) if c.problem else Waiting("PodInitializing" if c.kind is Kind.APP else "Waiting")
    return Record(state=state, restarts=restarts, ran=ran)


def on_start(rec: Record, c: Container, pid: int, now: float) -> Record:
    last = rec.state if isinstance(rec.state, Terminated) else rec.last
    return Record(
        state=Running(now, pid),
        last=last,
        restarts=rec.restarts + (1 if rec.ran else 0),
        ran=True,
        started=c.startup is None,
        ready=c.startup is None and c.readiness is None,
        crashes=rec.crashes,
    )


def on_exit(rec: Record, returncode: int, now: float, backoff: Backoff, reason: str | None = None) -> Record:
    """The process ended: exit code as a container runtime reports it (128+n when killed by signal n);
    `reason` overrides Completed/Error (StartError: the command could not be run)."""
    run = rec.state
    started_at, pid = (run.started_at, run.pid) if isinstance(run, Running) else (now, 0)
    code, sig = (128 - returncode, -returncode) if returncode < 0 else (returncode, None)
    crashes = 1 if now - started_at >= backoff.reset_after else rec.crashes + 1
    term = Terminated(code, reason or ("Completed" if code == 0 else "Error"), started_at, now, pid, sig)
    return replace(
        rec,
        state=term,
        ready=False,
        started=False,
        unhealthy=None,
        stop_at=None,
        killed=False,
        crashes=crashes,
        retry_at=now + backoff.delay(crashes),
        liveness=Tally(),
        readiness=Tally(),
        startup=Tally(),
    )


def on_stop(rec: Record, now: float, grace: float) -> Record:
    return replace(rec, stop_at=now + max(grace, MIN_GRACE))


def on_kill(rec: Record) -> Record:
    return replace(rec, killed=True)


def on_probe(rec: Record, c: Container, kind: ProbeKind, ok: bool | None) -> Record:
    """Count one probe result; `None` (Unknown, e.g. an undeclared named port) changes nothing."""
    probe: Probe | None = getattr(c, kind)
    if ok is None or probe is None or not rec.running or rec.stop_at is not None:
        return rec
    before: Tally = getattr(rec, kind)
    tally = Tally(before.successes + 1, 0) if ok else Tally(0, before.failures + 1)
    rec = replace(rec, liveness=tally) if kind == "liveness" else rec
    rec = replace(rec, readiness=tally) if kind == "readiness" else rec
    rec = replace(rec, startup=tally) if kind == "startup" else rec
    passed, failed = tally.successes >= probe.success_threshold, tally.failures >= probe.failure_threshold
    if kind == "readiness":
        return replace(rec, ready=True) if passed else replace(rec, ready=False) if failed else rec
    if failed:
        return replace(rec, unhealthy=f"Container {c.name} failed {kind} probe, will be restarted")
    if kind == "startup" and passed:
        return replace(rec, started=True, ready=c.readiness is None)
    return rec


def probing(rec: Record, kind: ProbeKind) -> bool:
    """Whether a probe of this kind runs now: startup until it passes, the others only after it."""
    if not rec.running or rec.stop_at is not None:
        return False
    return not rec.started if kind == "startup" else rec.started


# -- what to do next --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Start:
    name: str


@dataclass(frozen=True)
class Stop:
    name: str
    grace: float
    reason: str


@dataclass(frozen=True)
class Kill:
    name: str


Action = Start | Stop | Kill


@dataclass(frozen=True)
class Plan:
    actions: tuple[Action, ...]
    wake_at: float | None  # look again at this time even if nothing happens
    phase: str
    finished: bool = False  # terminating and nothing runs any more: finalize the deletion


def restartable(policy: str, exit_code: int) -> bool:
    return policy == "Always" or (policy == "OnFailure" and exit_code != 0)


def will_restart(pod: Pod, c: Container, rec: Record) -> bool:
    """Whether an exited container is going to be started again (it shows CrashLoopBackOff meanwhile)."""
    if not isinstance(rec.state, Terminated):
        return False
    if c.kind is Kind.SIDECAR:
        return True
    if c.kind is Kind.INIT:
        return rec.state.exit_code != 0 and pod.restart_policy != "Never"
    return restartable(pod.restart_policy, rec.state.exit_code)


def initialized(pod: Pod, recs: Mapping[str, Record]) -> bool:
    """Every plain init container completed and every native sidecar started."""
    for c in pod.init:
        r = recs[c.name]
        if c.kind is Kind.INIT and not (isinstance(r.state, Terminated) and r.state.exit_code == 0):
            return False
        if c.kind is Kind.SIDECAR and not r.ran:
            return False
    return True


def phase(pod: Pod, recs: Mapping[str, Record]) -> str:
    for c in pod.init:
        r = recs[c.name]
        if (
            c.kind is Kind.INIT
            and isinstance(r.state, Terminated)
            and not will_restart(pod, c, r)
            and r.state.exit_code
        ):
            return "Failed"
    apps = [recs[c.name] for c in pod.apps]
    ended = [r.state for r in apps if isinstance(r.state, Terminated)]
    if apps and len(ended) == len(apps) and not any(will_restart(pod, c, recs[c.name]) for c in pod.apps):
        return "Succeeded" if all(t.exit_code == 0 for t in ended) else "Failed"
    return "Running" if any(r.ran for r in apps) else "Pending"


def plan(pod: Pod, recs: Mapping[str, Record], now: float, *, terminate_by: float | None = None) -> Plan:
    """The next actions for a pod; `terminate_by` is set once its deletion was seen (the grace deadline)."""
    actions: list[Action] = []
    wakes: list[float] = []
    for c in pod.containers:
        r = recs[c.name]
        if r.running and r.stop_at is not None and not r.killed:
            if now >= r.stop_at:
                actions.append(Kill(c.name))
            else:
                wakes.append(r.stop_at)
    current = phase(pod, recs)
    if terminate_by is not None or current in TERMINAL:
        actions += _wind_down(pod, recs, now, terminate_by)
        finished = terminate_by is not None and not any(r.running for r in recs.values())
        return Plan(tuple(actions), min(wakes, default=None), current, finished)
    for c in pod.containers:
        r = recs[c.name]
        if r.running and r.unhealthy and r.stop_at is None:
            probe = c.liveness if r.started else c.startup
            grace = probe.grace if probe is not None and probe.grace is not None else pod.grace
            actions.append(Stop(c.name, grace, r.unhealthy))
    for c in _due(pod, recs):
        retry_at = recs[c.name].retry_at
        if now >= retry_at:
            actions.append(Start(c.name))
        else:
            wakes.append(retry_at)
    return Plan(tuple(actions), min(wakes, default=None), current)


def _due(pod: Pod, recs: Mapping[str, Record]) -> list[Container]:
    """Containers to (re)start now or after their back-off, in the kubelet's order.

    Plain init containers one at a time, each after the previous completed; a native sidecar lets the next
    one start once it runs and its startup probe passed (a restarting sidecar blocks nobody); the app
    containers all at once after the init sequence. A container with a config problem blocks what follows.
    """
    due: list[Container] = []
    for c in pod.init:
        r = recs[c.name]
        if c.problem is not None:
            return due
        if c.kind is Kind.SIDECAR:
            if isinstance(r.state, Terminated):
                due.append(c)
            elif not r.running:
                due.append(c)
                return due
            elif not r.started:
                return due
            continue
        if isinstance(r.state, Terminated) and r.state.exit_code == 0:
            continue
        if not r.running and (not isinstance(r.state, Terminated) or will_restart(pod, c, r)):
            due.append(c)
        return due
    for c in pod.apps:
        r = recs[c.name]
        if c.problem is None and (isinstance(r.state, Waiting) or will_restart(pod, c, r)):
            due.append(c)
    return due


def _wind_down(pod: Pod, recs: Mapping[str, Record], now: float, deadline: float | None) -> list[Action]:
    """Stop the app (and a running plain init) containers first, then native sidecars one by one in reverse."""
    grace = deadline - now if deadline is not None else pod.grace
    main = [c for c in pod.containers if c.kind is not Kind.SIDECAR and recs[c.name].running]
    if main:
        return [Stop(c.name, grace, f"Stopping container {c.name}") for c in main if recs[c.name].stop_at is None]
    sidecars = [c for c in reversed(pod.init) if c.kind is Kind.SIDECAR and recs[c.name].running]
    if not sidecars or any(recs[c.name].stop_at is not None for c in sidecars):
        return []
    return [Stop(sidecars[0].name, grace, f"Stopping container {sidecars[0].name}")]
