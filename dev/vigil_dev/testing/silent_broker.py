"""A real Kafka broker made silent, for tests of what vigil does when a broker answers nothing: its process stopped
(SIGSTOP), alive, its port open, the kernel accepting connections into the listen backlog and nothing answering them
(a hung broker, a stop-the-world pause). Every request to it waits out the client's timeout. What a test can see of
it: the connections made to it (the kernel lists them until the broker answers again)."""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from vigil_dev.kafka import cluster as kafka_cluster
from vigil_dev.kafka.cluster import KafkaCluster


@dataclass(frozen=True)
class SilentBroker:
    """A one-node cluster whose broker is frozen."""

    cluster: KafkaCluster
    before: frozenset[str]
    """The connections there were when it was frozen (its own clients' last ones, closing)."""

    @property
    def bootstrap(self) -> str:
        return self.cluster.connection().bootstrap_servers

    def connections(self) -> frozenset[str]:
        """The client connections made to it since it was frozen, by their remote end (address:port, as the kernel
        lists it): the kernel alone accepts them, and they stay listed until the broker answers again, so one more
        is one more connect."""
        return connections_to(self.cluster.nodes[0].client) - self.before


@contextmanager
def silent_broker(state_dir: Path, host: str) -> Iterator[SilentBroker]:
    """A one-node cluster of its own under `state_dir`, clients connecting on `host` (in the e2e suites the node IP,
    so the operator's pod reaches it), started, then frozen for the block; killed after it, never thawed: it
    answers nothing to the end, and its connections are reset as a hung broker's are when it is finally killed."""
    cluster = kafka_cluster.create(state_dir, client_host=host, progress=lambda _: None)
    broker = cluster.process(cluster.nodes[0].node_id)
    try:
        broker.freeze()
        yield SilentBroker(cluster, connections_to(cluster.nodes[0].client))
    finally:
        broker.kill()
        cluster.stop()


_LISTEN = "0A"
"""The TCP state of a listening socket in /proc/net/tcp (include/net/tcp_states.h)."""


def connections_to(port: int) -> frozenset[str]:
    """The remote ends of the TCP connections to local `port` in this network namespace (IPv4 and IPv6; whatever
    their state: established, or closed by the client but never accepted)."""
    found = set()
    for table in (Path("/proc/net/tcp"), Path("/proc/net/tcp6")):
        for row in table.read_text().splitlines()[1:]:
            local, remote, state = row.split()[1:4]
            if state != _LISTEN and int(local.rsplit(":", 1)[1], 16) == port:
                found.add(remote)
    return frozenset(found)
