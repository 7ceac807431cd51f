"""`vigil sidecar` / `python -m vigil_sidecar`: validate the config (exit 2 with one line), serve, watch."""

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence

from vigil_core.errors import ConfigError
from vigil_sidecar import config, server
from vigil_sidecar.metrics import Metrics
from vigil_sidecar.runtime import Sidecar

log = logging.getLogger("vigil.sidecar")


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("kafka").setLevel(logging.ERROR)  # kafka-python's own chatter; outcomes are logged by us
    try:
        settings, connection, findings = config.load(os.environ, sys.argv[1:] if argv is None else argv)
    except ConfigError as exc:
        print(f"vigil sidecar: {exc}", file=sys.stderr)
        return 2
    for finding in findings:
        log.warning("config %s (%s): %s", finding.severity.value, finding.setting, finding.message)
    try:
        asyncio.run(_run(Sidecar(settings, connection, Metrics())))
    except OSError as exc:  # a listener could not bind
        print(f"vigil sidecar: cannot listen: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


async def _run(sidecar: Sidecar) -> None:
    """Serve and watch until SIGTERM/SIGINT, then stop within 1 s whatever Kafka does: the listeners close (a request
    still in progress gets `server.STOP_REQUESTS_SECONDS`), a running bridge ends and the queued events, its end among
    them, get `EVENTS_FLUSH_AT_STOP` to be delivered (`Sidecar.close`). A Kafka call still waiting for its answer is
    left to its daemon thread (`DaemonWorker`), which the interpreter does not wait for."""
    servers = await server.serve(sidecar)
    s = sidecar.settings
    log.info(
        "watching group %s for pod %s: stall timeout %.1fs, action %s; beacon %s:%d, health %s:%d",
        s.group_id, s.pod_name, s.stall_timeout_seconds, s.stall_action.value,
        s.beacon_bind, s.beacon_port, s.health_bind, s.health_port,
    )  # fmt: skip
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    watch = asyncio.create_task(sidecar.run())
    stopped = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({watch, stopped}, return_when=asyncio.FIRST_COMPLETED)
    watch.cancel()
    await asyncio.gather(*(listener.stop(server.STOP_REQUESTS_SECONDS) for listener in servers))
    sidecar.close()
    if watch in done and watch.exception() is not None:
        raise watch.exception()  # type: ignore[misc]
    log.info("stopped")


if __name__ == "__main__":
    sys.exit(main())
