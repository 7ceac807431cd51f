"""Pod addresses: one loopback address per pod inside the fakelet's own 127.<block>.0.0/16."""

import ipaddress

from hypothesis import given
from hypothesis import strategies as st

from vigil_dev.kube.fakelet import network


def test_blocks_cover_the_range_once_starting_from_the_seed() -> None:
    blocks = network.blocks("stack:node-1")
    assert sorted(blocks) == list(range(network.FIRST_BLOCK, network.LAST_BLOCK + 1))
    assert blocks == network.blocks("stack:node-1")  # stable: a restarted fakelet prefers its old block
    assert network.FIRST_BLOCK > 1  # 127.0.0.1 (control plane, Kafka) is never a pod address


@given(block=st.integers(network.FIRST_BLOCK, network.LAST_BLOCK), index=st.integers(0, network.PER_BLOCK - 1))
def test_address_and_index_round_trip(block: int, index: int) -> None:
    addr = network.address(block, index)
    assert ipaddress.IPv4Address(addr) in ipaddress.IPv4Network(network.cidr(block))
    assert not addr.endswith((".0", ".255"))
    assert network.index_of(block, addr) == index


def test_foreign_addresses_have_no_index() -> None:
    assert network.index_of(20, "127.21.0.1") is None
    assert network.index_of(20, "127.20.0.0") is None
    assert network.index_of(20, "10.0.0.1") is None
    assert network.index_of(20, "not an ip") is None


@given(st.lists(st.booleans(), min_size=1, max_size=300))
def test_allocation_never_hands_out_an_address_in_use(frees: list[bool]) -> None:
    """Allocate, sometimes releasing the oldest: every new address differs from all addresses in use."""
    in_use: list[str] = []
    last = -1
    for free in frees:
        if free and in_use:
            in_use.pop(0)
        addr, last = network.allocate(30, set(in_use), last)
        assert addr not in in_use
        in_use.append(addr)


def test_a_released_address_is_not_reused_at_once() -> None:
    first, last = network.allocate(30, set(), -1)
    second, last = network.allocate(30, set(), last)  # `first` was released meanwhile
    assert (first, second) == ("127.30.0.1", "127.30.0.2")
    assert network.allocate(30, set(), 253)[0] == "127.30.1.1"  # .0.254 is followed by .1.1
