"""HTTP/1.1 listeners on asyncio streams, with h11 as the protocol: what the sidecar serves and nothing more.

The sidecar runs beside every consumer, and aiohttp's server and client cost ~16 MB of it in each pod (h11: 0.4 MB,
`bench/sidecar_footprint.py`). A handler gets the request's method, path and headers and reads its body as it needs
(a hold reads it for the life of the app); it returns a `Response`, or starts a chunked stream and keeps it open.
Keep-alive, `Expect: 100-continue` and malformed requests (400, then the connection closes) are h11's rules."""

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import h11

log = logging.getLogger("vigil.sidecar")

MAX_HEAD_BYTES = 16 * 1024
"""A request line and headers longer than this are refused (400)."""
READ_BYTES = 64 * 1024


@dataclass(frozen=True)
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"

    @classmethod
    def json(cls, doc: object, status: int = 200) -> "Response":
        return cls(status, json.dumps(doc).encode(), "application/json")

    @classmethod
    def text(cls, text: str, status: int = 200) -> "Response":
        return cls(status, text.encode())


class LineTooLongError(ValueError):
    """A line of the body longer than the reader's limit."""


class Request:
    """One request: its head, and its body read on demand (the connection's end is the body's end)."""

    def __init__(self, conn: h11.Connection, event: h11.Request, reader: asyncio.StreamReader, writer: Any) -> None:
        self._conn, self._reader, self._writer = conn, reader, writer
        self.method = event.method.decode("ascii", "replace")
        self.path = event.target.decode("ascii", "replace").split("?", 1)[0]
        self.headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in event.headers}
        self.transport: asyncio.BaseTransport | None = getattr(writer, "transport", None)
        self._buffer = b""
        self.body_done = False
        self.streaming = False

    @property
    def content_length(self) -> int | None:
        value = self.headers.get("content-length")
        return int(value) if value is not None and value.isdigit() else None

    async def readany(self) -> bytes:
        """The next bytes of the body (b"" at its end, or when the client went away)."""
        if self._buffer:
            data, self._buffer = self._buffer, b""
            return data
        while not self.body_done:
            try:
                event = self._conn.next_event()
            except h11.RemoteProtocolError:  # the client closed in the middle of the body: its end, for us
                self.body_done = True
                break
            if event is h11.NEED_DATA:
                if self._conn.they_are_waiting_for_100_continue:
                    await self._send(h11.InformationalResponse(status_code=100, headers=[]))
                self._conn.receive_data(await self._reader.read(READ_BYTES))
            elif isinstance(event, h11.Data):
                return bytes(event.data)
            else:  # EndOfMessage, ConnectionClosed
                self.body_done = True
        return b""

    async def read(self, limit: int) -> bytes:
        """Up to `limit` bytes of the body (all of it, if shorter)."""
        data = b""
        while len(data) < limit:
            chunk = await self.readany()
            if not chunk:
                break
            data += chunk
        data, self._buffer = data[:limit], data[limit:] + self._buffer
        return data

    async def readline(self, limit: int = READ_BYTES) -> bytes:
        """The body up to and including its first newline (or its end); LineTooLongError past `limit` bytes."""
        line = b""
        while b"\n" not in line:
            if len(line) > limit:
                raise LineTooLongError(f"a line over {limit} bytes")
            chunk = await self.readany()
            if not chunk:
                return line
            line += chunk
        cut = line.index(b"\n") + 1
        self._buffer = line[cut:] + self._buffer
        return line[:cut]

    async def stream(self, content_type: str, first: bytes) -> None:
        """Answer 200 with a chunked body whose first chunk is `first`; the rest is never sent (the connection's
        end ends it)."""
        self.streaming = True
        await self._send(h11.Response(status_code=200, headers=[("Content-Type", content_type)], reason=b"OK"))
        await self._send(h11.Data(data=first))

    async def _send(self, event: h11.Event) -> None:
        data = self._conn.send(event)
        if data:
            self._writer.write(data)
            await self._writer.drain()


Handler = Callable[[Request], Awaitable[Response | None]]
"""None: the handler streamed its answer (`Request.stream`)."""


class Server:
    """One listener: `routes` by (method, path); `stopping` runs first at `stop` (e.g. to end the holds)."""

    def __init__(self, routes: dict[tuple[str, str], Handler], *, stopping: Iterable[Callable[[], None]] = ()) -> None:
        self.routes = routes
        self.stopping = list(stopping)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> None:
        """Bind `host:port`; fails at once if the port is taken."""
        self._server = await asyncio.start_server(self._accepted, host, port, limit=READ_BYTES)

    async def stop(self, grace: float) -> None:
        """Stop listening, run `stopping`, give the requests in flight `grace` seconds, then cancel them (and as
        long again for them to end): a client that never sends the rest of its request does not hold the exit."""
        if self._server is not None:
            self._server.close()
        for callback in self.stopping:
            callback()
        for _ in range(2):
            if self._tasks:
                _, pending = await asyncio.wait(set(self._tasks), timeout=grace)
                for task in pending:
                    task.cancel()
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), grace)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task: Any = asyncio.current_task()
        self._tasks.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:  # a bug in a handler must not end the listener
            log.exception("the HTTP connection failed")
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        while True:
            try:
                event = await _next_head(conn, reader)
            except h11.RemoteProtocolError as exc:
                if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    writer.write(_whole(conn, Response.text(f"bad request: {exc}\n", exc.error_status_hint)))
                    await writer.drain()
                return
            if not isinstance(event, h11.Request):
                return  # the client closed between requests
            request = Request(conn, event, reader, writer)
            response = await self._answer(request)
            if response is None:  # streamed: its chunked body ends with the connection
                if conn.our_state is h11.SEND_BODY:
                    writer.write(conn.send(h11.EndOfMessage()) or b"")
                    await writer.drain()
                return
            drained = 0
            # A short unread rest (a GET's end): read past it. A body the client holds back for a 100 Continue the
            # handler never asked for is not asked for now: the answer goes first, then the connection closes.
            while not request.body_done and drained <= READ_BYTES and not conn.they_are_waiting_for_100_continue:
                drained += len(await request.readany())
            writer.write(_whole(conn, response))
            await writer.drain()
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()

    async def _answer(self, request: Request) -> Response | None:
        handler = self.routes.get((request.method, request.path))
        if handler is None:
            allowed = sorted(m for m, p in self.routes if p == request.path)
            if allowed:
                return Response.text(f"{request.method} not allowed here (only {', '.join(allowed)})\n", 405)
            return Response.text(f"no such path: {request.path}\n", 404)
        try:
            return await handler(request)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s %s failed", request.method, request.path)
            return None if request.streaming else Response.text("internal error\n", 500)


async def _next_head(conn: h11.Connection, reader: asyncio.StreamReader) -> object:
    """The next request's head (or the connection's close)."""
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        conn.receive_data(await reader.read(READ_BYTES))


def _whole(conn: h11.Connection, response: Response) -> bytes:
    """A response with its body, as bytes for the wire."""
    headers = [("Content-Type", response.content_type), ("Content-Length", str(len(response.body)))]
    parts = [conn.send(h11.Response(status_code=response.status, headers=headers, reason=_reason(response.status)))]
    if response.body:
        parts.append(conn.send(h11.Data(data=response.body)))
    parts.append(conn.send(h11.EndOfMessage()))
    return b"".join(p for p in parts if p)


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""
