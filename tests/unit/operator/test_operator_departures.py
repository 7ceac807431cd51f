"""Departed members (immediate cleanup) as a pure decision, and the pod facts it is judged by.

Expectations follow the rules `domain.departures` states: only proof (a pod gone or re-created, or an app
container that ended provably after the member was first seen) and, for static members, only an ordinal at or
above the StatefulSet's replicas; never a live pod's member, never a member no longer present.
"""

import typing
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vigil_operator.domain import departures as dep
from vigil_operator.domain.pods import pod_facts
from vigil_operator.domain.reconcile import PodFacts
from vigil_operator.domain.spec import ConsumerGroupSpec, parse_spec
from vigil_operator.domain.status import MemberStatus

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
SEEN = NOW - timedelta(seconds=60)
"""When the operator first saw the members of the tables below."""
LATER = SEEN + dep.CLOCK_SKEW
"""The earliest node time provably after SEEN."""


def spec(membership: str = "dynamic") -> ConsumerGroupSpec:
    return parse_spec(
        {
            "groupId": "orders",
            "kafka": {"bootstrapServers": "kafka:9092"},
            "workload": {"kind": "StatefulSet", "name": "orders"},
            "membership": membership,
        }
    )


DYNAMIC, STATIC = spec(), spec("static")


def dyn(*ordinals: int, seen: datetime = SEEN) -> dict[str, dep.Sighting]:
    return {f"orders-{i}-m": dep.Sighting(seen, f"orders-{i}") for i in ordinals}


def static(*ordinals: int) -> dict[str, dep.Sighting]:
    return {f"orders-{i}-m": dep.Sighting(SEEN, f"orders-{i}", f"ns-orders-{i}") for i in ordinals}


def pod(
    i: int, *, ended: datetime | None = None, deleting: bool = False, static_id: bool = False,
    created: datetime = SEEN - timedelta(minutes=5),
) -> PodFacts:  # fmt: skip
    return PodFacts(f"orders-{i}", f"ns-orders-{i}" if static_id else None, i, ended, deleting, created)


def holders(present: list[str]) -> dict[str, str | None]:
    """member id → instance id, as the group shows them (`orders-<i>-<anything>` holds `ns-orders-<i>` when static)."""
    return {m: f"ns-{m.rsplit('-', 1)[0]}" if m.startswith("orders-") else None for m in present}


def dynamic_holders(present: list[str]) -> dict[str, str | None]:
    return dict.fromkeys(present)


def causes(found: list[dep.Departure]) -> list[tuple[str, str]]:
    return [(d.member_id, d.cause) for d in found]


Case = tuple[str, ConsumerGroupSpec, dict[str, dep.Sighting], list[str], list[PodFacts], int | None, list[Any]]
CASES: list[Case] = [
    # name, spec, sightings, present member ids, pods now, replicas, expected (member id, cause)
    ("dynamic: all pods live, nothing ended", DYNAMIC, dyn(0, 1), ["orders-0-m", "orders-1-m"], [pod(0), pod(1)],
     None, []),
    ("dynamic: pod gone, member still present", DYNAMIC, dyn(0, 1), ["orders-0-m", "orders-1-m"], [pod(0)], None,
     [("orders-1-m", "pod-gone")]),
    ("dynamic: pod gone, member already left", DYNAMIC, dyn(0, 1), ["orders-0-m"], [pod(0)], None, []),
    ("dynamic: pod re-created under its name after the member was seen", DYNAMIC, dyn(0), ["orders-0-m"],
     [pod(0, created=LATER)], None, [("orders-0-m", "pod-gone")]),
    ("dynamic: pod being deleted: it may still leave by itself", DYNAMIC, dyn(0), ["orders-0-m"],
     [pod(0, deleting=True)], None, []),
    ("dynamic: app ended after the member was first seen", DYNAMIC, dyn(0, 1), ["orders-0-m", "orders-1-m"],
     [pod(0, ended=LATER), pod(1)], None, [("orders-0-m", "container-terminated")]),
    ("dynamic: app ended before the member was first seen (the new incarnation)", DYNAMIC, dyn(0), ["orders-0-m"],
     [pod(0, ended=SEEN - timedelta(seconds=1))], None, []),
    ("dynamic: ended within the clock skew of the first sighting: not provably after", DYNAMIC, dyn(0),
     ["orders-0-m"], [pod(0, ended=LATER - timedelta(milliseconds=1))], None, []),
    ("dynamic: the old and the new incarnation: only the old one", DYNAMIC,
     dyn(0) | {"orders-0-new": dep.Sighting(LATER + timedelta(seconds=3), "orders-0")},
     ["orders-0-m", "orders-0-new"], [pod(0, ended=LATER)], None, [("orders-0-m", "container-terminated")]),
    ("dynamic: member never mapped to a pod", DYNAMIC, {"x": dep.Sighting(SEEN, None)}, ["x"], [], None, []),
    ("static: scaled 4 -> 2, pods 2 and 3 gone", STATIC, static(0, 1, 2, 3), [f"orders-{i}-m" for i in range(4)],
     [pod(0, static_id=True), pod(1, static_id=True)], 2, [("orders-2-m", "scale-down"), ("orders-3-m", "scale-down")]),
    ("static: scaled down, pod 3 still terminating (its consumer would rejoin)", STATIC, static(2, 3),
     ["orders-2-m", "orders-3-m"], [pod(2, static_id=True), pod(3, deleting=True, static_id=True)], 3, []),
    ("static: the departed pod's instance id rejoined under a new member id before the pod went: that one",
     STATIC, static(2, 3), ["orders-2-m", "orders-3-new"], [pod(2, static_id=True)], 3,
     [("orders-3-new", "scale-down")]),
    ("static: ordinal above replicas but pod live and not deleting (scale-down not begun)", STATIC, static(3),
     ["orders-3-m"], [pod(3, static_id=True)], 3, []),
    ("static: pod below replicas gone (a restart: bridging's business)", STATIC, static(1), ["orders-1-m"], [], 4,
     []),
    ("static: replicas unknown", STATIC, static(3), ["orders-3-m"], [], None, []),
    ("static: app container ended is never a departure", STATIC, static(0), ["orders-0-m"],
     [pod(0, ended=NOW, static_id=True)], 1, []),
    ("static: departed member already gone", STATIC, static(3), [], [], 2, []),
    ("static: a gone pod named otherwise has no ordinal", STATIC, {"m": dep.Sighting(SEEN, "other-7", "i")}, ["m"],
     [], 2, []),
]  # fmt: skip


@pytest.mark.parametrize(("spec_", "sightings", "present", "pods", "replicas", "expected"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])  # fmt: skip
def test_departures(  # noqa: PLR0917 - one parameter per table column
    spec_: ConsumerGroupSpec,
    sightings: dict[str, dep.Sighting],
    present: list[str],
    pods: list[PodFacts],
    replicas: int | None,
    expected: list[tuple[str, str]],
) -> None:
    group = holders(present) if spec_ is STATIC else dynamic_holders(present)
    found = dep.departures(spec_, sightings, group, pods, replicas=replicas)
    assert causes(found) == expected
    for d in found:
        assert d.reason.startswith("vigil: ")
        assert d.pod in d.reason


def test_a_scaled_away_member_is_removed_with_its_own_pair() -> None:
    found = dep.departures(STATIC, static(2), holders(["orders-2-m"]), [], replicas=2)
    assert [(d.member_id, d.instance_id) for d in found] == [("orders-2-m", "ns-orders-2")]
    assert "ordinal 2, replicas 2" in found[0].reason


@pytest.mark.parametrize(
    ("spec_", "pods", "expected"),
    [
        (STATIC, [pod(0), pod(1)], False),
        (STATIC, [pod(0)], True),
        (STATIC, [pod(0), pod(1, deleting=True)], False),
        (DYNAMIC, [pod(0)], False),
    ],
)
def test_replicas_are_read_only_when_a_static_pod_is_gone(
    spec_: ConsumerGroupSpec, pods: list[PodFacts], expected: bool
) -> None:
    assert dep.needs_replicas(spec_, static(0, 1), pods) is expected


def test_remember_keeps_first_sightings_and_the_last_proven_pod() -> None:
    first = dep.remember({}, [MemberStatus(member_id="a", pod="orders-0"), MemberStatus(member_id="b")], SEEN)
    assert first == {"a": dep.Sighting(SEEN, "orders-0"), "b": dep.Sighting(SEEN, None)}
    # later: a's mapping is ambiguous (a new incarnation shares its client id), b gone, c new
    later = dep.remember(first, [MemberStatus(member_id="a"), MemberStatus(member_id="c", pod="orders-0")], NOW)
    assert later == {"a": dep.Sighting(SEEN, "orders-0"), "c": dep.Sighting(NOW, "orders-0")}


member_ids = st.lists(st.integers(0, 7), unique=True, max_size=8)


@given(
    mapped=member_ids,
    present=member_ids,
    live=member_ids,
    ended=st.dictionaries(st.integers(0, 7), st.integers(-30, 30)),
    deleting=member_ids,
    replicas=st.none() | st.integers(0, 8),
    static_group=st.booleans(),
)
def test_only_present_members_of_provably_departed_pods(  # noqa: PLR0917 - one per strategy
    mapped: list[int],
    present: list[int],
    live: list[int],
    ended: dict[int, int],
    deleting: list[int],
    replicas: int | None,
    static_group: bool,
) -> None:
    """Whatever the mix: every departure names a present member remembered with its pod, at most once; a live,
    not-deleting pod whose app did not end provably after the first sighting never loses its member; a static
    member is removed only for an ordinal at or above a known replica count."""
    sightings = (static if static_group else dyn)(*mapped)
    pods = [
        pod(i, ended=SEEN + timedelta(seconds=ended[i]) if i in ended else None, deleting=i in deleting,
            static_id=static_group)
        for i in live
    ]  # fmt: skip
    members = [f"orders-{i}-m" for i in present]
    found = dep.departures(STATIC if static_group else DYNAMIC, sightings,
                           holders(members) if static_group else dynamic_holders(members), pods,
                           replicas=replicas)  # fmt: skip
    ids = [d.member_id for d in found]
    assert len(ids) == len(set(ids))
    for d in found:
        i = int(d.pod.removeprefix("orders-"))
        assert i in mapped
        assert i in present
        healthy = i in live and i not in deleting and SEEN + timedelta(seconds=ended.get(i, -1)) < LATER
        assert not healthy
        if static_group:
            assert d.cause == "scale-down"
            assert replicas is not None
            assert i >= replicas
            assert i not in live
        else:
            assert d.cause in {"pod-gone", "container-terminated"}
    if not static_group:  # a dynamic member of a gone pod, still present, is always removed
        gone = {i for i in mapped if i in present and i not in live}
        assert gone <= {int(d.pod.removeprefix("orders-")) for d in found}


# --- the pod facts departures are judged by ---------------------------------------------------------------------


def raw_pod(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "orders-3",
            "namespace": "ns",
            "ownerReferences": [{"kind": "StatefulSet", "name": "orders", "controller": True}],
        },
        "spec": {"containers": [{"name": "app"}]},
        "status": status,
    }


def terminated(at: str) -> dict[str, Any]:
    return {"terminated": {"exitCode": 137, "finishedAt": at}}


def test_pod_facts_ordinal_end_and_deletion() -> None:
    facts = pod_facts(raw_pod(containerStatuses=[
        {"name": "app", "state": {"running": {}}, "lastState": terminated("2026-11-21T11:59:58Z"), "restartCount": 1},
        {"name": "vigil-sidecar", "state": terminated("2026-11-21T11:59:59Z")},
    ]))  # fmt: skip
    assert facts.ordinal == 3
    assert facts.app_ended_at == datetime(2026, 11, 21, 11, 59, 58, tzinfo=UTC)  # the sidecar's end not counted
    assert facts.deleting is False
    gone = raw_pod()
    gone["metadata"]["deletionTimestamp"] = "2026-11-21T12:00:00Z"
    assert pod_facts(gone).deleting is True
    assert pod_facts(gone).app_ended_at is None


@pytest.mark.parametrize(
    ("owners", "name", "expected"),
    [
        ([{"kind": "StatefulSet", "name": "orders", "controller": True}], "orders-3", 3),
        ([{"kind": "StatefulSet", "name": "orders", "controller": True}], "orders-10", 10),
        ([{"kind": "ReplicaSet", "name": "orders-5d8f", "controller": True}], "orders-5d8f-x2", None),
        ([], "orders-3", None),
        ([{"kind": "StatefulSet", "name": "other", "controller": True}], "orders-3", None),
        ([{"kind": "StatefulSet", "name": "orders", "controller": True}], "orders-03", None),
    ],
)
def test_ordinal_only_for_pods_a_statefulset_owns(
    owners: list[dict[str, Any]], name: str, expected: int | None
) -> None:
    raw = raw_pod()
    raw["metadata"] |= {"ownerReferences": owners, "name": name}
    assert pod_facts(raw).ordinal == expected


def _field(path: str) -> dict[str, Any]:
    return {"valueFrom": {"fieldRef": {"fieldPath": path}}}


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ([{"name": "VIGIL_INSTANCE_ID", "value": "$(VIGIL_NAMESPACE)-$(VIGIL_POD_NAME)"}], "ns-orders-3"),
        ([{"name": "VIGIL_INSTANCE_ID", "value": "fixed"}], "fixed"),
        ([{"name": "VIGIL_INSTANCE_ID", **_field("metadata.name")}], "orders-3"),  # the app set it from its pod
        (
            [{"name": "POD", **_field("metadata.name")}, {"name": "VIGIL_INSTANCE_ID", "value": "app-$(POD)"}],
            "app-orders-3",
        ),
        ([{"name": "VIGIL_INSTANCE_ID", **_field("spec.nodeName")}], None),  # not a field the operator knows
        ([{"name": "VIGIL_INSTANCE_ID", "value": "$(FROM_SECRET)"}], None),
        ([], None),
    ],
)
def test_the_instance_id_the_sidecar_was_given(env: list[dict[str, Any]], expected: str | None) -> None:
    raw = raw_pod()
    raw["spec"]["initContainers"] = [{"name": "vigil-sidecar", "env": env}]
    assert pod_facts(raw).instance_id == expected


def test_a_bad_finished_at_is_ignored_not_raised() -> None:
    assert (
        pod_facts(raw_pod(containerStatuses=[{"name": "app", "state": terminated("yesterday")}])).app_ended_at is None
    )


# --- crash-looping static members ----------------------------------------------------------------------------------


def looping(i: int, on: bool = True) -> PodFacts:
    return PodFacts(f"orders-{i}", f"ns-orders-{i}", i, None, False, SEEN, crash_looping=on)


@pytest.mark.parametrize(
    ("pods", "removed", "expected"),
    [
        ([looping(0, on=False), looping(1, on=False)], {}, []),
        ([looping(0), looping(1, on=False)], {}, [("orders-0-m", "crash-loop")]),
        ([looping(0)], {"ns-orders-0": NOW - timedelta(minutes=9)}, []),  # once per window
        ([looping(0)], {"ns-orders-0": NOW - dep.CRASH_LOOP_WINDOW}, [("orders-0-m", "crash-loop")]),
        ([looping(0)], {"ns-orders-1": NOW}, [("orders-0-m", "crash-loop")]),  # another instance's window
    ],
)
def test_a_crash_looping_static_member_is_removed_at_most_once_per_window(
    pods: list[PodFacts], removed: dict[str, datetime], expected: list[tuple[str, str]]
) -> None:
    found = dep.departures(STATIC, static(0, 1), holders(["orders-0-m", "orders-1-m"]), pods, replicas=2,
                           crash_removed=removed, now=NOW)  # fmt: skip
    assert causes(found) == expected
    for d in found:
        assert d.reason == f"vigil: the app of pod {d.pod} is crash-looping (CrashLoopBackOff)"


def test_a_dynamic_groups_crash_loop_is_not_this_rule() -> None:
    found = dep.departures(DYNAMIC, dyn(0), dynamic_holders(["orders-0-m"]), [looping(0)], replicas=1, now=NOW)
    assert found == []


@pytest.mark.parametrize(
    ("state", "restarts", "expected"),
    [
        ({"waiting": {"reason": "CrashLoopBackOff"}}, 2, True),
        ({"waiting": {"reason": "CrashLoopBackOff"}}, 1, False),  # one end: a restart, not yet a loop
        ({"waiting": {"reason": "ContainerCreating"}}, 5, False),
        ({"running": {}}, 5, False),
    ],
)
def test_pod_facts_crash_looping(state: dict[str, Any], restarts: int, expected: bool) -> None:
    raw = raw_pod(containerStatuses=[{"name": "app", "state": state, "restartCount": restarts},
                                     {"name": "vigil-sidecar", "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                                      "restartCount": 9}])  # fmt: skip
    assert pod_facts(raw).crash_looping is expected


# --- KIP-848 static members: released for their replacement, not removed ---------------------------------------------

RELEASE_CASES: list[Case] = [
    # name, spec, sightings, present member ids, pods now, replicas, expected (member id, cause)
    ("pod gone below the replicas (a restart): released", STATIC, static(0, 1), ["orders-0-m", "orders-1-m"],
     [pod(0, static_id=True)], 2, [("orders-1-m", "pod-gone")]),
    ("pod re-created under its name after the member was seen: released", STATIC, static(0), ["orders-0-m"],
     [pod(0, static_id=True, created=LATER)], 1, [("orders-0-m", "pod-gone")]),
    ("app container ended after the member was first seen: released", STATIC, static(0), ["orders-0-m"],
     [pod(0, static_id=True, ended=LATER)], 1, [("orders-0-m", "container-terminated")]),
    ("app ended before the member was first seen (the new incarnation): nothing", STATIC, static(0), ["orders-0-m"],
     [pod(0, static_id=True, ended=SEEN - timedelta(seconds=1))], 1, []),
    ("pod being deleted, its app still running (it releases itself as it closes): nothing", STATIC, static(0),
     ["orders-0-m"], [pod(0, static_id=True, deleting=True)], 1, []),
    ("pod live, nothing ended: nothing", STATIC, static(0, 1), ["orders-0-m", "orders-1-m"],
     [pod(0, static_id=True), pod(1, static_id=True)], 2, []),
    ("the replacement holds the instance id already: nothing (the old member is not present)", STATIC, static(0)
     | {"orders-0-new": dep.Sighting(LATER + timedelta(seconds=3), "orders-0", "ns-orders-0")}, ["orders-0-new"],
     [pod(0, static_id=True, created=LATER)], 1, []),
    ("scaled away: removed, not released", STATIC, static(0, 1), ["orders-0-m", "orders-1-m"],
     [pod(0, static_id=True)], 1, [("orders-1-m", "scale-down")]),
    ("replicas unknown, pod gone: released (nothing says it scaled away)", STATIC, static(3), ["orders-3-m"], [],
     None, [("orders-3-m", "pod-gone")]),
    ("a dynamic member of a KIP-848 group is removed as before", DYNAMIC, dyn(0), ["orders-0-m"], [], None,
     [("orders-0-m", "pod-gone")]),
    ("member never mapped to a pod: nothing", STATIC, {"x": dep.Sighting(SEEN, None, "ns-x")}, ["x"], [], 1, []),
]  # fmt: skip


@pytest.mark.parametrize(("spec_", "sightings", "present", "pods", "replicas", "expected"),
                         [c[1:] for c in RELEASE_CASES], ids=[c[0] for c in RELEASE_CASES])  # fmt: skip
def test_kip848_static_members_of_gone_consumers_are_released(  # noqa: PLR0917 - one parameter per table column
    spec_: ConsumerGroupSpec,
    sightings: dict[str, dep.Sighting],
    present: list[str],
    pods: list[PodFacts],
    replicas: int | None,
    expected: list[tuple[str, str]],
) -> None:
    group = holders(present) if spec_ is STATIC else dynamic_holders(present)
    found = dep.departures(spec_, sightings, group, pods, replicas=replicas, now=NOW, kip848=True)
    assert causes(found) == expected
    for d in found:
        static_member = d.instance_id is not None
        assert d.action == ("release" if static_member and d.cause != "scale-down" else "remove")
        assert d.reason.startswith("vigil: ")
        assert d.pod in d.reason
        if d.action == "release":
            assert (d.member_id, d.instance_id) == (d.member_id, group[d.member_id])  # its own pair, compared
            assert d.reason.endswith(f"instance id {d.instance_id} released for its replacement")
    # a classic group's static member of the same pod is bridging's business: neither removed nor released
    classic = dep.departures(spec_, sightings, group, pods, replicas=replicas, now=NOW)
    assert [d for d in classic if d.action == "release"] == []
    assert causes(classic) == [c for c in expected if c[1] == "scale-down" or spec_ is DYNAMIC]


def test_a_member_released_already_is_released_once() -> None:
    """Released by vigil, or by its own client (epoch -2 read from ConsumerGroupDescribe): not again."""
    args = (STATIC, static(0, 1), holders(["orders-0-m", "orders-1-m"]), [])
    both = dep.departures(*args, replicas=2, now=NOW, kip848=True)
    assert causes(both) == [("orders-0-m", "pod-gone"), ("orders-1-m", "pod-gone")]
    once = dep.departures(*args, replicas=2, now=NOW, kip848=True, released={"orders-0-m"})
    assert causes(once) == [("orders-1-m", "pod-gone")]


def test_a_crash_looping_kip848_static_member_is_removed_once_not_released() -> None:
    """The crash-loop rule owns it (its partitions should move on); after its removal, its window keeps it from
    being released at every loop too."""
    looping0 = PodFacts("orders-0", "ns-orders-0", 0, LATER, False, SEEN - timedelta(minutes=5), crash_looping=True)
    args = (STATIC, static(0), holders(["orders-0-m"]), [looping0])
    assert causes(dep.departures(*args, replicas=1, now=NOW, kip848=True)) == [("orders-0-m", "crash-loop")]
    removed = {"ns-orders-0": NOW}
    assert dep.departures(*args, replicas=1, now=NOW, kip848=True, crash_removed=removed) == []


@given(
    mapped=member_ids,
    present=member_ids,
    live=member_ids,
    ended=st.dictionaries(st.integers(0, 7), st.integers(-30, 30)),
    deleting=member_ids,
    replicas=st.none() | st.integers(0, 8),
    released=member_ids,
)
def test_a_release_is_only_for_a_present_static_member_of_a_provably_ended_consumer(  # noqa: PLR0917
    mapped: list[int],
    present: list[int],
    live: list[int],
    ended: dict[int, int],
    deleting: list[int],
    replicas: int | None,
    released: list[int],
) -> None:
    """Whatever the mix: a release names a present member with its own instance id, of a pod gone or whose app
    ended provably after the member was first seen, not released before, never also removed; every member of a gone
    pod below the replicas is released unless it was before."""
    pods = [
        pod(i, ended=SEEN + timedelta(seconds=ended[i]) if i in ended else None, deleting=i in deleting,
            static_id=True)
        for i in live
    ]  # fmt: skip
    members = [f"orders-{i}-m" for i in present]
    group = holders(members)
    done = {f"orders-{i}-m" for i in released}
    found = dep.departures(STATIC, static(*mapped), group, pods, replicas=replicas, now=NOW, kip848=True,
                           released=done)  # fmt: skip
    ids = [d.member_id for d in found]
    assert len(ids) == len(set(ids))
    for d in (d for d in found if d.action == "release"):
        i = int(d.pod.removeprefix("orders-"))
        assert i in mapped
        assert i in present
        assert d.instance_id == group[d.member_id]
        assert d.member_id not in done
        assert i not in live or SEEN + timedelta(seconds=ended.get(i, -1)) >= LATER
    gone_below = {f"orders-{i}-m" for i in mapped if i in present and i not in live and replicas is not None
                  and i < replicas}  # fmt: skip
    assert gone_below - done <= {d.member_id for d in found if d.action == "release"}


PROVEN_GONE: list[tuple[dep.Cause, bool]] = [
    ("scale-down", True),
    ("pod-gone", True),
    ("container-terminated", True),
    ("crash-loop", False),  # may come back: waits for room in a readable budget
    ("node-lost", False),  # the node may come back
]


@pytest.mark.parametrize(("cause", "proven"), PROVEN_GONE)
def test_only_a_member_that_may_come_back_waits_for_the_budget(cause: dep.Cause, proven: bool) -> None:
    assert dep.Departure("m", "i", "orders-0", cause, "why").proven_gone is proven


def test_the_table_covers_every_cause() -> None:
    assert {cause for cause, _ in PROVEN_GONE} == set(typing.get_args(dep.Cause))
