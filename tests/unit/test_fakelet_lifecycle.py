"""Container lifecycle decisions: order, restarts with back-off, probes, termination (pure, `now` given)."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vigil_dev.kube.fakelet import lifecycle
from vigil_dev.kube.fakelet.lifecycle import Backoff, Kill, Record, Running, Start, Stop, Terminated
from vigil_dev.kube.fakelet.spec import Container, HttpGet, Kind, Pod, Probe

BACKOFF = Backoff(base=1.0, cap=8.0)
HTTP = HttpGet("127.20.0.1", 8080)


def ctr(name: str, kind: Kind = Kind.APP, **fields: object) -> Container:
    return Container(name=name, kind=kind, image="img", argv=("x",), env=(), **fields)  # type: ignore[arg-type]


def make_pod(*containers: Container, policy: str = "Always", grace: float = 30.0) -> Pod:
    init = tuple(c for c in containers if c.kind is not Kind.APP)
    apps = tuple(c for c in containers if c.kind is Kind.APP)
    return Pod("ns", "p", "uid", policy, grace, init, apps)


def fresh(pod: Pod) -> dict[str, Record]:
    return {c.name: lifecycle.initial(c) for c in pod.containers}


def run(pod: Pod, recs: dict[str, Record], name: str, now: float = 0.0, pid: int = 100) -> None:
    recs[name] = lifecycle.on_start(recs[name], pod.container(name), pid, now)


def done(recs: dict[str, Record], name: str, code: int, now: float = 0.0) -> None:
    recs[name] = lifecycle.on_exit(recs[name], code, now, BACKOFF)


POD = make_pod(ctr("init", Kind.INIT), ctr("side", Kind.SIDECAR), ctr("a"), ctr("b"))


def test_init_then_sidecar_then_all_apps() -> None:
    recs = fresh(POD)
    assert lifecycle.plan(POD, recs, 0).actions == (Start("init"),)
    run(POD, recs, "init")
    assert lifecycle.plan(POD, recs, 0).actions == ()  # the init container runs: nothing else yet
    done(recs, "init", 0)
    assert lifecycle.plan(POD, recs, 0).actions == (Start("side"),)
    run(POD, recs, "side")
    assert lifecycle.plan(POD, recs, 0).actions == (Start("a"), Start("b"))
    assert lifecycle.phase(POD, recs) == "Pending"
    run(POD, recs, "a")
    assert lifecycle.phase(POD, recs) == "Running"


def test_a_sidecar_with_a_startup_probe_holds_the_apps_until_it_passes() -> None:
    startup = Probe(HTTP, period=1, failure_threshold=3)
    pod = make_pod(ctr("side", Kind.SIDECAR, startup=startup), ctr("app"))
    recs = fresh(pod)
    run(pod, recs, "side")
    assert lifecycle.plan(pod, recs, 0).actions == ()
    recs["side"] = lifecycle.on_probe(recs["side"], pod.container("side"), "startup", True)
    assert recs["side"].started
    assert lifecycle.plan(pod, recs, 0).actions == (Start("app"),)


@pytest.mark.parametrize(
    ("policy", "code", "restarts", "phase"),
    [
        ("Always", 0, True, "Running"),
        ("Always", 1, True, "Running"),
        ("OnFailure", 0, False, "Succeeded"),
        ("OnFailure", 2, True, "Running"),
        ("Never", 0, False, "Succeeded"),
        ("Never", 3, False, "Failed"),
    ],
)
def test_restart_policy(policy: str, code: int, restarts: bool, phase: str) -> None:
    pod = make_pod(ctr("app"), policy=policy)
    recs = fresh(pod)
    run(pod, recs, "app")
    done(recs, "app", code, now=10)
    assert lifecycle.phase(pod, recs) == phase
    assert lifecycle.plan(pod, recs, 10).actions == ((Start("app"),) if restarts else ())


def test_init_failure_is_retried_unless_never() -> None:
    for policy, phase in (("Always", "Pending"), ("Never", "Failed")):
        pod = make_pod(ctr("init", Kind.INIT), ctr("app"), policy=policy)
        recs = fresh(pod)
        run(pod, recs, "init")
        done(recs, "init", 1)
        assert lifecycle.phase(pod, recs) == phase
        assert lifecycle.plan(pod, recs, 0).actions == ((Start("init"),) if policy == "Always" else ())


def test_crash_loop_back_off_waits_then_restarts() -> None:
    pod = make_pod(ctr("app"))
    recs = fresh(pod)
    for crash, now in enumerate((0.0, 1.0, 3.0), start=1):
        run(pod, recs, "app", now=now)
        done(recs, "app", 1, now=now)
        assert recs["app"].crashes == crash
    plan = lifecycle.plan(pod, recs, 3.0)
    assert plan.actions == ()
    assert plan.wake_at == 3.0 + BACKOFF.delay(3)
    assert lifecycle.plan(pod, recs, plan.wake_at).actions == (Start("app"),)
    run(pod, recs, "app", now=plan.wake_at)
    assert recs["app"].restarts == 3


@pytest.mark.parametrize(("crashes", "delay"), [(0, 0), (1, 0), (2, 1), (3, 2), (4, 4), (5, 8), (6, 8), (500, 8)])
def test_back_off_table(crashes: int, delay: float) -> None:
    assert BACKOFF.delay(crashes) == delay


@given(st.floats(0.01, 100), st.floats(0.01, 1000), st.integers(0, 200))
def test_back_off_grows_and_is_capped(base: float, cap: float, crashes: int) -> None:
    b = Backoff(base, cap)
    assert 0 <= b.delay(crashes) <= b.delay(crashes + 1) <= cap


def test_a_long_run_forgets_earlier_crashes() -> None:
    pod = make_pod(ctr("app"))
    recs = fresh(pod)
    recs["app"] = replace(recs["app"], crashes=5)
    run(pod, recs, "app", now=0)
    done(recs, "app", 1, now=BACKOFF.reset_after)
    assert recs["app"].crashes == 1
    assert recs["app"].retry_at == BACKOFF.reset_after  # restarts at once


def test_exit_by_signal_is_reported_as_a_runtime_does() -> None:
    rec = lifecycle.on_start(Record(), ctr("app"), 42, 5.0)
    end = lifecycle.on_exit(rec, -9, 7.0, BACKOFF)
    assert end.state == Terminated(137, "Error", 5.0, 7.0, 42, 9)
    assert lifecycle.on_exit(rec, 0, 7.0, BACKOFF).state == Terminated(0, "Completed", 5.0, 7.0, 42)


def test_restart_count_and_last_state() -> None:
    c = ctr("app")
    rec = lifecycle.on_start(lifecycle.initial(c), c, 1, 0)
    assert (rec.restarts, rec.last) == (0, None)
    rec = lifecycle.on_exit(rec, 3, 1, BACKOFF)
    first = rec.state
    rec = lifecycle.on_start(rec, c, 2, 2)
    assert (rec.restarts, rec.last, rec.state) == (1, first, Running(2, 2))


def test_a_carried_over_restart_count_counts_on() -> None:
    """A restarted fakelet finds the pod's status: its containers start again, as restarts."""
    pod = make_pod(ctr("app"))
    recs = {"app": lifecycle.initial(pod.apps[0], restarts=4, ran=True)}
    assert lifecycle.plan(pod, recs, 0).actions == (Start("app"),)
    run(pod, recs, "app")
    assert recs["app"].restarts == 5


def test_readiness_thresholds() -> None:
    c = ctr("app", readiness=Probe(HTTP, success_threshold=2, failure_threshold=2))
    rec = lifecycle.on_start(Record(), c, 1, 0)
    assert not rec.ready
    steps = [(True, False), (True, True), (False, True), (None, True), (False, False), (True, False)]
    for ok, ready in steps:
        rec = lifecycle.on_probe(rec, c, "readiness", ok)
        assert rec.ready is ready, (ok, rec)


def test_liveness_failures_mark_it_unhealthy_and_the_plan_stops_it() -> None:
    live = Probe(HTTP, failure_threshold=2, grace=4)
    pod = make_pod(ctr("app", liveness=live), grace=30)
    recs = fresh(pod)
    run(pod, recs, "app")
    c = pod.container("app")
    recs["app"] = lifecycle.on_probe(recs["app"], c, "liveness", False)
    assert recs["app"].unhealthy is None
    recs["app"] = lifecycle.on_probe(recs["app"], c, "liveness", False)
    assert recs["app"].unhealthy
    (stop,) = lifecycle.plan(pod, recs, 0).actions
    assert stop == Stop("app", 4, recs["app"].unhealthy)  # the probe's own grace period
    recs["app"] = lifecycle.on_stop(recs["app"], 0, 4)
    assert lifecycle.plan(pod, recs, 1).actions == ()
    assert lifecycle.plan(pod, recs, 1).wake_at == 4
    assert lifecycle.plan(pod, recs, 4).actions == (Kill("app"),)
    recs["app"] = lifecycle.on_kill(recs["app"])
    assert lifecycle.plan(pod, recs, 5).actions == ()  # killed once


def test_probes_run_in_order() -> None:
    c = ctr("app", startup=Probe(HTTP))
    rec = lifecycle.on_start(Record(), c, 1, 0)
    assert lifecycle.probing(rec, "startup")
    assert not lifecycle.probing(rec, "liveness")
    rec = lifecycle.on_probe(rec, c, "startup", True)
    assert not lifecycle.probing(rec, "startup")
    assert lifecycle.probing(rec, "liveness")
    assert lifecycle.probing(rec, "readiness")


def test_deletion_stops_apps_then_sidecars_in_reverse_then_finishes() -> None:
    pod = make_pod(ctr("s1", Kind.SIDECAR), ctr("s2", Kind.SIDECAR), ctr("a"), ctr("b"), grace=10)
    recs = fresh(pod)
    for i, name in enumerate(("s1", "s2", "a", "b")):
        run(pod, recs, name, pid=i + 1)
    deadline = 10.0
    plan = lifecycle.plan(pod, recs, 0, terminate_by=deadline)
    assert plan.actions == (Stop("a", 10, "Stopping container a"), Stop("b", 10, "Stopping container b"))
    for name in ("a", "b"):
        recs[name] = lifecycle.on_stop(recs[name], 0, 10)
    assert lifecycle.plan(pod, recs, 1, terminate_by=deadline).actions == ()  # sidecars wait for the apps
    done(recs, "a", 0, now=1)
    done(recs, "b", 0, now=2)
    assert lifecycle.plan(pod, recs, 2, terminate_by=deadline).actions == (Stop("s2", 8, "Stopping container s2"),)
    recs["s2"] = lifecycle.on_stop(recs["s2"], 2, 8)
    assert lifecycle.plan(pod, recs, 3, terminate_by=deadline).actions == ()
    done(recs, "s2", 0, now=3)
    assert lifecycle.plan(pod, recs, 3, terminate_by=deadline).actions == (Stop("s1", 7, "Stopping container s1"),)
    recs["s1"] = lifecycle.on_stop(recs["s1"], 3, 7)
    assert lifecycle.plan(pod, recs, 10, terminate_by=deadline).actions == (Kill("s1"),)
    done(recs, "s1", -9, now=10)
    final = lifecycle.plan(pod, recs, 10, terminate_by=deadline)
    assert final.finished
    assert final.actions == ()


def test_no_restarts_while_terminating() -> None:
    pod = make_pod(ctr("app"))
    recs = fresh(pod)
    run(pod, recs, "app")
    done(recs, "app", 1)
    plan = lifecycle.plan(pod, recs, 0, terminate_by=30)
    assert plan.actions == ()
    assert plan.finished


def test_a_finished_pod_stops_its_sidecars() -> None:
    pod = make_pod(ctr("side", Kind.SIDECAR), ctr("job"), policy="Never", grace=5)
    recs = fresh(pod)
    run(pod, recs, "side")
    run(pod, recs, "job")
    done(recs, "job", 0, now=1)
    plan = lifecycle.plan(pod, recs, 1)
    assert plan.phase == "Succeeded"
    assert plan.actions == (Stop("side", 5, "Stopping container side"),)
    assert not plan.finished  # the object stays until someone deletes it


def test_a_container_with_a_problem_never_starts_and_blocks_what_follows() -> None:
    pod = make_pod(ctr("init", Kind.INIT, problem=("ErrImagePull", "x")), ctr("app"))
    recs = fresh(pod)
    assert recs["init"].state == lifecycle.Waiting("ErrImagePull", "x")
    assert lifecycle.plan(pod, recs, 0).actions == ()
    assert lifecycle.phase(pod, recs) == "Pending"


NAMES = [c.name for c in POD.containers]


@settings(max_examples=300)
@given(
    st.sampled_from(["Always", "OnFailure", "Never"]),
    st.lists(st.tuples(st.sampled_from(NAMES), st.integers(0, 2), st.floats(0, 20)), max_size=40),
)
def test_plan_invariants_under_random_exits(policy: str, events: list[tuple[str, int, float]]) -> None:
    """Whatever exits when: nothing running is started again, the apps start only once initialized, plain init
    containers one at a time, restart counts only grow, only a finished pod stops containers (its sidecars)."""
    pod = make_pod(*POD.containers, policy=policy)
    recs = fresh(pod)
    now, pid = 0.0, 1
    for name, code, pause in events:
        for _ in range(10):
            plan = lifecycle.plan(pod, recs, now)
            for action in plan.actions:
                if not isinstance(action, Start):
                    assert plan.phase in lifecycle.TERMINAL
                    assert pod.container(action.name).kind is Kind.SIDECAR
                    rec = recs[action.name]
                    recs[action.name] = (
                        lifecycle.on_kill(rec) if isinstance(action, Kill) else lifecycle.on_stop(rec, now, 5)
                    )
                    continue
                assert not recs[action.name].running
                c = pod.container(action.name)
                if c.kind is Kind.APP:
                    assert lifecycle.initialized(pod, recs)
                if c.kind is Kind.INIT:
                    assert not any(recs[x.name].running for x in pod.init if x.kind is Kind.INIT)
                before = recs[action.name].restarts
                run(pod, recs, action.name, now, pid)
                pid += 1
                assert recs[action.name].restarts >= before
            if not plan.actions:
                break
        if recs[name].running:
            done(recs, name, code, now)
        now += pause
