"""Which member is this pod's: proven by instance id, reported member id or client.id; never by host; refuse ties."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vigil_core.identity import Match, MatchBasis, NoMatch, ObservedMember, PodIdentity, find_member

LOCAL = "/127.0.0.1"


def member(member_id: str, client_id: str, instance_id: str | None = None, host: str = LOCAL) -> ObservedMember:
    return ObservedMember(member_id=member_id, instance_id=instance_id, client_id=client_id, host=host)


POD0_STATIC = member("pod-0-8d1c", "pod-0", "ns-pod-0")
POD1_STATIC = member("pod-1-77aa", "pod-1", "ns-pod-1")
POD0_DYNAMIC = member("pod-0-1111", "pod-0")
POD0_OLD = member("pod-0-0000", "pod-0")
POD1_DYNAMIC = member("pod-1-2222", "pod-1")
KIP848 = member("Zk3hV9wQTtu1c2s9aXq2Vg", "pod-0")
PREFIX_ONLY = member("pod-0-3333", "some-app")
LONGER_NAME = member("pod-0-x-4444", "pod-0-x")

# (case, members, pod, expected member or None, basis or a phrase of the refusal)
CASES = [
    ("instance id", [POD1_STATIC, POD0_STATIC], PodIdentity("pod-0", "ns-pod-0"), POD0_STATIC, MatchBasis.INSTANCE_ID),
    ("instance id beats a client.id tie", [POD0_STATIC, POD0_DYNAMIC, POD0_OLD], PodIdentity("pod-0", "ns-pod-0"),
     POD0_STATIC, MatchBasis.INSTANCE_ID),
    ("two members with the instance id (a merged stale view)", [POD0_STATIC, member("pod-0-9", "x", "ns-pod-0")],
     PodIdentity("pod-0", "ns-pod-0"), None, "2 members have group.instance.id 'ns-pod-0'"),
    ("instance id absent, app ignored it and is dynamic", [POD1_STATIC, POD0_DYNAMIC],
     PodIdentity("pod-0", "ns-pod-0"), POD0_DYNAMIC, MatchBasis.CLIENT_ID),
    ("client.id fits but the member is another static identity", [member("pod-0-5", "pod-0", "other-ns-pod-0")],
     PodIdentity("pod-0", "ns-pod-0"), None, "holds group.instance.id 'other-ns-pod-0', not the pod's 'ns-pod-0'"),
    ("reported member id", [POD0_DYNAMIC, POD1_DYNAMIC], PodIdentity("pod-0", reported_member_id="pod-0-1111"),
     POD0_DYNAMIC, MatchBasis.REPORTED_MEMBER_ID),
    ("reported member id settles a crashed container's leftover", [POD0_OLD, POD0_DYNAMIC],
     PodIdentity("pod-0", reported_member_id="pod-0-1111"), POD0_DYNAMIC, MatchBasis.REPORTED_MEMBER_ID),
    ("stale reported member id, then client.id", [POD0_DYNAMIC, POD1_DYNAMIC],
     PodIdentity("pod-0", reported_member_id="pod-0-gone"), POD0_DYNAMIC, MatchBasis.CLIENT_ID),
    ("reported member id of another static identity", [member("m-1", "pod-0", "ns-pod-9")],
     PodIdentity("pod-0", "ns-pod-0", "m-1"), None, "Member 'm-1' fits pod 'pod-0' by member or client id but holds"),
    ("client.id", [POD1_DYNAMIC, POD0_DYNAMIC], PodIdentity("pod-0"), POD0_DYNAMIC, MatchBasis.CLIENT_ID),
    ("client.id of a KIP-848 member (no client.id prefix)", [KIP848, POD1_DYNAMIC], PodIdentity("pod-0"), KIP848,
     MatchBasis.CLIENT_ID),
    ("client.id of a static member whose instance id the pod does not know", [POD0_STATIC], PodIdentity("pod-0"),
     POD0_STATIC, MatchBasis.CLIENT_ID),
    ("client.id tie: old member of a crashed container next to the new one", [POD0_OLD, POD0_DYNAMIC],
     PodIdentity("pod-0"), None, "2 members have client.id 'pod-0' (pod-0-0000, pod-0-1111)"),
    ("member id prefix alone", [PREFIX_ONLY], PodIdentity("pod-0"), None, "No member of the group has client.id"),
    ("a longer pod name's client.id", [LONGER_NAME], PodIdentity("pod-0"), None, "client.id 'pod-0'"),
    ("same host for everyone, nothing else", [POD1_DYNAMIC, member("a-1", "a"), member("b-1", "b")],
     PodIdentity("pod-0", "ns-pod-0", "m-9"), None, "a host match is never enough"),
    ("empty group", [], PodIdentity("pod-0"), None, "No member of the group has client.id 'pod-0'"),
    ("empty instance id counts as none", [POD0_DYNAMIC, member("e-1", "e", "")], PodIdentity("pod-0", ""),
     POD0_DYNAMIC, MatchBasis.CLIENT_ID),
    ("a member's empty instance id counts as none", [member("pod-0-7", "pod-0", "")], PodIdentity("pod-0", "ns-pod-0"),
     member("pod-0-7", "pod-0", ""), MatchBasis.CLIENT_ID),
    ("no pod name", [member("x-1", "")], PodIdentity(""), None, "The pod has no name"),
]  # fmt: skip


@pytest.mark.parametrize(("members", "pod", "expected", "how"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_find_member(
    members: list[ObservedMember], pod: PodIdentity, expected: ObservedMember | None, how: MatchBasis | str
) -> None:
    found = find_member(members, pod)
    if expected is None:
        assert isinstance(found, NoMatch)
        assert isinstance(how, str)
        assert how in found.reason
        assert "\n" not in found.reason
    else:
        assert found == Match(expected, MatchBasis(how))


def test_pod_behind_snat_shares_a_host_with_its_neighbours_yet_only_its_own_member_matches() -> None:
    snat = "/10.0.0.5"
    members = [member("web-0-a", "web-0", host=snat), member("web-1-b", "web-1", host=snat)]
    assert find_member(members, PodIdentity("web-1")) == Match(members[1], MatchBasis.CLIENT_ID)
    assert isinstance(find_member(members, PodIdentity("web-2")), NoMatch)


# --- properties: small alphabets so that collisions (ties, near-misses) are common ---------------------------------

names = st.sampled_from(["pod-0", "pod-1", "pod-0-x", "app", ""])
ids = st.sampled_from(["pod-0-1", "pod-0-2", "pod-1-1", "m-1", "Zk3hV9"])
instances = st.none() | st.sampled_from(["ns-pod-0", "ns-pod-1", ""])
hosts = st.sampled_from([LOCAL, "/10.0.0.5"])
members_st = st.lists(st.builds(ObservedMember, member_id=ids, instance_id=instances, client_id=names, host=hosts))
pods = st.builds(PodIdentity, pod_name=names, instance_id=instances, reported_member_id=st.none() | ids)


def _relates(m: ObservedMember, pod: PodIdentity, basis: MatchBasis) -> bool:
    match basis:
        case MatchBasis.INSTANCE_ID:
            return bool(pod.instance_id) and m.instance_id == pod.instance_id
        case MatchBasis.REPORTED_MEMBER_ID:
            return bool(pod.reported_member_id) and m.member_id == pod.reported_member_id
        case MatchBasis.CLIENT_ID:
            return bool(pod.pod_name) and m.client_id == pod.pod_name


def _eligible(m: ObservedMember, pod: PodIdentity) -> bool:
    """Not someone else's static identity."""
    return not pod.instance_id or m.instance_id in (None, "", pod.instance_id)


@given(members=members_st, pod=pods)
def test_a_match_is_proven_and_unique_on_its_basis(members: list[ObservedMember], pod: PodIdentity) -> None:
    found = find_member(members, pod)
    if isinstance(found, Match):
        assert found.member in members
        assert _relates(found.member, pod, found.basis)
        assert _eligible(found.member, pod)
        rivals = [m for m in members if m != found.member and _eligible(m, pod) and _relates(m, pod, found.basis)]
        assert rivals == []
    else:
        assert found.reason
        assert "\n" not in found.reason


@given(members=members_st, pod=pods, host=hosts)
def test_hosts_never_change_the_answer(members: list[ObservedMember], pod: PodIdentity, host: str) -> None:
    rehosted = [ObservedMember(m.member_id, m.instance_id, m.client_id, host) for m in members]
    before, after = find_member(members, pod), find_member(rehosted, pod)
    if isinstance(before, Match):
        assert isinstance(after, Match)
        assert (before.member.member_id, before.basis) == (after.member.member_id, after.basis)
    else:
        assert isinstance(after, NoMatch)


@given(members=members_st, pod=pods)
def test_never_matches_a_member_related_to_the_pod_only_by_host(
    members: list[ObservedMember], pod: PodIdentity
) -> None:
    found = find_member(members, pod)
    if isinstance(found, Match):
        assert any(_relates(found.member, pod, basis) for basis in MatchBasis)


@given(members=members_st, pod=pods, data=st.data())
def test_order_of_members_does_not_matter(members: list[ObservedMember], pod: PodIdentity, data: st.DataObject) -> None:
    shuffled = data.draw(st.permutations(members))
    assert find_member(members, pod) == find_member(shuffled, pod)
