"""The names Kubernetes and Kafka accept, checked where a user gives them (a flag, an env var, a CR field): a name the
apiserver or the broker would refuse is otherwise found only when it is first used, far from where it was written."""

import re
from typing import Final

DNS_SUBDOMAIN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
"""An object name (RFC 1123 subdomain, ≤ 253): a ServiceAccount, a Lease, a Secret."""
DNS_LABEL: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""A namespace's name (RFC 1123 label, ≤ 63)."""
TOPIC: Final = r"^[a-zA-Z0-9._-]+$"
"""A Kafka topic name (≤ 249, neither `.` nor `..`), as the broker's `Topic.validate` accepts."""


def _shown(value: str) -> str:
    return repr(value if len(value) <= 200 else value[:200] + "...")


def _checked(value: str, pattern: str, longest: int, expected: str) -> str:
    if len(value) > longest or value in (".", "..") or not re.fullmatch(pattern, value):
        raise ValueError(f"expected {expected}, got {_shown(value)}")
    return value


def kubernetes_name(value: str) -> str:
    """`value` if it is an object name; ValueError saying what is expected otherwise."""
    return _checked(
        value, DNS_SUBDOMAIN, 253, "a Kubernetes name (lower-case letters, digits, '-' and '.', at most 253)"
    )


def namespace_name(value: str) -> str:
    """`value` if it is a namespace's name; ValueError saying what is expected otherwise."""
    return _checked(value, DNS_LABEL, 63, "a namespace name (lower-case letters, digits and '-', at most 63)")


def topic_name(value: str) -> str:
    """`value` if it is a Kafka topic name; ValueError saying what is expected otherwise."""
    return _checked(value, TOPIC, 249, "a Kafka topic name (letters, digits, '.', '_' and '-', at most 249)")


def topic_or_off(value: str) -> str:
    """A topic name, or "" for off."""
    return value if value == "" else topic_name(value)
