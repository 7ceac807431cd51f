"""The sidecar's two listeners.

- beacon (loopback, or the pod IP where the webhook injects the sidecar): `POST /v1/beacon` and the same JSON as a
  UDP datagram on the same port number; `POST /v1/stats`, librdkafka's statistics JSON (the stats signal: the
  answer names the verdict; 413 over 1 MiB, 400 with one line if malformed);
  `POST /v1/hold`, the helper's idle connection for the life of the app
  process (a chunked body that never ends: its first line `{"pid": N, "process": token, "ready": true}`), whose
  close is the proof the app ended; with `"ready": true` the sidecar answers once the app may join its group (a
  200 with a chunked body whose first line is `{"ready": true, "released": bool}`, then nothing until one side
  goes away): at once, or after releasing the instance id of the KIP-848 member it kept alive for the app;
- health (the pod IP: the kubelet probes it): `/livez` (the sidecar's own loop), `/v1/probe/app` (fails only
  after a positive restart decision; the app container's liveness probe points here by numeric port),
  `/metrics`, `/v1/status`.
"""

import asyncio
import contextlib
import json
import logging
import time

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from vigil_core import sidecar_contract as contract
from vigil_sidecar.listener import Handler, LineTooLongError, Request, Response, Server
from vigil_sidecar.runtime import Sidecar
from vigil_sidecar.signals import stats as stats_signal
from vigil_sidecar.signals.beacon import MAX_BEACON_BYTES, BeaconError, parse_beacon

log = logging.getLogger("vigil.sidecar")

#: At stop, a request still being handled gets this long to finish, then as long again once cancelled: a client
#: that never sends the rest of its request does not hold the exit.
STOP_REQUESTS_SECONDS = 0.1


class _BeaconDatagrams(asyncio.DatagramProtocol):
    def __init__(self, sidecar: Sidecar) -> None:
        self.sidecar = sidecar

    def datagram_received(self, data: bytes, addr: tuple[str | object, int]) -> None:
        _accept(self.sidecar, data, "udp")


def _accept(sidecar: Sidecar, data: bytes, transport: str) -> str | None:
    """Hand a beacon to the watchdog; the one-line problem if it was malformed (logged once per kind)."""
    try:
        sidecar.beacon(parse_beacon(data), transport)
    except BeaconError as exc:
        sidecar.metrics.bad_beacons.inc()
        problem = str(exc)
        if problem != sidecar.last_bad_beacon:
            log.warning("ignored a malformed %s beacon: %s", transport, problem)
            sidecar.last_bad_beacon = problem
        return problem
    return None


def _stats_handler(sidecar: Sidecar) -> Handler:
    async def post_stats(request: Request) -> Response:
        """librdkafka's statistics JSON as the app's stats callback got it (the stats signal)."""
        limit = stats_signal.MAX_STATS_BYTES
        if request.content_length is not None and request.content_length > limit:
            sidecar.metrics.stats_documents.labels("too-large").inc()
            return Response.json({"error": f"stats: over the {limit}-byte limit"}, status=413)
        data = await request.read(limit + 1)
        if len(data) > limit:
            sidecar.metrics.stats_documents.labels("too-large").inc()
            return Response.json({"error": f"stats: over the {limit}-byte limit"}, status=413)
        try:
            doc = stats_signal.parse_stats(data)
        except stats_signal.StatsError as exc:
            sidecar.metrics.stats_documents.labels("malformed").inc()
            problem = str(exc)
            if problem != sidecar.last_bad_beacon:
                log.warning("ignored a malformed statistics document: %s", problem)
                sidecar.last_bad_beacon = problem
            return Response.json({"error": problem}, status=400)
        verdict = sidecar.stats(doc)
        sidecar.metrics.stats_documents.labels("accepted").inc()
        return Response.json({"verdict": verdict.value})

    return post_stats


def beacon_server(sidecar: Sidecar) -> Server:
    async def post_beacon(request: Request) -> Response:
        data = await request.read(MAX_BEACON_BYTES + 1)
        problem = _accept(sidecar, data, "http")
        if problem is not None:
            return Response.json({"error": problem}, status=400)
        return Response(status=204)

    holds: set[asyncio.BaseTransport] = set()

    async def post_hold(request: Request) -> Response | None:
        """Wait on the body until the app's end closes the connection (or it ends the body); answer first only the
        go-ahead a helper asked for."""
        process: object = object()  # this connection alone, unless it names its process
        transport = request.transport
        if transport is not None:
            holds.add(transport)
        opened = False
        try:
            first = b""
            with contextlib.suppress(LineTooLongError):  # a first line over the limit: no pid, still a hold
                first = await request.readline()
            named, asks_ready = _hold_first_line(first)
            process = named or process
            sidecar.hold_opened(process)
            opened = True
            if asks_ready:
                released = await sidecar.app_back()
                await request.stream("application/x-ndjson", json.dumps({"ready": True, "released": released}).encode()
                                     + b"\n")  # fmt: skip
            while await request.readany():
                pass  # nothing more is expected; anything is ignored
        except OSError:
            pass  # reset, truncated chunk: every way a connection ends is the end
        finally:
            if transport is not None:
                holds.discard(transport)
            if opened:
                sidecar.hold_closed(process)
        return None if request.streaming else Response(status=204)

    def release_holds() -> None:
        """The sidecar is stopping: the holds it closes now are not the app's end (the app reconnects)."""
        sidecar.stopping = True
        for transport in list(holds):
            transport.close()

    routes: dict[tuple[str, str], Handler] = {
        ("POST", contract.BEACON_PATH): post_beacon,
        ("POST", contract.STATS_PATH): _stats_handler(sidecar),
        ("POST", "/v1/hold"): post_hold,
    }
    return Server(routes, stopping=[release_holds])


def _hold_first_line(line: bytes) -> tuple[str | None, bool]:
    """What a hold's first line (`{"pid": 1234, "process": "<token>", "ready": true}`) says: the app process it
    names — its token, else its pid (pids repeat across containers, so the helper sends a token too), None if it
    names none — and whether it asks for the go-ahead to join (a helper that waits for it)."""
    try:
        doc = json.loads(line)
        token, pid, ready = doc.get("process"), doc.get("pid"), doc.get("ready") is True
    except (ValueError, AttributeError):
        return None, False
    if isinstance(token, str) and 0 < len(token) <= 64:
        return token, ready
    named = isinstance(pid, int) and not isinstance(pid, bool) and pid > 0
    return (f"pid {pid}" if named else None), ready


def health_server(sidecar: Sidecar) -> Server:
    stale_after = max(10.0, 3 * sidecar.settings.check_interval)

    async def livez(_: Request) -> Response:
        age = time.monotonic() - sidecar.loop_alive_at
        if age > stale_after:
            return Response.text(f"watchdog loop silent for {age:.0f}s\n", status=503)
        return Response.text("ok\n")

    async def probe_app(_: Request) -> Response:
        if sidecar.app_probe_failing:
            return Response.text("vigil: the app stalled; restart requested\n", status=503)
        return Response.text("ok\n")

    async def metrics(_: Request) -> Response:
        return Response(body=generate_latest(sidecar.metrics.registry), content_type=CONTENT_TYPE_LATEST)

    async def status(_: Request) -> Response:
        return Response(body=(json.dumps(sidecar.status(), indent=2) + "\n").encode(), content_type="application/json")

    routes: dict[tuple[str, str], Handler] = {
        ("GET", contract.LIVEZ_PATH): livez,
        ("GET", contract.APP_PROBE_PATH): probe_app,
        ("GET", "/metrics"): metrics,
        ("GET", contract.STATUS_PATH): status,
    }
    return Server(routes)


async def serve(sidecar: Sidecar) -> list[Server]:
    """Bind both listeners (and the UDP beacon socket); fails at once if a port is taken."""
    settings = sidecar.settings
    servers = []
    for listener, host, port in (
        (beacon_server(sidecar), settings.beacon_bind, settings.beacon_port),
        (health_server(sidecar), settings.health_bind, settings.health_port),
    ):
        await listener.start(host, port)
        servers.append(listener)
    loop = asyncio.get_running_loop()
    await loop.create_datagram_endpoint(
        lambda: _BeaconDatagrams(sidecar), local_addr=(settings.beacon_bind, settings.beacon_port)
    )
    return servers
