"""The helper's beacon sender: datagrams reach the sidecar over a socket bound to loopback only, and a sidecar that
is not listening costs a failed count, never an exception in the app's poll loop.

A real loopback UDP socket stands in for the sidecar's beacon port (no mock: the sender's only job is I/O)."""

import itertools
import socket
from collections.abc import Iterator

import pytest

from vigil_dev.testing.waiting import wait_for
from vigil_sidecar.client import consumer
from vigil_sidecar.signals.beacon import parse_beacon


@pytest.fixture
def port() -> Iterator[socket.socket]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.settimeout(5)
        yield sock


def sender(port: int) -> consumer._BeaconSender:
    made = consumer._BeaconSender.from_addr(f"127.0.0.1:{port}")  # noqa: SLF001
    assert made is not None
    return made


def test_a_beacon_arrives_from_a_socket_bound_to_loopback_only(port: socket.socket) -> None:
    s = sender(port.getsockname()[1])
    s.send("m-1", 3, "orders-1", 2, "p-1")
    datagram, source = port.recvfrom(65536)
    beacon = parse_beacon(datagram)
    assert (beacon.member_id, beacon.generation, beacon.instance_id, beacon.assigned_partitions, beacon.process) == (
        "m-1",
        3,
        "orders-1",
        2,
        "p-1",
    )
    assert source[0] == "127.0.0.1"
    local = s._sock.getsockname()  # noqa: SLF001
    assert local[0] == "127.0.0.1"  # an unconnected sendto binds 0.0.0.0: every interface of the host
    assert s._sock.getpeername() == port.getsockname()  # noqa: SLF001
    assert (s.sent, s.failed) == (1, 0)


def test_a_sidecar_not_listening_is_counted_as_failed_sends() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as gone:
        gone.bind(("127.0.0.1", 0))
        free = gone.getsockname()[1]
    s = sender(free)
    generations = itertools.count(1)  # a new state each time: sent at once, not held back by the minimum interval

    def beacon() -> int:
        s.send("m-1", next(generations), None, 1, "p-1")  # the refusal (ICMP) fails the send after it
        return s.failed

    wait_for(beacon, lambda failed: failed >= 1, timeout=5, what="a refused beacon counted as failed")
