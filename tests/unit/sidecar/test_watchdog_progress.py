"""The progress signal's rules as tables (Burrow's `caching_test.go` habit): each case gives the samples and the
expected status and deciding rule; times in seconds, stall timeout 30 s, N = 3."""

import pytest

from vigil_core.kafka.model import TopicPartitionRef
from vigil_sidecar.watchdog import progress_rules as pr
from vigil_sidecar.watchdog.progress_rules import GroupFacts, PartitionFacts, ProgressStatus, Sample

TP = TopicPartitionRef("orders", 0)
STABLE = GroupFacts(stable=True, stable_since=0.0, stall_timeout=30.0, no_commit_factor=3.0)


def every(step: float, until: float, committed: object, lso: object, data: object = True) -> tuple[Sample, ...]:
    """Samples at 0, step, ..., until; each of committed/lso/data a constant or a function of time."""
    out = []
    t = 0.0
    while t <= until:
        c = committed(t) if callable(committed) else committed
        e = lso(t) if callable(lso) else lso
        d = data(t) if callable(data) else data
        out.append(Sample(t, c, e, d))  # type: ignore[arg-type]
        t += step
    return tuple(out)


def facts(samples: tuple[Sample, ...], *, paused: bool = False, assigned_at: float = -1000.0) -> PartitionFacts:
    return PartitionFacts(TP, samples, paused=paused, assigned_at=assigned_at)


def commits_until(t_stop: float, rate: int = 10) -> object:
    return lambda t: 100 + rate * int(min(t, t_stop))


# (case, partition facts, group facts, now, expected status, deciding rule)
CASES = [
    ("moving: commits keep up", facts(every(5, 60, commits_until(999), lambda t: 100 + 10 * int(t) + 5)), STABLE, 60.0,
     ProgressStatus.OK, None),
    ("caught up, idle: no commit needed", facts(every(5, 300, 500, 500, None)), STABLE, 300.0,
     ProgressStatus.OK, "is_not_yet_judged"),
    ("idle transactional topic: lag of 1 from the commit marker, never a stall",
     facts(every(5, 300, commits_until(20), lambda t: 100 + 10 * int(min(t, 20)) + 1, False)), STABLE, 300.0,
     ProgressStatus.OK, "has_no_data_waiting"),
    ("stuck with data, LSO flat: STALL",
     facts(every(5, 60, commits_until(10), 500)), STABLE, 60.0, ProgressStatus.STALL, "is_stalled"),
    ("stuck with data, not yet a stall timeout", facts(every(5, 35, commits_until(10), 500)), STABLE, 35.0,
     ProgressStatus.OK, None),
    ("stuck while the LSO grows: STOP",
     facts(every(5, 60, commits_until(10), lambda t: 500 + int(t))), STABLE, 60.0, ProgressStatus.STOP, "is_stopped"),
    ("paused partition with lag: the app's choice",
     facts(every(5, 60, commits_until(10), 500), paused=True), STABLE, 60.0, ProgressStatus.OK, "is_paused"),
    ("group rebalancing: suspended",
     facts(every(5, 60, commits_until(10), 500)), GroupFacts(False, 0.0, 30.0), 60.0, ProgressStatus.SUSPENDED,
     "is_group_unsettled"),
    ("assignment changed less than a stall timeout ago: suspended",
     facts(every(5, 65, commits_until(10), 500), assigned_at=40.0), STABLE, 65.0, ProgressStatus.SUSPENDED,
     "is_group_unsettled"),
    ("the stall clock starts at the assignment change, not in the previous owner's hands",
     facts(every(5, 70, commits_until(10), 500), assigned_at=40.0), STABLE, 70.0, ProgressStatus.STALL, "is_stalled"),
    ("the stall clock starts when the group was Stable again",
     facts(every(5, 60, commits_until(10), 500)), GroupFacts(True, 50.0, 30.0), 60.0, ProgressStatus.OK, None),
    ("app commits only at shutdown: data flows, no commit ever seen → NoCommits, not STALL",
     facts(every(5, 100, None, lambda t: 5000 + 10 * int(t))), STABLE, 100.0, ProgressStatus.NO_COMMITS,
     "has_no_commits"),
    ("app commits only at shutdown, an old commit from a previous run: NoCommits, not STALL",
     facts(every(5, 100, 42, 5000)), STABLE, 100.0, ProgressStatus.NO_COMMITS, "has_no_commits"),
    ("no commit seen, not yet N stall timeouts", facts(every(5, 80, None, lambda t: 5000 + 10 * int(t))), STABLE,
     80.0, ProgressStatus.OK, "is_not_yet_judged"),
    ("never committed, nothing produced: no finding", facts(every(5, 300, None, 5000)), STABLE, 300.0,
     ProgressStatus.OK, "is_not_yet_judged"),
    ("data arrived only now after a long idle stretch: the clock starts with the data",
     facts(every(5, 60, commits_until(10), lambda t: 200 if t < 50 else 260, lambda t: None if t < 50 else True)),
     STABLE, 60.0, ProgressStatus.OK, None),
    ("markers first, then data: the clock starts with the data",
     facts(every(5, 60, commits_until(10), lambda t: 201 if t < 50 else 260, lambda t: t >= 50)),
     STABLE, 60.0, ProgressStatus.OK, None),
    ("no samples yet", facts(()), STABLE, 60.0, ProgressStatus.OK, "has_no_samples"),
]  # fmt: skip


@pytest.mark.parametrize(("p", "g", "now", "status", "rule"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_partition_status(
    p: PartitionFacts, g: GroupFacts, now: float, status: ProgressStatus, rule: str | None
) -> None:
    assert pr.partition_status(p, g, now) == (status, rule)


def test_member_status_is_the_worst_partition() -> None:
    ok = facts(every(5, 60, commits_until(999), lambda t: 100 + 10 * int(t)))
    stalled = PartitionFacts(TopicPartitionRef("orders", 1), every(5, 60, commits_until(10), 500), assigned_at=-1000)
    shutdown_only = PartitionFacts(
        TopicPartitionRef("orders", 2), every(5, 100, None, lambda t: 9 + int(t)), assigned_at=-1000
    )
    result = pr.member_status([ok, stalled], STABLE, 60.0)
    assert result.status is ProgressStatus.STALL
    assert result.stalled_partitions == (TopicPartitionRef("orders", 1),)
    only_findings = pr.member_status([ok, shutdown_only], STABLE, 100.0)
    assert only_findings.status is ProgressStatus.NO_COMMITS
    assert not only_findings.status.stalled
    assert only_findings.stalled_partitions == ()
    assert pr.member_status([ok, stalled], GroupFacts(False, 0.0, 30.0), 60.0).status is ProgressStatus.SUSPENDED
    assert pr.member_status([], STABLE, 60.0).status is ProgressStatus.OK


def test_severity_order() -> None:
    assert [s.name for s in sorted(ProgressStatus)] == ["OK", "SUSPENDED", "NO_COMMITS", "STALL", "STOP"]
    assert [s.stalled for s in sorted(ProgressStatus)] == [False, False, False, True, True]
    assert [name for name, _, _ in pr.RULES][-2:] == ["is_stopped", "is_stalled"]  # Burrow: stopped before stalled


def test_stuck_since() -> None:
    p = facts(every(5, 60, commits_until(10), 500))
    assert pr.stuck_since(p, STABLE) == 10.0
    assert pr.stuck_since(facts(every(5, 60, 500, 500)), STABLE) is None  # no lag
