"""The sidecar's HTTP/1.1 listener (h11 on asyncio streams) on a real loopback socket, spoken to by the standard
library's client and by hand: keep-alive, the answers for unknown paths and methods, a malformed request, `Expect:
100-continue`, and a stop that a client sending half a request does not hold."""

import asyncio
import http.client
import socket
import time
from collections.abc import Awaitable, Callable

from vigil_dev import ports
from vigil_sidecar.listener import Request, Response, Server


async def _echo(request: Request) -> Response:
    return Response.json({"path": request.path, "body": (await request.read(1000)).decode()})


async def _hello(_: Request) -> Response:
    return Response.text("hello\n")


async def _refuse(_: Request) -> Response:
    return Response.text("too large\n", 413)


def _run(test: Callable[[Server, int], Awaitable[None]]) -> None:
    async def main() -> None:
        listener = Server({("POST", "/echo"): _echo, ("GET", "/hello"): _hello, ("POST", "/refuse"): _refuse})
        port = ports.free_ports(1)[0]
        await listener.start("127.0.0.1", port)
        try:
            await test(listener, port)
        finally:
            await listener.stop(0.1)

    asyncio.run(asyncio.wait_for(main(), 20))


def _exchange(port: int, requests: list[tuple[str, str, bytes | None]]) -> list[tuple[int, str, bytes]]:
    """`requests` on one connection (http.client keeps it alive): (status, reason, body) of each."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    answers = []
    try:
        for method, path, body in requests:
            conn.request(method, path, body=body)
            response = conn.getresponse()
            answers.append((response.status, response.reason, response.read()))
    finally:
        conn.close()
    return answers


def _raw(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(4096):
            received += chunk
    return received


def test_requests_on_one_connection_and_the_answers_for_what_is_not_served() -> None:
    async def test(_: Server, port: int) -> None:
        answers = await asyncio.to_thread(
            _exchange, port,
            [("GET", "/hello", None), ("POST", "/echo?x=1", b"abc"), ("GET", "/nope", None), ("GET", "/echo", None),
             ("GET", "/hello", None)],
        )  # fmt: skip
        assert answers == [
            (200, "OK", b"hello\n"),
            (200, "OK", b'{"path": "/echo", "body": "abc"}'),
            (404, "Not Found", b"no such path: /nope\n"),
            (405, "Method Not Allowed", b"GET not allowed here (only POST)\n"),
            (200, "OK", b"hello\n"),
        ]

    _run(test)


def test_a_malformed_request_is_a_400_and_the_connection_closes() -> None:
    async def test(_: Server, port: int) -> None:
        answer = await asyncio.to_thread(_raw, port, b"GET /hello HTTP/1.1\r\nno colon here\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer

    _run(test)


def test_a_client_that_expects_100_continue_gets_it_before_sending_its_body() -> None:
    async def test(_: Server, port: int) -> None:
        def expecting() -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
                interim = sock.recv(4096)
                assert interim.startswith(b"HTTP/1.1 100 "), interim
                sock.sendall(b"hi")
                return sock.recv(4096)

        answer = await asyncio.to_thread(expecting)
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n"), answer
        assert answer.endswith(b'"body": "hi"}'), answer

    _run(test)


def test_a_body_refused_unread_is_never_asked_for_with_100_continue() -> None:
    async def test(_: Server, port: int) -> None:
        head = b"POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n"
        answer = await asyncio.to_thread(_raw, port, head)  # _raw reads until the listener closes
        assert answer.startswith(b"HTTP/1.1 413 "), answer
        assert answer.endswith(b"too large\n"), answer

    _run(test)


def test_a_client_sending_half_a_request_does_not_hold_the_stop() -> None:
    async def test(listener: Server, port: int) -> None:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly part")
        deadline = time.monotonic() + 5
        while not listener._tasks:  # noqa: SLF001 - the connection in flight: its handler waits for the rest
            assert time.monotonic() < deadline, "the connection never reached the listener"
            await asyncio.sleep(0.01)
        started = time.monotonic()
        await listener.stop(0.1)
        assert time.monotonic() - started < 1.0
        sock.close()

    _run(test)
