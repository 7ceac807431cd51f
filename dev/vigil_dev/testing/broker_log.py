"""What the brokers' own logs say about a group: the test rules count generations there, never from vigil."""

import re

from vigil_dev.kafka.cluster import KafkaCluster


def broker_lines(kafka: KafkaCluster, group: str, pattern: str) -> list[tuple[int, tuple[str, ...]]]:
    """(node id, regex groups) of every line of every node's server.log matching `pattern` (`{g}`: the group)."""
    line = re.compile(pattern.format(g=re.escape(group)))
    found: list[tuple[int, tuple[str, ...]]] = []
    for node in kafka.nodes:
        path = kafka.server_log(node.node_id)
        text = path.read_text() if path.exists() else ""
        found += [(node.node_id, m.groups()) for m in line.finditer(text)]
    return found


def stabilized(kafka: KafkaCluster, group: str) -> list[tuple[int, int]]:
    """Every (generation, members) any node stabilized for `group`, in order: the group's rebalances."""
    # 3.9's classic coordinator names the offsets partition: "generation 2 (__consumer_offsets-3) with 1 members"
    pattern = r"Stabilized group {g} generation (\d+)(?: \(__consumer_offsets-\d+\))? with (\d+) members"
    hits = broker_lines(kafka, group, pattern)
    return sorted((int(gen), int(n)) for _, (gen, n) in hits)


def generations(kafka: KafkaCluster, group: str) -> list[int]:
    return [gen for gen, _ in stabilized(kafka, group)]


def static_releases(kafka: KafkaCluster, group: str, instance_id: str) -> list[str]:
    """The member ids the broker logged as having left `group` "temporarily" under `instance_id` (KIP-848 static
    members, epoch -2: released by their client as it closed, or on their behalf), in log order."""
    iid = re.escape(instance_id)
    pattern = rf"\[GroupId {{g}}\] Static member (\S+) with instance id {iid} temporarily left the consumer group"
    return [member for _, (member,) in broker_lines(kafka, group, pattern)]


def static_replacements(kafka: KafkaCluster, group: str, instance_id: str) -> list[tuple[str, str]]:
    """(new member, replaced member) each time a KIP-848 static member took `instance_id` over in `group`."""
    iid = re.escape(instance_id)
    pattern = (
        rf"\[GroupId {{g}}\] Static member with instance id {iid} re-joins the consumer group using the consumer"
        r" protocol\. Created a new member (\S+) to replace the existing member (\S+)\."
    )
    return [(new, old) for _, (new, old) in broker_lines(kafka, group, pattern)]


def unreleased_refusals(kafka: KafkaCluster, group: str, instance_id: str) -> list[tuple[str, ...]]:
    """Every join the broker refused because another member still held `instance_id` (UNRELEASED_INSTANCE_ID)."""
    iid = re.escape(instance_id)
    return [hit for _, hit in broker_lines(kafka, group, rf"\[GroupId {{g}}\] Static member (\S+) with instance"
                                                          rf" id {iid} cannot join")]  # fmt: skip


def epoch_bumps(kafka: KafkaCluster, group: str) -> list[int]:
    """Every KIP-848 group epoch the coordinator bumped `group` to, in log order (4.0: "Bumped group epoch to N.";
    4.1+ adds "with metadata hash H")."""
    return [int(epoch) for _, (epoch,) in broker_lines(kafka, group, r"\[GroupId {g}\] Bumped group epoch to (\d+)")]


def session_expiries(kafka: KafkaCluster, group: str) -> list[str]:
    """The KIP-848 members the coordinator fenced from `group` because their session expired."""
    pattern = r"\[GroupId {g}\] Member (\S+) fenced from the group because the member session expired"
    return [member for _, (member,) in broker_lines(kafka, group, pattern)]
