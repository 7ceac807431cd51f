"""The helper's statistics forwarder (the stats signal): the newest document reaches the sidecar from the helper's
own thread, the app's own stats callback still runs, and nothing the sidecar does ever reaches the app.

A real loopback HTTP server stands in for the sidecar's `/v1/stats` (no mock: the forwarder's only job is I/O)."""

import http.server
import socket
import threading
from collections.abc import Iterator

import pytest

from vigil_dev.testing.waiting import wait_for
from vigil_sidecar.client import consumer


class _Sidecar(http.server.BaseHTTPRequestHandler):
    bodies: list[str]
    status = 200
    release: threading.Event

    def do_POST(self) -> None:
        self.release.wait(5)
        length = int(self.headers["Content-Length"])
        type(self).bodies.append(f"{self.path} {self.rfile.read(length).decode()}")
        self.send_response(type(self).status)
        self.end_headers()

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def sidecar() -> Iterator[type[_Sidecar]]:
    handler = type("Handler", (_Sidecar,), {"bodies": [], "status": 200, "release": threading.Event()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    handler.port = server.server_address[1]  # type: ignore[attr-defined]
    yield handler
    handler.release.set()
    server.shutdown()
    server.server_close()


def forwarder(port: int) -> consumer._StatsForwarder:
    made = consumer._StatsForwarder.from_addr(f"127.0.0.1:{port}")  # noqa: SLF001
    assert made is not None
    return made


@pytest.mark.parametrize("addr", ["", "127.0.0.1", "127.0.0.1:", ":7390x", "host:port"])
def test_no_usable_address_no_forwarder(addr: str) -> None:
    assert consumer._StatsForwarder.from_addr(addr) is None  # noqa: SLF001


def test_the_newest_document_is_posted_to_v1_stats(sidecar: type[_Sidecar]) -> None:
    f = forwarder(sidecar.port)  # type: ignore[attr-defined]
    f.offer('{"n": 1}')  # taken at once by the thread, which then waits on the slow sidecar
    wait_for(lambda: f._pending, lambda p: p is None, timeout=5, what="the first document taken")  # noqa: SLF001
    for n in (2, 3, 4):  # offered while the first is in flight: only the newest is kept
        f.offer(f'{{"n": {n}}}')
    sidecar.release.set()
    wait_for(lambda: f.sent, lambda n: n == 2, timeout=5, what="two posts: the first and the newest")
    assert sidecar.bodies == ['/v1/stats {"n": 1}', '/v1/stats {"n": 4}']
    assert f.failed == 0


def test_the_apps_own_callback_runs_and_its_exception_is_the_apps(sidecar: type[_Sidecar]) -> None:
    sidecar.release.set()
    seen: list[str] = []

    def app_cb(document: str) -> None:
        seen.append(document)
        raise RuntimeError("the app's bug")

    f = forwarder(sidecar.port)  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="the app's bug"):
        f.callback(app_cb)('{"ts": 1}')
    assert seen == ['{"ts": 1}']
    wait_for(lambda: f.sent, lambda n: n == 1, timeout=5, what="forwarded all the same")


def test_a_sidecar_refusing_or_absent_is_counted_never_raised(sidecar: type[_Sidecar]) -> None:
    sidecar.release.set()
    sidecar.status = 400
    refused = forwarder(sidecar.port)  # type: ignore[attr-defined]
    refused.offer("{}")
    wait_for(lambda: refused.failed, lambda n: n == 1, timeout=5, what="a 400 counted as failed")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    absent = forwarder(free)
    absent.offer("{}")
    wait_for(lambda: absent.failed, lambda n: n == 1, timeout=5, what="connection refused counted as failed")
    assert (refused.sent, absent.sent) == (0, 0)
