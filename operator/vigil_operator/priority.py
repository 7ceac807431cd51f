"""A kopf peering priority taken from the pod name.

The replicas of a Deployment share one pod template, so they cannot be given distinct `--priority` values, and
kopf pauses every replica when two share the highest priority. Their pod names differ: a stable hash of the name
gives each pod its own priority (a collision, about 1 in 2**31 per pair, only pauses both until one is replaced).
"""

import zlib

POD_NAME_ENV = "VIGIL_POD_NAME"
"""Set from the downward API (`fieldRef: metadata.name`) by the chart."""


def priority_from_pod_name(pod_name: str) -> int:
    """A positive priority in [1, 2**31], the same for the same name in every process (crc32, not `hash()`)."""
    return (zlib.crc32(pod_name.encode()) & 0x7FFFFFFF) + 1
