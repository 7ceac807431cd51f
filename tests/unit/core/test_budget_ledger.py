"""The eviction budget's ledger (pure): the permit rule as a table, its guarantees as properties, the annotation."""

import ast
import json
import pathlib
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vigil_core.budget import ledger as lg
from vigil_core.budget.ledger import Entry, Ledger, Permit, PermitRecord, Refusal
from vigil_core.budget.poison import Handoff, PoisonMark

NOW = 1_763_700_000.0
STALL = 30.0  # half of it, 15 s, is the "stalled" mark
POLICY: dict[str, Any] = {"max_concurrent": 1, "cooldown": 60.0, "systemic_percent": 50.0, "settle": 0.0}


def ledger_of(members: dict[str, tuple[float, float]], permits: tuple[tuple[str, str, float], ...] = ()) -> Ledger:
    """members: pod → (poll age, seconds before NOW it was published); permits: (pod, member, seconds before NOW)."""
    return Ledger(
        {pod: Entry(age, NOW - ago) for pod, (age, ago) in members.items()},
        tuple(PermitRecord(pod, member, NOW - ago) for pod, member, ago in permits),
    )


HEALTHY3 = {"b": (1.0, 0.0), "c": (2.0, 5.0), "d": (0.5, 30.0)}

# (case, members, permits, policy overrides, expected: "permit" | refusal cause, retry_at - NOW or None)
Row = tuple[str, dict[str, tuple[float, float]], tuple[tuple[str, str, float], ...], dict[str, Any], str, Any]
TABLE: list[Row] = [
    ("one stalled of four: permit", {"a": (40.0, 0), **HEALTHY3}, (), {}, "permit", None),
    ("another permit in the cooldown: budget", {"a": (40.0, 0), **HEALTHY3}, (("x", "m-x", 10.0),), {},
     "budget", 50.0),
    ("that permit's cooldown is over: permit", {"a": (40.0, 0), **HEALTHY3}, (("x", "m-x", 60.0),), {},
     "permit", None),
    ("max 2, one used: permit", {"a": (40.0, 0), **HEALTHY3}, (("x", "m-x", 10.0),), {"max_concurrent": 2},
     "permit", None),
    ("max 2, two used: budget until the older leaves", {"a": (40.0, 0), **HEALTHY3},
     (("x", "m-x", 10.0), ("y", "m-y", 20.0)), {"max_concurrent": 2}, "budget", 40.0),
    ("max 0: never", {"a": (40.0, 0), **HEALTHY3}, (), {"max_concurrent": 0}, "budget", None),
    ("same pod, other member (a rejoined member): budget", {"a": (40.0, 0), **HEALTHY3},
     (("a", "m-old", 10.0),), {}, "budget", 50.0),
    ("2 of 3 stalled > 50%: systemic", {"a": (40.0, 0), "b": (20.0, 0), "c": (1.0, 0)}, (), {}, "systemic-stall", None),
    ("2 of 4 stalled = 50%: not more, permit", {"a": (40.0, 0), "b": (20.0, 0), "c": (1.0, 0), "d": (1.0, 0)},
     (), {}, "permit", None),
    ("age exactly stall/2 does not count", {"a": (40.0, 0), "b": (15.0, 0), "c": (1.0, 0)}, (), {}, "permit", None),
    ("systemic wins over a free budget and settle", {"a": (40.0, 0), "b": (20.0, 0), "c": (1.0, 0)},
     (), {"settle": 5.0}, "systemic-stall", None),
    ("alone: 1 of 1 is systemic", {"a": (40.0, 0)}, (), {}, "systemic-stall", None),
    ("a stale stalled peer is ignored", {"a": (40.0, 0), "b": (90.0, 121.0), "c": (1.0, 0), "d": (1.0, 0)},
     (), {}, "permit", None),
    ("stale healthy peers are not counted either", {"a": (40.0, 0), "b": (1.0, 121.0), "c": (1.0, 200.0)},
     (), {}, "systemic-stall", None),
    ("a peer whose clock is ahead counts as fresh", {"a": (40.0, 0), "b": (20.0, -3.0), "c": (1.0, 0)},
     (), {}, "systemic-stall", None),
    ("first request waits for the settle delay", {"a": (40.0, 0), **HEALTHY3}, (), {"settle": 5.0}, "settle", 5.0),
    ("systemic with 100%", {"a": (40.0, 0), "b": (40.0, 0)}, (), {"systemic_percent": 100.0}, "permit", None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "members", "permits", "overrides", "expected", "retry"), TABLE, ids=[t[0] for t in TABLE]
)
def test_decide_permit_table(
    *,
    case: str,
    members: dict[str, tuple[float, float]],
    permits: tuple[tuple[str, str, float], ...],
    overrides: dict[str, Any],
    expected: str,
    retry: float | None,
) -> None:
    decision = lg.decide_permit(
        ledger_of(members, permits), "a", STALL, NOW, member_id="m-a", **{**POLICY, **overrides}
    )
    if expected == "permit":
        assert isinstance(decision, Permit), decision
        assert (decision.pod, decision.member_id, decision.granted, decision.reused) == ("a", "m-a", NOW, False)
        assert decision.ledger.permits[-1] == PermitRecord("a", "m-a", NOW)
        assert decision.ledger.members["a"].asked is None
    else:
        assert isinstance(decision, Refusal), decision
        assert decision.cause == expected, decision.message
        assert decision.ledger.permits == tuple(
            p for p in decision.ledger.permits if NOW - p.granted < POLICY["cooldown"]
        )
        assert decision.retry_at == (None if retry is None else NOW + retry)
        assert decision.ledger.members["a"].asked == NOW  # the settle clock starts at the first request
        assert all(p.member_id != "m-a" for p in decision.ledger.permits)


def test_settle_runs_from_the_first_request_and_survives_serialization() -> None:
    policy = {**POLICY, "settle": 5.0}
    first = lg.decide_permit(ledger_of({"a": (40.0, 0), **HEALTHY3}), "a", STALL, NOW, member_id="m-a", **policy)
    assert isinstance(first, Refusal)
    assert first.cause == "settle"
    stored = lg.loads(lg.dumps(first.ledger))
    later = lg.publish(stored, "a", 44.0, NOW + 4.0, stall_timeout=STALL)
    early = lg.decide_permit(later, "a", STALL, NOW + 4.0, member_id="m-a", **policy)
    assert isinstance(early, Refusal)
    assert (early.cause, early.retry_at) == ("settle", NOW + 5.0)
    done = lg.decide_permit(
        lg.publish(early.ledger, "a", 45.0, NOW + 5.0), "a", STALL, NOW + 5.0, member_id="m-a", **policy
    )
    assert isinstance(done, Permit)
    assert done.granted == NOW + 5.0
    assert done.ledger.members["a"].asked is None


def test_polling_again_resets_the_settle_clock() -> None:
    policy = {**POLICY, "settle": 5.0}
    first = lg.decide_permit(ledger_of({"a": (40.0, 0), **HEALTHY3}), "a", STALL, NOW, member_id="m-a", **policy)
    recovered = lg.publish(first.ledger, "a", 0.2, NOW + 10.0, stall_timeout=STALL)
    assert recovered.members["a"].asked is None
    again = lg.decide_permit(
        lg.publish(recovered, "a", 40.0, NOW + 50.0), "a", STALL, NOW + 50.0, member_id="m-a", **policy
    )
    assert isinstance(again, Refusal)
    assert (again.cause, again.retry_at) == ("settle", NOW + 55.0)


def test_a_retried_request_gets_its_own_permit_back_not_a_budget_refusal() -> None:
    granted = lg.decide_permit(ledger_of({"a": (40.0, 0), **HEALTHY3}), "a", STALL, NOW, member_id="m-a", **POLICY)
    assert isinstance(granted, Permit)
    retried = lg.decide_permit(granted.ledger, "a", STALL, NOW + 1.0, member_id="m-a", **POLICY)
    assert isinstance(retried, Permit)
    assert retried.reused
    assert retried.granted == NOW
    assert retried.ledger.permits == granted.ledger.permits  # not counted twice
    other = lg.decide_permit(
        lg.publish(granted.ledger, "b", 40.0, NOW + 1), "b", STALL, NOW + 1, member_id="m-b", **POLICY
    )
    assert isinstance(other, Refusal)
    assert other.cause == "budget"


def test_asking_without_publishing_first_is_a_caller_error() -> None:
    with pytest.raises(ValueError, match="publish it first"):
        lg.decide_permit(ledger_of(HEALTHY3), "a", STALL, NOW, member_id="m-a", **POLICY)


def test_publish_replaces_the_pods_entry_and_drops_gone_pods() -> None:
    ledger = ledger_of({"a": (1.0, 10.0), "gone": (50.0, 121.0), "b": (3.0, 120.0)})
    out = lg.publish(ledger, "a", 12.3456, NOW)
    assert out.members == {"a": Entry(12.346, NOW), "b": Entry(3.0, NOW - 120.0)}
    assert lg.count(out, STALL, NOW) == lg.Count(stalled=0, members=2)


@pytest.mark.parametrize(
    ("entry", "age", "now", "expected"),
    [
        (None, 0.0, NOW, True),  # never published
        (Entry(1.0, NOW - 10), 2.0, NOW, False),  # still healthy, recently published
        (Entry(1.0, NOW - 40), 2.0, NOW, True),  # refresh due (120 / 3)
        (Entry(1.0, NOW - 10), 16.0, NOW, True),  # crossed stall/2 upwards
        (Entry(20.0, NOW - 10), 25.0, NOW, False),  # still stalled
        (Entry(20.0, NOW - 10), 0.1, NOW, True),  # polls again
    ],
)
def test_should_publish(entry: Entry | None, age: float, now: float, expected: bool) -> None:
    assert lg.should_publish(entry, age, STALL, now) is expected


# -- the annotation ------------------------------------------------------------------------------------------------


def test_the_annotation_format_is_compact_versioned_json() -> None:
    ledger = Ledger({"a": Entry(31.2, 1763700000.123, 1763699998.5)}, (PermitRecord("a", "m-1", 1763700001.5),))
    text = lg.dumps(ledger)
    assert json.loads(text) == {
        "v": 1,
        "members": {"a": {"age": 31.2, "at": 1763700000.123, "asked": 1763699998.5}},
        "permits": [{"pod": "a", "member": "m-1", "at": 1763700001.5}],
    }
    assert " " not in text
    assert lg.loads(text) == ledger


def test_unknown_fields_of_a_newer_writer_are_kept_on_rewrite() -> None:
    newer = {
        "v": 2, "shard": "eu-1",
        "members": {"a": {"age": 1, "at": NOW, "cpu": 0.9}, "b": {"age": 2, "at": NOW}},
        "permits": [{"pod": "b", "member": "m", "at": NOW, "by": "x"}],
    }  # fmt: skip
    ledger = lg.loads(json.dumps(newer))
    rewritten = json.loads(lg.dumps(lg.publish(ledger, "b", 3.0, NOW + 1)))
    assert rewritten["shard"] == "eu-1"
    assert rewritten["members"]["a"]["cpu"] == 0.9
    assert rewritten["permits"][0]["by"] == "x"
    assert rewritten["v"] == 1  # the writer's version


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{", "not JSON"),
        ("[]", "not a JSON object"),
        ('{"members": {}}', "v is missing"),
        ('{"v": 0}', "v must be greater than or equal to 1, got 0"),
        ('{"v": true}', "v must be an integer, got true"),
        ('{"v": 1, "members": []}', "members must be an object"),
        ('{"v": 1, "permits": {}}', "permits must be a list"),
        ('{"v": 1, "members": {"a": {"age": "1", "at": 1}}}', 'members.a.age must be a number, got "1"'),
        ('{"v": 1, "members": {"a": {"age": 1, "at": NaN}}}', "members.a.at must be a finite number"),
        ('{"v": 1, "permits": [{"pod": "a", "at": 1}]}', "permits[0].member is missing"),
        ('{"v": 1, "permits": [{"pod": 7, "member": "m", "at": 1}]}', "permits[0].pod must be a string, got 7"),
    ],
)
def test_a_bad_annotation_is_one_line_naming_the_field(text: str, fragment: str) -> None:
    with pytest.raises(lg.LedgerDecodeError, match=rf"vigil\.dev/budget: .*{re.escape(fragment)}") as info:
        lg.loads(text)
    assert "\n" not in str(info.value)


def test_absent_annotation_is_an_empty_ledger() -> None:
    assert lg.loads(None) == lg.loads("") == Ledger()


def test_over_the_cap_the_oldest_entries_go_first() -> None:
    ledger = Ledger({f"pod-{i:04d}": Entry(1.0, NOW + i) for i in range(2000)}, (PermitRecord("pod-1", "m", NOW),))
    text = lg.dumps(ledger)
    assert len(text.encode()) <= lg.MAX_BYTES
    kept = lg.loads(text)
    assert kept.permits == ledger.permits
    assert 500 < len(kept.members) < 2000
    assert min(e.published for e in kept.members.values()) > max(
        e.published for pod, e in ledger.members.items() if pod not in kept.members
    )


# -- properties ----------------------------------------------------------------------------------------------------

PODS = [f"pod-{i}" for i in range(6)]
step = st.tuples(
    st.integers(0, 20_000),  # ms since the previous step
    st.sampled_from(PODS),
    st.integers(0, 60_000),  # poll age, ms
    st.booleans(),  # ask for a permit (else: only publish)
    st.integers(0, 2),  # which member id of that pod (a rejoin is a new member)
)


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(step, min_size=1, max_size=60),
    max_concurrent=st.integers(0, 3),
    cooldown=st.integers(1, 90),
    systemic=st.sampled_from([0.0, 25.0, 50.0, 75.0, 100.0]),
    settle=st.sampled_from([0.0, 1.0, 5.0]),
    freshness=st.sampled_from([10.0, 120.0]),
)
def test_budget_and_systemic_guarantees_hold_for_any_sequence(
    *,
    steps: list[tuple[int, str, int, bool, int]],
    max_concurrent: int,
    cooldown: int,
    systemic: float,
    settle: float,
    freshness: float,
) -> None:
    text = ""  # the Lease annotation, as the sidecars would read and write it
    now = NOW
    granted: list[float] = []
    for dt, pod, age_ms, ask, member in steps:
        now = round(now + dt / 1000, 3)
        ledger = lg.publish(lg.loads(text), pod, age_ms / 1000, now, stall_timeout=STALL, freshness=freshness)
        if ask:
            decision = lg.decide_permit(
                ledger, pod, STALL, now, member_id=f"{pod}-m{member}", max_concurrent=max_concurrent,
                cooldown=cooldown, systemic_percent=systemic, settle=settle, freshness=freshness,
            )  # fmt: skip
            fresh = [e for e in ledger.members.values() if now - e.published <= freshness]
            stalled = sum(1 for e in fresh if e.poll_age > STALL / 2)
            if isinstance(decision, Permit):
                assert stalled * 100 <= systemic * len(fresh), "a permit while more than systemic% stall"
                if not decision.reused:
                    granted.append(decision.granted)
            else:
                assert decision.cause != "systemic-stall" or stalled * 100 > systemic * len(fresh)
            ledger = decision.ledger
        text = lg.dumps(ledger)
    for start in granted:
        in_window = [t for t in granted if start <= t < start + cooldown]
        assert len(in_window) <= max_concurrent, f"{len(in_window)} permits within {cooldown}s of {start}"


times = st.integers(1_700_000_000_000, 1_800_000_000_000).map(lambda ms: ms / 1000)
ages = st.integers(0, 10_000_000).map(lambda ms: ms / 1000)
json_values = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.text(max_size=8))
extras = st.dictionaries(st.text(min_size=1, max_size=6).map(lambda k: "x-" + k), json_values, max_size=2)
entries = st.builds(Entry, ages, times, st.none() | times, extras)
permits = st.builds(PermitRecord, st.text(min_size=1, max_size=12), st.text(max_size=30), times, extras)
handoffs = st.builds(Handoff, st.text(min_size=1, max_size=12), st.integers(0, 2**31 - 1), times, times, extras)
marks = st.builds(
    PoisonMark, st.text(min_size=1, max_size=12), st.integers(0, 2**31 - 1), st.none() | st.integers(0, 2**62), times,
    extras,
)  # fmt: skip
ledgers = st.builds(
    Ledger,
    st.dictionaries(st.text(min_size=1, max_size=40), entries, max_size=30),
    st.lists(permits, max_size=5).map(lambda ps: tuple(sorted(ps, key=lambda p: p.granted))),
    extras,
    st.lists(handoffs, max_size=4).map(tuple),
    st.lists(marks, max_size=3).map(tuple),
)


@settings(max_examples=200, deadline=None)
@given(ledgers)
def test_serialization_round_trips(ledger: Ledger) -> None:
    assert lg.loads(lg.dumps(ledger)) == ledger


def _as_0_1_0_wrote(ledger: Ledger) -> str:
    """The annotation as the hand-written encoder of 0.1.0 wrote it (members oldest first; the guard's lists only
    when not empty; unknown fields ahead of the known ones)."""
    doc: dict[str, Any] = {
        **ledger.extra,
        "v": 1,
        "members": {
            pod: {**e.extra, "age": e.poll_age, "at": e.published, **({} if e.asked is None else {"asked": e.asked})}
            for pod, e in sorted(ledger.members.items(), key=lambda kv: (kv[1].published, kv[0]))
        },
        "permits": [{**p.extra, "pod": p.pod, "member": p.member_id, "at": p.granted} for p in ledger.permits],
    }
    if ledger.handoffs:
        doc["handoffs"] = [{**h.extra, "topic": h.topic, "partition": h.partition, "at": h.released,
                            "until": h.until} for h in ledger.handoffs]  # fmt: skip
    if ledger.poison:
        doc["poison"] = [{**m.extra, "topic": m.topic, "partition": m.partition, "offset": m.offset,
                          "at": m.marked} for m in ledger.poison]  # fmt: skip
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(ledgers)
def test_the_annotation_is_written_byte_for_byte_as_before(ledger: Ledger) -> None:
    """Sidecars of the previous release share the Lease: what they wrote and what this one writes are the same
    bytes for the same ledger."""
    assert lg.dumps(ledger, max_bytes=10**9) == _as_0_1_0_wrote(ledger)


@settings(max_examples=200, deadline=None)
@given(ledgers, st.integers(300, 3000))
def test_serialization_stays_within_the_cap_keeping_the_newest(ledger: Ledger, cap: int) -> None:
    text = lg.dumps(ledger, max_bytes=cap)
    assert len(text.encode()) <= cap
    kept = lg.loads(text)
    dropped = [e.published for pod, e in ledger.members.items() if pod not in kept.members]
    assert all(kept.members[pod] == ledger.members[pod] for pod in kept.members)
    if dropped and kept.members:
        assert min(e.published for e in kept.members.values()) >= max(dropped)
    if kept.handoffs != ledger.handoffs:  # handoffs go only once every entry has, oldest first
        assert not kept.members
        assert kept.handoffs == ledger.handoffs[len(ledger.handoffs) - len(kept.handoffs) :]
    if kept.permits != ledger.permits:  # then permits
        assert not kept.members
        assert not kept.handoffs
        assert kept.permits == ledger.permits[len(ledger.permits) - len(kept.permits) :]
    if kept.poison != ledger.poison:  # poison marks last: they stop evictions that would do harm
        assert not kept.members
        assert not kept.handoffs
        assert not kept.permits


_IO = {"asyncio", "socket", "aiohttp", "h11", "ssl", "kubernetes", "os", "time", "subprocess", "pathlib", "random"}


def test_the_ledger_does_no_io_and_reads_no_clock() -> None:
    tree = ast.parse(pathlib.Path(lg.__file__).read_text())
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        assert not {n.split(".")[0] for n in names} & _IO, names


def test_lease_name_is_a_valid_kubernetes_name_for_any_group() -> None:
    names = {lg.lease_name(g) for g in ("orders", "Orders", "a/b:c" * 80, "")}
    assert len(names) == 4
    assert all(re.fullmatch(r"vigil-budget-[0-9a-f]{16}", n) for n in names)


# -- the operator's removals share the budget ------------------------------------------------------------------------

# (case, permits already granted (pod, member, seconds before NOW), proven gone, max_concurrent, expected, retry)
REMOVALS: list[tuple[str, tuple[tuple[str, str, float], ...], bool, int, str, Any]] = [
    ("crash loop, budget free: permit", (), False, 1, "permit", None),
    ("crash loop, a stall eviction in the cooldown: budget", (("x", "m-x", 10.0),), False, 1, "budget", 50.0),
    ("crash loop, that eviction's cooldown is over: permit", (("x", "m-x", 60.0),), False, 1, "permit", None),
    ("crash loop, max 2 with one used: permit", (("x", "m-x", 10.0),), False, 2, "permit", None),
    ("pod gone, budget spent: still a permit (it is leaving anyway)", (("x", "m-x", 10.0),), True, 1, "permit", None),
    ("pod gone, max 0: still a permit", (), True, 0, "permit", None),
    ("crash loop, max 0: never", (), False, 0, "budget", None),
]  # fmt: skip


@pytest.mark.parametrize(("case", "held", "proven", "max_concurrent", "expected", "retry"), REMOVALS,
                         ids=[r[0] for r in REMOVALS])  # fmt: skip
def test_decide_removal_table(  # noqa: PLR0917 - one parameter per table column
    case: str, held: tuple[tuple[str, str, float], ...], proven: bool, max_concurrent: int, expected: str, retry: Any
) -> None:
    ledger = ledger_of({"b": (1.0, 0.0)}, held)
    decision = lg.decide_removal(ledger, "pod-3", NOW, member_id="m-3", proven_gone=proven,
                                 max_concurrent=max_concurrent, cooldown=60.0)  # fmt: skip
    if expected == "permit":
        assert isinstance(decision, Permit), case
        assert decision.ledger.permits[-1] == PermitRecord("pod-3", "m-3", NOW)
        assert decision.ledger.members == ledger.members  # the operator publishes no poll age
    else:
        assert isinstance(decision, Refusal), case
        assert decision.cause == expected
        assert decision.retry_at == (None if retry is None else NOW + retry)
        assert decision.ledger.permits == tuple(p for p in ledger.permits if NOW - p.granted < 60.0)


def test_a_removal_counts_against_the_sidecars_next_eviction() -> None:
    """One budget: a crash-loop removal by the operator spends it for a sidecar's stall eviction in the cooldown."""
    removed = lg.decide_removal(ledger_of({}), "pod-3", NOW, member_id="m-3", proven_gone=False, max_concurrent=1,
                                cooldown=60.0)  # fmt: skip
    assert isinstance(removed, Permit)
    later = NOW + 5
    asking = lg.publish(lg.loads(lg.dumps(removed.ledger)), "a", 40.0, later, stall_timeout=STALL)
    asking = lg.publish(asking, "b", 1.0, later, stall_timeout=STALL)
    asking = lg.publish(asking, "c", 1.0, later, stall_timeout=STALL)
    decision = lg.decide_permit(asking, "a", STALL, later, member_id="m-a", **POLICY)
    assert isinstance(decision, Refusal)
    assert decision.cause == "budget"
    assert decision.retry_at == NOW + 60.0


def test_a_retried_removal_gets_its_permit_back() -> None:
    first = lg.decide_removal(ledger_of({}), "pod-3", NOW, member_id="m-3", proven_gone=False, max_concurrent=1,
                              cooldown=60.0)  # fmt: skip
    assert isinstance(first, Permit)
    again = lg.decide_removal(first.ledger, "pod-3", NOW + 2, member_id="m-3", proven_gone=False, max_concurrent=1,
                              cooldown=60.0)  # fmt: skip
    assert isinstance(again, Permit)
    assert again.reused
    assert again.ledger.permits == first.ledger.permits


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(st.tuples(st.integers(0, 30_000), st.integers(0, 4), st.booleans()), min_size=1, max_size=40),
    max_concurrent=st.integers(0, 3),
    cooldown=st.integers(1, 90),
)
def test_removals_that_may_come_back_never_exceed_the_budget(
    steps: list[tuple[int, int, bool]], max_concurrent: int, cooldown: int
) -> None:
    """Any mix of proven and unproven removals: the unproven ones granted within any cooldown window, together
    with every permit recorded before them in it, never exceed `max_concurrent`; proven ones are never refused."""
    text, now = "", NOW
    recorded: list[tuple[float, bool]] = []
    for dt, pod, proven in steps:
        now = round(now + dt / 1000, 3)
        decision = lg.decide_removal(lg.loads(text), f"pod-{pod}", now, member_id=f"m-{pod}", proven_gone=proven,
                                     max_concurrent=max_concurrent, cooldown=cooldown)  # fmt: skip
        if proven:
            assert isinstance(decision, Permit)
        if isinstance(decision, Permit) and not decision.reused:
            in_window = [t for t, _ in recorded if now - t < cooldown]
            assert proven or len(in_window) < max_concurrent
            recorded.append((now, proven))
        text = lg.dumps(decision.ledger)
