"""The webhook server's gentle stop, on a real loopback socket with kopf's server: while it serves, a connection is
kept alive between requests; once the operator stops (the server's generator cancelled, as kopf does), it answers on
for the drain, each answer with `Connection: close`, and only then closes its listener."""

import asyncio
import http.client
import json
import socket
import time
from typing import Any

from vigil_dev import ports
from vigil_operator.metrics import OperatorMetrics
from vigil_operator.webhook_server import NamespacedWebhookServer

REVIEW = json.dumps({"request": {"uid": "u", "namespace": "shop", "object": {"metadata": {"name": "p"}}}})


async def allow(request: dict[str, Any], **_: Any) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": request["request"]["uid"], "allowed": True}}  # fmt: skip


def post(conn: http.client.HTTPConnection) -> tuple[int, str | None]:
    conn.request("POST", "/inject-sidecar", body=REVIEW, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    response.read()
    return response.status, response.getheader("Connection")


def test_a_stopping_webhook_answers_with_connection_close_for_the_drain_then_stops() -> None:
    async def test() -> None:
        port = ports.free_ports(1)[0]
        server = NamespacedWebhookServer(addr="127.0.0.1", port=port, insecure=True, metrics=OperatorMetrics(),
                                         drain=1.5)  # fmt: skip
        configs: list[Any] = []

        async def run() -> None:
            async for config in server(allow):
                configs.append(config)

        task = asyncio.create_task(run())
        deadline = time.monotonic() + 10
        while not configs:
            assert time.monotonic() < deadline, "the webhook server never started"
            await asyncio.sleep(0.02)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        assert await asyncio.to_thread(post, conn) == (200, None)  # kept alive
        assert await asyncio.to_thread(post, conn) == (200, None)  # the same connection again

        task.cancel()  # the operator stops
        stopped = time.monotonic()
        await asyncio.sleep(0.2)
        assert not task.done()
        assert await asyncio.to_thread(post, conn) == (200, "close")  # draining: served, and the connection ends
        fresh = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        assert await asyncio.to_thread(post, fresh) == (200, "close")  # a new one (endpoints not yet updated)
        await asyncio.wait({task}, timeout=5)
        assert task.cancelled()
        assert 1.5 <= time.monotonic() - stopped < 4.0
        refused = False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        except ConnectionRefusedError:
            refused = True
        assert refused  # the listener is closed after the drain

    asyncio.run(asyncio.wait_for(test(), 30))
