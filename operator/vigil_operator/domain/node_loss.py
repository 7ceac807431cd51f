"""Members on a lost node: removed only with evidence that they stopped consuming.

A node that stops reporting (NotReady / Unknown) says nothing certain about its pods: a partition between the
kubelet and the API server leaves the consumers running and talking to Kafka. The coordinator keeps a dead
member until its session timeout (long for static members); a live one must not be touched. So a member whose
pod is on a node that has been not Ready for `grace` is removed only if, over that same `grace` as watched by the
operator, none of its partitions' committed offsets moved while records were waiting on at least one of them
(end offset above the committed one). A member with nothing waiting is left alone: idle and dead look the same.

What the operator remembers per member (`Suspect`: since when, and the committed offsets then) lives in its
memory; after an operator restart the watch starts again (a later removal, never a wrong one).

Pure: (members with their assignment, the pods on lost nodes, suspects, committed and end offsets, now) →
(departures, suspects).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from vigil_core.kafka.model import MemberView, TopicPartitionRef
from vigil_operator.domain.departures import Departure
from vigil_operator.domain.pods import api_time


@dataclass(frozen=True)
class LostNode:
    """A pod's node whose Ready condition is not True."""

    node: str
    since: datetime
    """The Ready condition's lastTransitionTime (the node's clock is not involved: the controller sets it)."""


def lost_node(node: Mapping[str, Any]) -> LostNode | None:
    """A Node object whose Ready condition is False or Unknown (the kubelet stopped reporting), with when it
    turned so; None when it is Ready or says nothing usable."""
    name = str((node.get("metadata") or {}).get("name") or "")
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") != "Ready":
            continue
        since = api_time(condition.get("lastTransitionTime"))
        if condition.get("status") == "True" or since is None or not name:
            return None
        return LostNode(name, since)
    return None


@dataclass(frozen=True)
class Suspect:
    since: datetime
    """When the operator first saw this member's node not Ready."""
    assignment: frozenset[TopicPartitionRef]
    """Its partitions then: a new assignment starts the watch again."""
    committed: Mapping[TopicPartitionRef, int]
    """Their committed offsets then (a partition without a commit is absent)."""


def judge(
    members: Sequence[MemberView],
    member_pods: Mapping[str, str],
    lost: Mapping[str, LostNode],
    suspects: Mapping[str, Suspect],
    *,
    committed: Mapping[TopicPartitionRef, int],
    end_offsets: Mapping[TopicPartitionRef, int],
    grace: timedelta,
    now: datetime,
) -> tuple[list[Departure], dict[str, Suspect]]:
    """The members to remove now, and the suspects to remember. `member_pods`: member id → its proven pod;
    `lost`: pod → its node, for pods on a node that is not Ready."""
    found: list[Departure] = []
    kept: dict[str, Suspect] = {}
    for member in members:
        pod = member_pods.get(member.member_id)
        node = lost.get(pod or "")
        if pod is None or node is None:
            continue  # not (or no longer) on a lost node: forget it
        own = {tp: committed[tp] for tp in member.assignment if tp in committed}
        before = suspects.get(member.member_id)
        assignment = frozenset(member.assignment)
        if before is None or before.assignment != assignment or before.committed != own:
            kept[member.member_id] = Suspect(now, assignment, own)  # new, reassigned or progressing: watch from now
            continue
        kept[member.member_id] = before
        if now - node.since < grace or now - before.since < grace:
            continue
        waiting = sum(max(0, end_offsets.get(tp, offset) - offset) for tp, offset in own.items())
        if waiting == 0:
            continue  # nothing to consume (or never committed): idle and dead look the same
        lost_for, still_for = int((now - node.since).total_seconds()), int((now - before.since).total_seconds())
        reason = (f"vigil: node {node.node} of pod {pod} not Ready for {lost_for}s, and no commit on its"
                  f" {len(own)} partition(s) for {still_for}s with {waiting} record(s) waiting")  # fmt: skip
        found.append(Departure(member.member_id, member.instance_id, pod, "node-lost", reason))
    return sorted(found, key=lambda d: (d.pod, d.member_id)), kept
