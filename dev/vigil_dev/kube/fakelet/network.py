"""Pod addresses: each pod gets its own loopback address, shared by its containers (like a network namespace).

Linux routes all of 127.0.0.0/8 to `lo`, so any 127.x.y.z can be bound without configuration. Each
fakelet owns a /16, `127.<block>.0.0/16` with block in 16..254 (127.0–15 stay for everything else: the
control plane and Kafka listen on 127.0.0.1), claimed with a lock file so two stacks on one machine (a
`vigil dev up` and a test session) never hand out the same address. Within it, addresses go round-robin
`127.<block>.0.1, .0.2 … .0.254, .1.1 …` (no .0/.255 host parts), skipping addresses in use, so a deleted
pod's address is not reused at once. Pods can then all listen on the same port without clashing.
"""

import hashlib
import ipaddress

FIRST_BLOCK = 16
LAST_BLOCK = 254
PER_BLOCK = 256 * 254


def blocks(seed: str) -> list[int]:
    """All blocks, starting at one derived from `seed` (stack and node), so claims rarely collide."""
    span = LAST_BLOCK - FIRST_BLOCK + 1
    first = int(hashlib.sha256(seed.encode()).hexdigest(), 16) % span
    return [FIRST_BLOCK + (first + i) % span for i in range(span)]


def address(block: int, index: int) -> str:
    return f"127.{block}.{index // 254}.{index % 254 + 1}"


def index_of(block: int, addr: str) -> int | None:
    """The index of an address in the block, or None if it is not one of its pod addresses."""
    try:
        octets = ipaddress.IPv4Address(addr).packed
    except ValueError:
        return None
    if octets[0] != 127 or octets[1] != block or not 1 <= octets[3] <= 254:
        return None
    return octets[2] * 254 + octets[3] - 1


def allocate(block: int, in_use: set[str], after: int) -> tuple[str, int]:
    """The next free address after index `after` (round-robin); raises if the block is full."""
    for step in range(1, PER_BLOCK + 1):
        index = (after + step) % PER_BLOCK
        candidate = address(block, index)
        if candidate not in in_use:
            return candidate, index
    raise RuntimeError(f"all {PER_BLOCK} addresses of 127.{block}.0.0/16 are in use")


def cidr(block: int) -> str:
    return f"127.{block}.0.0/16"
