"""Classic groups' generations as `__consumer_offsets` tells them. Pure: records in, generations out.

DescribeGroups carries no generation, but the coordinator writes a classic group's metadata record (type 2) with its
generation whenever a rebalance completes or the group empties, and a tombstone when the group is deleted: read
from the beginning of the topic, the last record per group is its generation now (compaction keeps it), and read on,
each new record says how far the generation moved. A static member replaced without a rebalance writes the same
generation (it is not a rebalance, and does not count as one).

The view is only whole once every partition was read to the end it had when reading began: before that a group
whose record sits in a partition not read yet looks new, so `generation` answers None (unknown) until then.
"""

from dataclasses import dataclass, field

from vigil_core.consumer_offsets import records

GROUP_METADATA_KEY = b"\x00\x02"
"""The int16 record type that begins a classic group's metadata key (offset commits, the bulk, are 0 and 1)."""


def generation_of(key: bytes | None, value: bytes | None) -> tuple[str, int | None] | None:
    """(group, its generation; None when the record deletes the group) for a classic group's metadata record; None
    for any other record, or one that does not decode (a version this decoder does not know)."""
    if key is None or key[:2] != GROUP_METADATA_KEY:
        return None
    decoded = records.decode_key(key)
    if not isinstance(decoded, records.GroupMetadataKey):
        return None
    metadata = records.decode_value(decoded, value)
    if isinstance(metadata, records.Tombstone):
        return decoded.group, None
    if isinstance(metadata, records.GroupMetadataValue):
        return decoded.group, metadata.generation
    return None


@dataclass
class Generations:
    """The latest generation of every classic group read so far, and whether the view is whole."""

    unread: set[int] | None = None
    """The partitions not yet read to the end they had when reading began; None until their number is known."""
    latest: dict[str, int] = field(default_factory=dict)

    def begin(self, partitions: int) -> None:
        """Reading begins at the start of every one of the topic's `partitions`."""
        self.unread = set(range(partitions))

    def read(self, key: bytes | None, value: bytes | None) -> None:
        found = generation_of(key, value)
        if found is None:
            return
        group, generation = found
        if generation is None:
            self.latest.pop(group, None)
        else:
            self.latest[group] = generation

    def reached_end(self, partition: int) -> None:
        if self.unread is not None:
            self.unread.discard(partition)

    @property
    def whole(self) -> bool:
        return self.unread is not None and not self.unread

    def generation(self, group: str) -> int | None:
        """The group's generation; None while the view is not whole, or when no record of it was read (a group
        that never completed a rebalance, or a KIP-848 group: their epochs are in other records)."""
        return self.latest.get(group) if self.whole else None
