"""Stall → partitions consumed again by the rest of the group: vigil's sidecar vs the stock client, one run.

Every figure is measured on a fresh local broker in this run: a 3-member group, one member stops polling
while librdkafka keeps heartbeating (the stalled-but-alive member), a batch is produced, and the clock runs
until the two others have consumed all of it. Stock runs use short `max.poll.interval.ms` values so the run
stays short; the ratio to stock at Kafka's defaults (max.poll 300 s, session 45 s) is computed from the
measured rebalance time, and says so.

    .venv/bin/python bench/stall_takeover.py [--stall 10] [--max-poll 20] [--static-session 20]
"""

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from vigil_core.kafka.security import KafkaConnection
from vigil_dev.kafka import cluster as kafka_cluster
from vigil_dev.testing import clients
from vigil_dev.testing.sidecar import RunningSidecar, start_sidecar
from vigil_dev.testing.waiting import wait_for
from vigil_sidecar.client import Consumer as BeaconingConsumer

HEARTBEAT = 1.0
CHECK = 1.0
KAFKA_DEFAULT_MAX_POLL = 300.0
KAFKA_DEFAULT_SESSION = 45.0


def takeover(
    conn: KafkaConnection,
    *,
    static: bool,
    session: float,
    max_poll: float,
    sidecar: Callable[[str, str], RunningSidecar] | None,
    graceful: bool = False,
) -> float:
    """Seconds from the stall (or graceful close) of one member until the others consumed a new batch."""
    topic = clients.create_topic(conn, clients.unique("bench"), partitions=3)
    group = clients.unique("g-bench")

    def extra(pod: str) -> clients.ClientConfig:
        conf: clients.ClientConfig = {
            "session.timeout.ms": int(session * 1000),
            "heartbeat.interval.ms": int(HEARTBEAT * 1000),
            "max.poll.interval.ms": int(max_poll * 1000),
        }
        return conf | ({"group.instance.id": pod} if static else {})

    running = sidecar(group, "pod-a") if sidecar is not None else None
    factory = (lambda conf: BeaconingConsumer(conf, beacon_addr=running.beacon_addr)) if running else None
    watched = clients.Member(conn, group, [topic], "pod-a", extra=extra("pod-a"))
    if factory is not None:
        watched.consumer_factory = factory
    watched.start()
    others = [clients.Member(conn, group, [topic], f"pod-{x}", extra=extra(f"pod-{x}")).start() for x in "bc"]
    try:
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 3, timeout=60, what="3 members stable")
        clients.produce(conn, topic, [f"warm-{i}" for i in range(30)])
        wait_for(lambda: sum(len(m.consumed) for m in (watched, *others)), lambda n: n >= 30, timeout=60,
                 what="warm-up consumed")  # fmt: skip
        if running is not None:
            wait_for(lambda: running.get("/v1/status")[1], lambda s: '"member": {' in s, timeout=30,
                     what="sidecar identified its member")  # fmt: skip
        started = time.monotonic()
        if graceful:
            watched.close()
        else:
            watched.paused_polling.set()
        batch = {f"b{i}" for i in range(300)}
        clients.produce_spread(conn, topic, sorted(batch), partitions=3)
        wait_for(
            lambda: {v for m in others for _, _, v in m.consumed} & batch,
            lambda seen: seen == batch,
            timeout=max_poll + session + 60,
            what="the others consuming the whole batch",
            interval=0.05,
        )
        return time.monotonic() - started
    finally:
        for m in (watched, *others):
            m.close()
        if running is not None:
            running.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--stall", type=float, default=10.0, help="vigil stall timeout, s")
    parser.add_argument("--max-poll", type=float, default=20.0, help="stock max.poll.interval.ms for the run, s")
    parser.add_argument("--static-session", type=float, default=20.0, help="session timeout of static members, s")
    args = parser.parse_args()
    state = Path(tempfile.mkdtemp(prefix="vigil-bench-"))
    kafka = kafka_cluster.create(state / "stack", progress=lambda line: print(f"# {line}", flush=True))
    conn = kafka.connection()

    def with_sidecar(session: float, static: bool) -> Callable[[str, str], RunningSidecar]:
        def start(group: str, pod: str) -> RunningSidecar:
            extra = {"instance_id": pod} if static else {}
            return start_sidecar(conn, group, pod, state, stall_timeout_seconds=args.stall,
                                 check_interval_seconds=CHECK, session_timeout_seconds=session,
                                 events_topic="", budget="none", **extra)  # fmt: skip

        return start

    dyn_session = 6.0
    static_max_poll = max(args.max_poll, args.static_session)  # librdkafka: max.poll >= session
    try:
        print("# measuring: graceful leave (the rebalance floor) ...", flush=True)
        rejoin = takeover(conn, static=False, session=dyn_session, max_poll=args.max_poll, sidecar=None, graceful=True)
        rows = []
        for label, static, session, max_poll in (
            ("dynamic", False, dyn_session, args.max_poll),
            ("static", True, args.static_session, static_max_poll),
        ):
            print(f"# measuring: {label} stall, vigil then stock ...", flush=True)
            vigil = takeover(conn, static=static, session=session, max_poll=max_poll,
                             sidecar=with_sidecar(session, static))  # fmt: skip
            stock = takeover(conn, static=static, session=session, max_poll=max_poll, sidecar=None)
            floor = args.stall + HEARTBEAT + rejoin
            default = KAFKA_DEFAULT_MAX_POLL + (KAFKA_DEFAULT_SESSION if static else 0.0) + rejoin
            rows.append((label, vigil, floor, stock, max_poll, session, default))
    finally:
        kafka.stop()
        shutil.rmtree(state, ignore_errors=True)

    print(f"\nstall timeout {args.stall:.0f}s, heartbeat {HEARTBEAT:.0f}s, measured graceful rebalance {rejoin:.2f}s\n")
    print(
        "| member | vigil takeover | floor | vigil / floor | stock takeover (max.poll, session) | vigil / stock "
        "| stock at Kafka defaults (est.) | vigil / default |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for label, vigil, floor, stock, max_poll, session, default in rows:
        print(
            f"| {label} | {vigil:.1f} s | {floor:.1f} s | {vigil / floor:.2f}× | {stock:.1f} s ({max_poll:.0f} s, "
            f"{session:.0f} s) | {vigil / stock:.2f}× | {default:.0f} s | {vigil / default:.3f}× |"
        )


if __name__ == "__main__":
    main()
