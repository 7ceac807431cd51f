"""One HTTP/1.1 request on a connection of its own (asyncio streams, h11 the protocol): what the sidecar's rare API
calls need (the budget's Lease, at an eviction), without a client library's ~16 MB in every pod."""

import asyncio
import contextlib
import ssl
from collections.abc import Sequence
from urllib.parse import urlsplit

import h11

READ_BYTES = 64 * 1024


class ResponseError(OSError):
    """The server's answer was not HTTP/1.1 as h11 reads it."""


async def request(
    method: str,
    url: str,
    *,
    headers: Sequence[tuple[str, str]] = (),
    body: bytes = b"",
    ssl_context: ssl.SSLContext | None = None,
) -> tuple[int, bytes]:
    """`method url` with `body`: the answer's status and body. Raises OSError (ResponseError for a malformed
    answer); the caller bounds the time (`asyncio.timeout`)."""
    parts = urlsplit(url)
    secure = parts.scheme == "https"
    host = parts.hostname or ""
    port = parts.port or (443 if secure else 80)
    reader, writer = await asyncio.open_connection(
        host, port, ssl=ssl_context if secure else None, server_hostname=host if secure else None
    )
    try:
        conn = h11.Connection(h11.CLIENT)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        head = [("Host", parts.netloc), ("Content-Length", str(len(body))), ("Connection", "close"), *headers]
        out = [conn.send(h11.Request(method=method, target=target, headers=head))]
        if body:
            out.append(conn.send(h11.Data(data=body)))
        out.append(conn.send(h11.EndOfMessage()))
        writer.write(b"".join(p for p in out if p))
        await writer.drain()
        return await _answer(conn, reader)
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


async def _answer(conn: h11.Connection, reader: asyncio.StreamReader) -> tuple[int, bytes]:
    status, chunks = 0, []
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            raise ResponseError(f"a malformed HTTP answer: {exc}") from None
        if event is h11.NEED_DATA:
            conn.receive_data(await reader.read(READ_BYTES))
        elif isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.Data):
            chunks.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            return status, b"".join(chunks)
