"""The proof of the app's end: the helper's idle connection (`POST /v1/hold`) against the sidecar's real beacon
listener on loopback. No broker: nothing here reaches Kafka (a bridge is refused before any request)."""

import asyncio
import json
import socket
import time
from collections.abc import Awaitable, Callable

from vigil_dev import ports
from vigil_sidecar import config, server
from vigil_sidecar.client.consumer import _Hold
from vigil_sidecar.listener import Server
from vigil_sidecar.metrics import Metrics
from vigil_sidecar.runtime import Sidecar

BASE = {"VIGIL_GROUP_ID": "orders", "VIGIL_POD_NAME": "orders-0", "VIGIL_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"}


def _sidecar(**env: str) -> Sidecar:
    settings, connection, _ = config.load(BASE | {"VIGIL_EVENTS_TOPIC": ""} | env)
    return Sidecar(settings, connection, Metrics())


async def _serve(sidecar: Sidecar, port: int) -> Server:
    listener = server.beacon_server(sidecar)
    await listener.start("127.0.0.1", port)
    return listener


async def _until(probe: Callable[[], object], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s"
        await asyncio.sleep(0.02)


def _value(sidecar: Sidecar, name: str, **labels: str) -> float:
    value = sidecar.metrics.registry.get_sample_value(name, labels or None)
    return 0.0 if value is None else value


async def _hold(port: int, pid: int, process: str | None = None, *, ready: bool = False) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    doc: dict[str, object] = {"pid": pid} if process is None else {"pid": pid, "process": process}
    first = (json.dumps(doc | ({"ready": True} if ready else {})) + "\n").encode()
    head = f"POST /v1/hold HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n{len(first):x}\r\n".encode()
    sock.sendall(head + first + b"\r\n")
    return sock


def _run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 20))


def test_a_hold_that_closes_is_an_end_of_the_app_once_per_process() -> None:
    async def test() -> None:
        sidecar = _sidecar()
        port = ports.free_ports(1)[0]
        runner = await _serve(sidecar, port)
        try:
            a, b = await _hold(port, 101), await _hold(port, 101)  # two consumers in one process
            other = await _hold(port, 101, process="another-container")  # the same pid in another namespace
            await _until(lambda: _value(sidecar, "vigil_sidecar_app_holds") == 3, "three holds open")
            other.close()
            await _until(lambda: _value(sidecar, "vigil_sidecar_app_ends_total") == 1, "the other process's end")
            a.close()
            await _until(lambda: _value(sidecar, "vigil_sidecar_app_holds") == 1, "one hold closed")
            assert _value(sidecar, "vigil_sidecar_app_ends_total") == 1  # the process still holds the other
            b.close()
            await _until(lambda: _value(sidecar, "vigil_sidecar_app_ends_total") == 2, "the app's end")
            assert sidecar.status()["app"] == {"helper_connections": 0, "ends": 2}
            assert sidecar.status()["bridge"] is None  # bridging is off by default
        finally:
            await runner.stop(server.STOP_REQUESTS_SECONDS)

    _run(test)


def test_the_sidecar_stopping_is_no_end_of_the_app() -> None:
    async def test() -> None:
        sidecar = _sidecar()
        port = ports.free_ports(1)[0]
        runner = await _serve(sidecar, port)
        sock = await _hold(port, 102)
        await _until(lambda: _value(sidecar, "vigil_sidecar_app_holds") == 1, "the hold open")
        started = time.monotonic()
        await runner.stop(server.STOP_REQUESTS_SECONDS)  # SIGTERM's path: the holds are released, not waited for
        assert time.monotonic() - started < 5
        assert sidecar.stopping
        assert _value(sidecar, "vigil_sidecar_app_ends_total") == 0
        assert sock.recv(16) == b""  # closed by the sidecar
        sock.close()

    _run(test)


def test_an_end_without_a_reported_member_is_refused_and_counted() -> None:
    """The hold alone (no beacon ever) is no member to bridge: refused `no-member`, before any Kafka request."""

    async def test() -> None:
        sidecar = _sidecar(VIGIL_BRIDGE_ENABLED="true", VIGIL_INSTANCE_ID="orders-0")
        port = ports.free_ports(1)[0]
        runner = await _serve(sidecar, port)
        try:
            (await _hold(port, 103)).close()
            await _until(lambda: _value(sidecar, "vigil_sidecar_app_ends_total") == 1, "the app's end")
            assert _value(sidecar, "vigil_sidecar_bridges_refused_total", cause="no-member") == 1
            assert sidecar.status()["bridge"]["state"] == "refused"
            assert _value(sidecar, "vigil_sidecar_bridge_heartbeats_total") == 0
        finally:
            await runner.stop(server.STOP_REQUESTS_SECONDS)

    _run(test)


def test_the_helpers_hold_reconnects_after_the_sidecar_restarts() -> None:
    async def test() -> None:
        port = ports.free_ports(1)[0]
        first = _sidecar()
        runner = await _serve(first, port)
        hold = _Hold(("127.0.0.1", port))
        hold._thread.start()  # noqa: SLF001 - a fresh hold, not this process's singleton
        await _until(lambda: _value(first, "vigil_sidecar_app_holds") == 1, "the helper holding")
        await runner.stop(server.STOP_REQUESTS_SECONDS)
        second = _sidecar()
        runner = await _serve(second, port)
        try:
            await _until(lambda: _value(second, "vigil_sidecar_app_holds") == 1, "the helper holding again")
            assert hold.connected == 2
            assert _value(first, "vigil_sidecar_app_ends_total") == 0
        finally:
            await runner.stop(server.STOP_REQUESTS_SECONDS)

    _run(test)


def test_a_connection_without_a_pid_still_holds() -> None:
    async def test() -> None:
        sidecar = _sidecar()
        port = ports.free_ports(1)[0]
        runner = await _serve(sidecar, port)
        try:
            sock = socket.create_connection(("127.0.0.1", port))
            sock.sendall(b"POST /v1/hold HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhi\n\r\n")
            await _until(lambda: _value(sidecar, "vigil_sidecar_app_holds") == 1, "the hold open")
            sock.close()
            await _until(lambda: _value(sidecar, "vigil_sidecar_app_ends_total") == 1, "the app's end")
        finally:
            await runner.stop(server.STOP_REQUESTS_SECONDS)

    _run(test)


def test_a_helper_asking_for_the_go_ahead_gets_it_at_once_when_no_member_is_kept() -> None:
    """The Python helper's hold (`"ready": true`): nothing is bridged, so the sidecar answers at once; the connection
    then holds on as before, and its close is the app's end."""

    async def test() -> None:
        sidecar = _sidecar()
        port = ports.free_ports(1)[0]
        runner = await _serve(sidecar, port)
        try:
            hold = _Hold(("127.0.0.1", port))
            hold._thread.start()  # noqa: SLF001 - a fresh hold, not this process's singleton
            started = time.monotonic()
            assert await asyncio.to_thread(hold.wait_ready)
            assert time.monotonic() - started < 2.0
            assert _value(sidecar, "vigil_sidecar_app_holds") == 1
            sock = await _hold(port, 104, process="raw", ready=True)
            head = await asyncio.to_thread(_read_until, sock, b'"released": false}\n')
            assert head.startswith(b"HTTP/1.1 200 OK\r\n")
            assert b"Transfer-Encoding: chunked" in head
            await _until(lambda: _value(sidecar, "vigil_sidecar_app_holds") == 2, "both holds open")
            sock.close()
            await _until(lambda: _value(sidecar, "vigil_sidecar_app_ends_total") == 1, "the raw process's end")
            assert _value(sidecar, "vigil_sidecar_app_holds") == 1  # the helper's still holds
        finally:
            await runner.stop(server.STOP_REQUESTS_SECONDS)

    _run(test)


def test_the_helper_waits_for_the_go_ahead_only_so_long() -> None:
    """A sidecar that never answers (one older than the go-ahead) costs the app its bound once, then the hold goes on;
    one that answers anything else (no /v1/hold) costs nothing. Times are read against the bound itself, with slack
    for a loaded machine waking the waiting thread late."""
    for answer, silent in ((b"", True), (b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", False)):
        listener = socket.create_server(("127.0.0.1", 0))
        hold = _Hold(listener.getsockname()[:2])
        deadline = time.monotonic() + 0.5
        hold._deadline = deadline  # noqa: SLF001 - the bound, shortened for the test
        hold._thread.start()  # noqa: SLF001
        conn, _ = listener.accept()
        request = _read_until(conn, b'"ready": true}\n')
        assert b'"process": "' + hold.process.encode() + b'"' in request
        conn.sendall(answer)
        assert not hold.wait_ready()
        returned = time.monotonic()
        if silent:
            assert deadline - 0.01 <= returned < deadline + 0.5  # waited out the bound (3 s unshortened), no longer
        else:
            assert returned < deadline  # answered otherwise: no wait for the bound
        conn.close()
        listener.close()


def _read_until(sock: socket.socket, marker: bytes) -> bytes:
    sock.settimeout(5.0)
    data = b""
    while marker not in data:
        chunk = sock.recv(4096)
        assert chunk, f"closed before {marker!r}: {data!r}"
        data += chunk
    return data
