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
    hits = broker_lines(kafka, group, r"Stabilized group {g} generation (\d+) with (\d+) members")
    return sorted((int(gen), int(n)) for _, (gen, n) in hits)


def generations(kafka: KafkaCluster, group: str) -> list[int]:
    return [gen for gen, _ in stabilized(kafka, group)]
