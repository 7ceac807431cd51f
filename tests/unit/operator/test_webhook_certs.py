"""The webhook certificates' rotation plan: each step in a table, and a simulation in which the apiservers and the
replicas lag behind every change by up to `propagation`: no served certificate is ever one they do not trust."""

import dataclasses
import datetime
import itertools
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vigil_operator.domain import webhook_certs as wc

T0 = datetime.datetime(2026, 11, 26, tzinfo=datetime.UTC)
POLICY = wc.Policy(
    ca_validity=datetime.timedelta(days=9),
    leaf_validity=datetime.timedelta(days=3),
    renew_at=2 / 3,
    propagation=datetime.timedelta(minutes=2),
)
MIN = datetime.timedelta(minutes=1)
DAY = datetime.timedelta(days=1)


def ca(name: str, at: datetime.datetime = T0) -> wc.Cert:
    return wc.Cert(name, at, at + POLICY.ca_validity, name)


def leaf(name: str, issuer: str, at: datetime.datetime = T0) -> wc.Cert:
    return wc.Cert(name, at, at + POLICY.leaf_validity, issuer)


def material(
    bundle: tuple[wc.Cert, ...] = (ca("A"),),
    issuer: str = "A",
    published_at: datetime.datetime | None = T0,
    issued_at: datetime.datetime = T0,
    **kw: str,
) -> wc.Material:
    return wc.Material(bundle, leaf("L", issuer, issued_at), published_at, issued_at, **kw)


CASES: list[tuple[str, wc.Material | None, frozenset[str] | None, datetime.datetime, type]] = [
    ("nothing yet", None, None, T0, wc.Create),
    ("a configuration without the CA", material(), frozenset(), T0, wc.Publish),
    ("configurations that disagree", material(), None, T0, wc.Publish),
    ("a bundle written, not yet published", material(published_at=None), frozenset({"A"}), T0, wc.Publish),
    ("all in order", material(), frozenset({"A"}), T0 + MIN, wc.Wait),
    ("a rotation asked", material(rotate_requested="1"), frozenset({"A"}), T0 + MIN, wc.AddCA),
    ("a rotation asked and done", material(rotate_requested="1", rotated_for="1"), frozenset({"A"}), T0 + MIN, wc.Wait),
    ("the CA past two thirds", material(issued_at=T0 + 5 * DAY), frozenset({"A"}), T0 + 6 * DAY + MIN, wc.AddCA),
    ("the leaf past two thirds", material(), frozenset({"A"}), T0 + 2 * DAY + MIN, wc.IssueLeaf),
    ("a new CA published just now", material((ca("A"), ca("B")), "A", T0 + DAY), frozenset("AB"), T0 + DAY + MIN,
     wc.Wait),
    ("a new CA published long enough", material((ca("A"), ca("B")), "A", T0 + DAY), frozenset("AB"), T0 + DAY + 3 * MIN,
     wc.IssueLeaf),
    ("a new CA not yet published", material((ca("A"), ca("B")), "A", None), frozenset("A"), T0 + DAY, wc.Publish),
    ("the new leaf issued just now", material((ca("A"), ca("B")), "B", T0, T0 + DAY), frozenset("AB"), T0 + DAY + MIN,
     wc.Wait),
    ("the new leaf served everywhere", material((ca("A"), ca("B")), "B", T0, T0 + DAY), frozenset("AB"),
     T0 + DAY + 3 * MIN, wc.DropOldCAs),
    ("the old CA dropped, not yet published", material((ca("B"),), "B", None), frozenset("AB"), T0 + DAY, wc.Publish),
]  # fmt: skip


@pytest.mark.parametrize(("name", "have", "published", "now", "expected"), CASES, ids=[c[0] for c in CASES])
def test_the_step_for_each_state(
    name: str, have: wc.Material | None, published: frozenset[str] | None, now: datetime.datetime, expected: type
) -> None:
    assert isinstance(wc.plan(have, published, now, POLICY), expected)


CHART = wc.Predecessor(ca("chart"), leaf("chart-leaf", "chart"))
#: taken over at T0, the new CA published at once, its certificate issued a propagation later
TAKEN_OVER = dataclasses.replace(material((ca("chart"), ca("A")), "A", T0, T0 + POLICY.propagation), adopted_at=T0)
ADOPT_CASES: list[tuple[str, wc.Material | None, wc.Predecessor | None, datetime.datetime, type]] = [
    ("the chart's certificate served", None, CHART, T0 + MIN, wc.Adopt),
    ("no predecessor", None, None, T0 + MIN, wc.Create),
    ("the chart's certificate expired", None, CHART, CHART.leaf.not_after, wc.Create),
    ("the chart's CA expired", None, dataclasses.replace(CHART, ca=wc.Cert("chart", T0, T0 + MIN, "chart")),
     T0 + MIN, wc.Create),
    ("a certificate its CA did not sign", None, dataclasses.replace(CHART, leaf=leaf("x", "other")), T0 + MIN,
     wc.Create),
    ("material of its own: the predecessor is history", material(), CHART, T0 + MIN, wc.Wait),
    ("the new CA's certificate served, the old replicas maybe not yet replaced", TAKEN_OVER, CHART,
     T0 + 3 * POLICY.propagation, wc.Wait),
    ("the old replicas replaced by now: the chart's CA goes", TAKEN_OVER, CHART,
     T0 + wc.HANDOVER_PROPAGATIONS * POLICY.propagation, wc.DropOldCAs),
]  # fmt: skip

#: (name, old replicas seen, now, expected): what the caller saw of the release's earlier rollout decides
OLD_REPLICA_CASES: list[tuple[str, bool | None, datetime.datetime, type]] = [
    ("gone: the chart's CA goes once the new certificate is served", False, T0 + 2 * POLICY.propagation,
     wc.DropOldCAs),
    ("gone, the new certificate maybe not yet served", False, T0 + POLICY.propagation, wc.Wait),
    ("one left, long after the handover's time", True, T0 + 50 * POLICY.propagation, wc.Wait),
    ("unknown: the handover's time", None, T0 + 2 * POLICY.propagation, wc.Wait),
    ("unknown, the handover's time passed", None, T0 + wc.HANDOVER_PROPAGATIONS * POLICY.propagation, wc.DropOldCAs),
]  # fmt: skip


@pytest.mark.parametrize(("name", "old", "now", "expected"), OLD_REPLICA_CASES, ids=[c[0] for c in OLD_REPLICA_CASES])
def test_the_chart_s_ca_stays_trusted_while_an_old_replica_is_left(
    name: str, old: bool | None, now: datetime.datetime, expected: type
) -> None:
    published = frozenset(c.fingerprint for c in TAKEN_OVER.bundle)
    step = wc.plan(TAKEN_OVER, published, now, POLICY, CHART, old_replicas=old)
    assert isinstance(step, expected)
    if isinstance(step, wc.Wait):
        assert step.until > now


@pytest.mark.parametrize(("name", "have", "predecessor", "now", "expected"), ADOPT_CASES,
                         ids=[c[0] for c in ADOPT_CASES])  # fmt: skip
def test_the_chart_s_certificate_is_adopted_only_while_it_can_be_served(
    name: str, have: wc.Material | None, predecessor: wc.Predecessor | None, now: datetime.datetime, expected: type
) -> None:
    published = frozenset(c.fingerprint for c in have.bundle) if have is not None else frozenset({"A"})
    assert isinstance(wc.plan(have, published, now, POLICY, predecessor), expected)


def test_a_wait_lasts_until_the_first_renewal_is_due() -> None:
    step = wc.plan(material(), frozenset({"A"}), T0 + MIN, POLICY)
    assert step == wc.Wait(T0 + POLICY.leaf_validity * POLICY.renew_at)


def test_a_wait_for_propagation_ends_when_it_has_passed() -> None:
    step = wc.plan(material((ca("A"), ca("B")), "A", T0 + DAY), frozenset("AB"), T0 + DAY, POLICY)
    assert step == wc.Wait(T0 + DAY + POLICY.propagation)


# -- the simulation -------------------------------------------------------------------------------------------


@dataclass
class World:
    """The Secret (`have`), the webhook configurations' bundle, and the history each reader may lag behind."""

    have: wc.Material | None = None
    published: frozenset[str] = frozenset()
    predecessor: wc.Predecessor | None = None
    old_replicas_until: datetime.datetime | None = None
    """The rollout of an upgrade: the release's old replicas serve the chart's certificate, never reloading."""
    old_replicas_seen: bool = False
    """Whether the operator is told if an old replica is left (else it has the handover's time only)."""
    names: "itertools.count[int]" = field(default_factory=itertools.count)
    trust_history: list[tuple[datetime.datetime, frozenset[str]]] = field(default_factory=list)
    served_history: list[tuple[datetime.datetime, str]] = field(default_factory=list)
    requests: int = 0

    def new(self, prefix: str) -> str:
        return f"{prefix}{next(self.names)}"

    def apply(self, step: wc.Step, now: datetime.datetime) -> None:
        """What the operator does for each step (its adapter writes the same changes as PEMs and annotations)."""
        have = self.have
        match step:
            case wc.Create():
                name = self.new("ca")
                first = wc.Cert(name, now, now + POLICY.ca_validity, name)
                self.have = wc.Material((first,), wc.Cert(self.new("leaf"), now, now + POLICY.leaf_validity, name),
                                        None, now)  # fmt: skip
            case wc.Adopt():
                assert self.predecessor is not None
                name = self.new("ca")
                new_ca = wc.Cert(name, now, now + POLICY.ca_validity, name)
                self.have = wc.Material((self.predecessor.ca, new_ca), self.predecessor.leaf, None, now, adopted_at=now)
            case wc.Publish():
                assert have is not None
                self.published = frozenset(c.fingerprint for c in have.bundle)
                self.have = dataclasses.replace(have, bundle_published_at=now)
                self.trust_history.append((now, self.published))
            case wc.AddCA():
                assert have is not None
                name = self.new("ca")
                self.have = dataclasses.replace(
                    have,
                    bundle=(*have.bundle, wc.Cert(name, now, now + POLICY.ca_validity, name)),
                    bundle_published_at=None,
                    rotated_for=have.rotate_requested,
                )
            case wc.IssueLeaf():
                assert have is not None
                issuer = have.signer.fingerprint
                self.have = dataclasses.replace(
                    have, leaf=wc.Cert(self.new("leaf"), now, now + POLICY.leaf_validity, issuer), leaf_issued_at=now
                )
            case wc.DropOldCAs():
                assert have is not None
                self.have = dataclasses.replace(have, bundle=(have.signer,), bundle_published_at=None, adopted_at=None)
            case wc.Wait():
                return
        if self.have is not None and (not self.served_history or self.served_history[-1][1] != self.have.leaf.issuer):
            self.served_history.append((now, self.have.leaf.issuer))

    def maybe(self, history: list[tuple[datetime.datetime, object]], now: datetime.datetime) -> list[object]:
        """What a reader may still see at `now`: the latest, and each value replaced less than `propagation` ago."""
        seen = [value for (at, value), (until, _) in itertools.pairwise(history) if now - until < POLICY.propagation]
        return [*seen, history[-1][1]] if history else []

    def check(self, now: datetime.datetime) -> None:
        if not self.trust_history:
            return  # installing: nothing calls the webhook before its configuration trusts a CA
        old = ["chart"] if self.old_replicas_until is not None and now < self.old_replicas_until else []
        for trusted in self.maybe(self.trust_history, now):  # type: ignore[arg-type]
            for issuer in [*self.maybe(self.served_history, now), *old]:  # type: ignore[arg-type]
                assert issuer in trusted, (now, issuer, trusted, self.have)


SLOW_ROLLOUT = 4 * wc.HANDOVER_PROPAGATIONS
"""Propagations an upgrade's rollout takes in the simulation when the operator sees its old replicas."""


def settle(world: World, now: datetime.datetime) -> wc.Wait:
    for _ in range(10):
        old = None
        if world.old_replicas_seen:
            old = world.old_replicas_until is not None and now < world.old_replicas_until
        step = wc.plan(world.have, world.published, now, POLICY, world.predecessor, old_replicas=old)
        if isinstance(step, wc.Wait):
            assert step.until > now
            return step
        world.apply(step, now)
        world.check(now)
    raise AssertionError(f"no Wait after 10 steps at {now}: {world.have}")


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("advance"), st.integers(min_value=1, max_value=int(4 * DAY.total_seconds()))),
            st.tuples(st.just("rotate"), st.just(0)),
            st.tuples(st.just("wake"), st.just(0)),
        ),
        max_size=40,
    )
)
@pytest.mark.parametrize("start", ["installed", "upgraded from the chart's certificate",
                                   "upgraded, a slow rollout the operator sees"])  # fmt: skip
def test_no_reader_ever_meets_a_certificate_it_does_not_trust(start: str, events: list[tuple[str, int]]) -> None:
    """Installed: nothing before. Upgraded: the apiservers trust the chart's CA and the old replicas serve its
    certificate (issued a day before) when the operator first plans, until the rollout ends: at the latest
    `HANDOVER_PROPAGATIONS` propagations later when the operator cannot see the old replicas, or
    `SLOW_ROLLOUT` propagations later when it sees them."""
    world, now = World(), T0
    if start.startswith("upgraded"):
        world.old_replicas_seen = "sees" in start
        rollout = SLOW_ROLLOUT if world.old_replicas_seen else wc.HANDOVER_PROPAGATIONS
        world.old_replicas_until = T0 + POLICY.propagation * rollout
        world.predecessor = wc.Predecessor(ca("chart", T0 - DAY), leaf("chart-leaf", "chart", T0 - DAY))
        world.published = frozenset({"chart"})
        world.trust_history.append((T0 - DAY, world.published))
        world.served_history.append((T0 - DAY, "chart"))
    wait = settle(world, now)
    for kind, seconds in events:
        if kind == "advance":
            target = now + datetime.timedelta(seconds=seconds)
            while wait.until <= target:  # the operator wakes when a Wait ends, and at every check in between
                now = wait.until
                world.check(now)
                wait = settle(world, now)
            now = target
        elif kind == "rotate":
            assert world.have is not None
            world.requests += 1
            world.have = dataclasses.replace(world.have, rotate_requested=str(world.requests))
        world.check(now)
        wait = settle(world, now)
    # and it gets there: a rotation asked is done within three propagations (a takeover: the old replicas' hold),
    # one CA left, serving from it
    for _ in range(5 + 4 * SLOW_ROLLOUT):  # an old replica left: asked again every quarter of a propagation
        now = wait.until if wait.until < now + (SLOW_ROLLOUT + 1) * POLICY.propagation else now
        wait = settle(world, now)
    assert world.have is not None
    if world.requests:
        assert world.have.rotated_for == str(world.requests)
    assert len(world.have.bundle) == 1
    assert world.have.leaf.issuer == world.have.signer.fingerprint
    assert world.published == {world.have.signer.fingerprint}
    assert now < world.have.leaf.not_after
    assert now < world.have.signer.not_after
