"""A real Kafka broker made silent, for tests of what vigil does when a broker answers nothing: its process stopped
(SIGSTOP), alive, its port open, the kernel accepting connections into the listen backlog and nothing answering them
(a hung broker, a stop-the-world pause). Every request to it waits out the client's timeout. What a test can see of
it: the connections made to it (the kernel lists them until the broker answers again) and the requests waiting in
them (bytes in its sockets' receive queues)."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vigil_dev.kafka import cluster as kafka_cluster
from vigil_dev.kafka.cluster import KafkaCluster


class SilentBroker:
    """A one-node cluster whose broker is frozen (or will be, at `silence()`)."""

    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster
        self.before: frozenset[str] = frozenset()
        """The connections there were when it was frozen (its own clients' last ones, closing)."""

    @property
    def bootstrap(self) -> str:
        return self.cluster.connection().bootstrap_servers

    @property
    def port(self) -> int:
        return self.cluster.nodes[0].client

    def silence(self) -> None:
        """Freeze it now (SIGSTOP): from here on it answers nothing."""
        self.cluster.process(self.cluster.nodes[0].node_id).freeze()
        self.before = connections_to(self.port)

    def connections(self) -> frozenset[str]:
        """The client connections made to it since it was frozen, by their remote end (address:port, as the kernel
        lists it): the kernel alone accepts them, and they stay listed until the broker answers again, so one more
        is one more connect."""
        return connections_to(self.port) - self.before

    def unanswered(self) -> frozenset[str]:
        """The client connections with a request waiting in them (bytes the frozen broker never read: its socket's
        receive queue), by their remote end: a client in the middle of a request."""
        return connections_to(self.port, unread=True)


@contextmanager
def silent_broker(state_dir: Path, host: str, *, silent: bool = True) -> Iterator[SilentBroker]:
    """A one-node cluster of its own under `state_dir`, clients connecting on `host` (in the e2e suites the node IP,
    so the operator's pod reaches it), started, then frozen for the block (`silent=False`: answering until the test
    calls `silence()`, a broker that hangs under a client that uses it); killed after it, never thawed: it answers
    nothing to the end, and its connections are reset as a hung broker's are when it is finally killed."""
    cluster = kafka_cluster.create(state_dir, client_host=host, progress=lambda _: None)
    broker = SilentBroker(cluster)
    try:
        if silent:
            broker.silence()
        yield broker
    finally:
        cluster.process(cluster.nodes[0].node_id).kill()
        cluster.stop()


_LISTEN = "0A"
"""The TCP state of a listening socket in /proc/net/tcp (include/net/tcp_states.h)."""


def connections_to(port: int, *, unread: bool = False) -> frozenset[str]:
    """The remote ends of the TCP connections to local `port` in this network namespace (IPv4 and IPv6; whatever
    their state: established, or closed by the client but never accepted); `unread`: only those with bytes the
    server has not read."""
    found = set()
    for table in (Path("/proc/net/tcp"), Path("/proc/net/tcp6")):
        for row in table.read_text().splitlines()[1:]:
            local, remote, state, queues = row.split()[1:5]
            if state == _LISTEN or int(local.rsplit(":", 1)[1], 16) != port:
                continue
            if not unread or int(queues.split(":")[1], 16) > 0:  # tx_queue:rx_queue
                found.add(remote)
    return frozenset(found)
