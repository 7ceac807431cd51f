"""Kubernetes Events about ConsumerGroups (the `Notice`s a resync decides), posted in the background.

A resync never waits for its Events: each says once what the status it wrote changed, so a failed post is one
log line, never retried into a storm. Posted by the operator itself (not kopf's poster, which only runs inside the
handlers of kopf's own object tasks; the resyncs run in the loops)."""

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from vigil_operator.domain.reconcile import Notice
from vigil_operator.k8s.api import KubeApi, KubeError
from vigil_operator.shells.base import Post

log = logging.getLogger(__name__)


class Notices:
    def __init__(self, kube: KubeApi, source: str) -> None:
        """`source`: this replica (the Events' reporting instance)."""
        self.kube = kube
        self.source = source
        self._posting: set[asyncio.Task[None]] = set()

    def poster(self, about: Mapping[str, Any]) -> Post:
        """Posts each Notice as an Event on the object `about` (its body), without waiting."""

        def post(notice: Notice) -> None:
            task = asyncio.get_running_loop().create_task(self._post(about, notice))
            self._posting.add(task)
            task.add_done_callback(self._posting.discard)

        return post

    async def _post(self, about: Mapping[str, Any], notice: Notice) -> None:
        try:
            await self.kube.post_event(about, notice.type, notice.reason, notice.message, source=self.source)
        except KubeError as exc:
            log.warning("%s", exc)

    async def drain(self, timeout: float) -> None:
        """The Events still being posted, given up to `timeout` seconds (the operator exits)."""
        if self._posting:
            await asyncio.wait(set(self._posting), timeout=timeout)
