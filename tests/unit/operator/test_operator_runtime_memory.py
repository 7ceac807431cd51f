"""Memory per ConsumerGroup lives only as long as its loop: once released (deleted, paused, exiting), nothing the
runtime or its shells keep names the ConsumerGroup any more."""

import asyncio
import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, cast

from vigil_core.kafka.model import GroupState
from vigil_operator.domain.readings import Readings
from vigil_operator.domain.spec import SpecError
from vigil_operator.domain.status import MemberStatus
from vigil_operator.k8s.api import KubeApi
from vigil_operator.runtime import Runtime
from vigil_operator.settings import OperatorSettings

UID, KEY, GROUP = "0b7c1c2e-uid", ("shop", "orders"), "orders-group"


def _traces(value: object, seen: set[int] | None = None) -> Iterator[object]:
    """Every key and value reachable from `value` through dicts, sets, sequences and vigil's objects' attributes."""
    seen = set() if seen is None else seen
    if id(value) in seen or isinstance(value, (str, bytes, int, float, bool, type(None))):
        return
    seen.add(id(value))
    items: list[Any] = []
    if isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, (set, frozenset, list, tuple)):
        items = list(value)
    elif hasattr(value, "__dict__") and type(value).__module__.startswith("vigil_operator"):
        items = list(vars(value).values())
    for item in items:
        yield item
        yield from _traces(item, seen)


def test_a_released_consumer_group_leaves_nothing_behind() -> None:
    runtime = Runtime(OperatorSettings(), cast(KubeApi, object()))
    now = datetime(2026, 11, 25, tzinfo=UTC)
    runtime.resynced(KEY, 3)
    runtime._locks[UID] = asyncio.Lock()  # noqa: SLF001 - what a resync leaves
    runtime.departures.remember(UID, [MemberStatus(member_id="m-0", pod="orders-0")], now)
    runtime.budgets._provisioned[UID] = (3, "default")  # noqa: SLF001
    with contextlib.suppress(SpecError):  # an incomplete spec: its refusal is kept as a parse would be
        runtime._spec({"metadata": {"uid": UID}, "spec": {"groupId": GROUP}})  # noqa: SLF001
    reading = Readings(GroupState.STABLE, 1, 0, None, 0.0)
    runtime._readings[KEY] = ((*KEY, GROUP), reading)  # noqa: SLF001
    runtime.metrics.read_group((*KEY, GROUP), None, reading, 0)
    kept = list(_traces(runtime))
    assert UID in kept
    assert KEY in kept

    runtime.release(KEY, UID)

    left = list(_traces(runtime))
    assert UID not in left
    assert KEY not in left
    assert not [t for t in left if isinstance(t, tuple) and GROUP in t]
