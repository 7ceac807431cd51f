"""The poison-pill guard of the eviction budget: a member that stalls on a partition vigil just handed over from
another stalled member is not evicted; the partition stays marked until its committed offset moves past."""

import ast
import pathlib
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vigil_core.budget import ledger as lg
from vigil_core.budget import poison
from vigil_core.budget.ledger import Entry, Ledger, Permit, Refusal
from vigil_core.budget.poison import Handoff, PoisonMark

NOW = 1_763_700_000.0
STALL = 30.0
# systemic 100%: never systemic, so these tests see only the poison rule (and the budget after it)
POLICY: dict[str, Any] = {"max_concurrent": 5, "cooldown": 60.0, "systemic_percent": 100.0, "settle": 0.0}
T0, T1 = ("orders", 0), ("orders", 1)


def ask(ledger: Ledger, pod: str, age: float, now: float, owned: tuple[tuple[str, int], ...], **kw: Any) -> Any:
    """`pod` publishes `age` at `now` and asks to evict its member, which owns `owned`."""
    published = lg.publish(ledger, pod, age, now, stall_timeout=STALL)
    return lg.decide_permit(published, pod, STALL, now, member_id=f"m-{pod}", partitions=owned, **{**POLICY, **kw})


def evicted_a() -> Ledger:
    """Member a (owning orders-0) stalled 31 s and was evicted at NOW under a permit."""
    first = ask(Ledger(), "a", 31.0, NOW, (T0,))
    assert isinstance(first, Permit)
    return first.ledger


def test_an_eviction_leaves_a_handoff_per_partition_with_its_expiry() -> None:
    ledger = evicted_a()
    assert ledger.handoffs == (Handoff("orders", 0, NOW, NOW + 3 * STALL + poison.HANDOFF_SLACK),)
    assert lg.loads(lg.dumps(ledger)) == ledger


# (case, b's stall start - NOW, seconds after NOW b asks, b owns, expected)
TABLE: list[tuple[str, float, float, tuple[tuple[str, int], ...], str]] = [
    ("the new owner stalls right after the takeover", 2.0, 2.0 + STALL, (T0,), "poison-suspected"),
    ("... at the window's end (2 stall timeouts)", 2 * STALL, 3 * STALL, (T0, T1), "poison-suspected"),
    ("... after the window: its own stall", 2 * STALL + 1, 3 * STALL + 1, (T0,), "permit"),
    ("stalled before the handoff: not the partition's doing", -1.0, STALL, (T0,), "permit"),
    ("owns only other partitions", 2.0, 2.0 + STALL, (T1,), "permit"),
    ("asks after the handoff expired", 2 * STALL, 3 * STALL + poison.HANDOFF_SLACK + 1, (T0,), "permit"),
]


@pytest.mark.parametrize(("case", "start", "asks", "owned", "expected"), TABLE, ids=[t[0] for t in TABLE])
def test_the_next_owner_of_a_handed_over_partition(
    case: str, start: float, asks: float, owned: tuple[tuple[str, int], ...], expected: str
) -> None:
    now = NOW + asks
    decision = ask(evicted_a(), "b", now - (NOW + start), now, owned, committed={T0: 1200})
    if expected == "permit":
        assert isinstance(decision, Permit), decision
        return
    assert isinstance(decision, Refusal)
    assert decision.cause == "poison-suspected"
    assert decision.suspects == (PoisonMark("orders", 0, 1200, now),)
    assert decision.retry_at is None
    assert "orders-0 at offset 1200" in decision.message
    assert decision.ledger.poison == decision.suspects
    assert decision.ledger.handoffs == ()  # the handoff became the mark
    assert all(p.member_id != "m-b" for p in decision.ledger.permits)


def test_poison_is_named_even_where_the_still_stalled_evicted_member_makes_it_look_systemic() -> None:
    """a, evicted, is still stuck on the record (its entry says so); b stalls on it next: 2 of 3 stalled."""
    ledger = lg.publish(lg.publish(evicted_a(), "a", 60.0, NOW + 29), "c", 0.1, NOW + 29)
    decision = ask(ledger, "b", STALL, NOW + STALL + 2, (T0,), systemic_percent=50.0)
    assert isinstance(decision, Refusal)
    assert (decision.cause, decision.count.stalled, decision.count.members) == ("poison-suspected", 2, 3)


def marked() -> Ledger:
    decision = ask(evicted_a(), "b", STALL, NOW + STALL + 2, (T0,), committed={T0: 1200})
    assert isinstance(decision, Refusal)
    return lg.loads(lg.dumps(decision.ledger))


def test_a_mark_stops_evictions_for_that_partition_until_its_committed_offset_moves_past() -> None:
    later = NOW + 600
    still = ask(marked(), "c", 40.0, later, (T0,), committed={T0: 1200})
    assert isinstance(still, Refusal)
    assert (still.cause, still.suspects) == ("poison-suspected", (PoisonMark("orders", 0, 1200, NOW + STALL + 2),))
    unknown = ask(marked(), "c", 40.0, later, (T0,))
    assert isinstance(unknown, Refusal)  # no offset known: the mark stands
    moved = ask(marked(), "c", 40.0, later, (T0,), committed={T0: 1201})
    assert isinstance(moved, Permit)
    assert moved.ledger.poison == ()


def test_a_mark_expires() -> None:
    decision = ask(marked(), "c", 40.0, NOW + STALL + 2 + poison.POISON_KEPT + 1, (T0,), committed={T0: 1200})
    assert isinstance(decision, Permit)


def test_the_first_stalled_member_rejoining_and_stalling_again_is_no_poison() -> None:
    """An undone eviction: a's app rejoins, gets orders-0 back, still stalled since before the handoff."""
    decision = ask(evicted_a(), "a2", 31.0 + 40.0, NOW + 40.0, (T0,))
    assert isinstance(decision, Permit)


def test_the_operators_removals_keep_marks_and_drop_what_expired() -> None:
    ledger = marked()
    kept = lg.decide_removal(ledger, "x", NOW + 100, member_id="m-x", proven_gone=True, max_concurrent=1, cooldown=60)
    assert kept.ledger.poison == ledger.poison
    gone = lg.decide_removal(
        ledger, "x", NOW + poison.POISON_KEPT + 100, member_id="m-x", proven_gone=True, max_concurrent=1, cooldown=60
    )
    assert gone.ledger.poison == ()


def test_a_ledger_without_the_guard_is_written_as_before() -> None:
    ledger = Ledger({"a": Entry(1.0, NOW)})
    assert lg.dumps(ledger) == '{"v":1,"members":{"a":{"age":1.0,"at":1763700000.0}},"permits":[]}'


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"v":1,"handoffs":{}}', "handoffs must be a list"),
        (
            '{"v":1,"poison":[{"topic":"t","partition":-1,"at":1}]}',
            "poison[0].partition must be greater than or equal to 0, got -1",
        ),
        ('{"v":1,"poison":[{"topic":"t","partition":0,"offset":"x","at":1}]}', "poison[0].offset must be"),
        ('{"v":1,"handoffs":[{"topic":"t","partition":0,"at":1}]}', "handoffs[0].until is missing"),
    ],
)
def test_a_bad_guard_record_is_one_line_naming_it(text: str, fragment: str) -> None:
    with pytest.raises(lg.LedgerDecodeError, match=re.escape(f"vigil.dev/budget: {fragment}")) as info:
        lg.loads(text)
    assert "\n" not in str(info.value)


tps = st.sampled_from([("t", 0), ("t", 1), ("u", 0)])
stamps = st.integers(0, 400).map(lambda s: NOW + s)


@settings(max_examples=300, deadline=None)
@given(
    handoffs=st.lists(st.builds(lambda tp, at: Handoff(tp[0], tp[1], at, at + 100), tps, stamps), max_size=4),
    marks=st.lists(
        st.builds(lambda tp, off, at: PoisonMark(tp[0], tp[1], off, at), tps, st.none() | st.integers(0, 5), stamps),
        max_size=3,
    ),
    owned=st.sets(tps, max_size=3),
    committed=st.dictionaries(tps, st.integers(0, 6)),
    age=st.integers(int(STALL), 300),
    at=st.integers(300, 600).map(lambda s: NOW + s),
)
def test_refused_as_poison_exactly_when_an_owned_partition_is_marked_or_just_handed_over(
    *,
    handoffs: list[Handoff],
    marks: list[PoisonMark],
    owned: set[tuple[str, int]],
    committed: dict[tuple[str, int], int],
    age: int,
    at: float,
) -> None:
    ledger = Ledger(handoffs=tuple(handoffs), poison=tuple(marks))
    decision = ask(ledger, "p", float(age), at, tuple(sorted(owned)), committed=committed)
    start = at - age
    live_marks = [
        m for m in marks
        if at - m.marked <= poison.POISON_KEPT
        and not (m.offset is not None and m.tp in committed and committed[m.tp] > m.offset)
    ]  # fmt: skip
    fresh = [h for h in handoffs if h.until >= at and h.released <= start <= h.released + 2 * STALL]
    expected = any(m.tp in owned for m in live_marks) or any(h.tp in owned for h in fresh)
    poisoned = isinstance(decision, Refusal) and decision.cause == "poison-suspected"
    assert poisoned == expected
    if poisoned:
        assert {m.tp for m in decision.suspects} <= owned
        assert lg.loads(lg.dumps(decision.ledger)) == decision.ledger
    else:
        assert isinstance(decision, Permit)  # the budget (5) and systemic (100%) never refuse here


def test_the_guard_does_no_io_and_reads_no_clock() -> None:
    tree = ast.parse(pathlib.Path(poison.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= {"collections", "dataclasses", "typing"}, imported
