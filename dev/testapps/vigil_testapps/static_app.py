"""A tiny app for bridge tests: one static member (KIP-345) polling with vigil's helper Consumer, killable.

`python -m vigil_testapps.static_app --group G --topic T --instance-id I [--max-poll-interval-ms N]
[--session-timeout-ms N] [--protocol classic|consumer]` joins G as static member I with the test timings
(`vigil_testapps.config.CONSUMER_DEFAULTS`: session 6 s, heartbeat 1 s; KIP-848: the broker's), beacons to
`$VIGIL_BEACON_ADDR` and holds the helper's connection to the sidecar; the broker comes from `VIGIL_KAFKA_*`.

- SIGUSR1: stop calling poll() and stay alive (librdkafka keeps heartbeating until max.poll.interval.ms; the
  helper's connection stays open): the stalled-but-alive app;
- SIGUSR2: keep polling but send no more beacons (the plain confluent-kafka poll, not the helper's): the sidecar's
  last report of the member stays as it was — the app that dies after a rebalance, before its next report;
- SIGTERM: close the consumer and exit 0; SIGKILL (the test's crash) leaves the member to its session timeout.

Each change of member id, generation or assignment is printed (`static_app: member=... generation=...`), so the
test can read the app's own view from its log.
"""

import argparse
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any

import confluent_kafka

from vigil_core.kafka import cgmd
from vigil_core.kafka.security import KafkaConnection
from vigil_sidecar.client import Consumer
from vigil_testapps.config import CONSUMER_DEFAULTS, KIP848_BROKER_SIDE, QUIET


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--instance-id", required=True)
    parser.add_argument("--max-poll-interval-ms", type=int, default=int(CONSUMER_DEFAULTS["max.poll.interval.ms"]))
    parser.add_argument("--session-timeout-ms", type=int, default=int(CONSUMER_DEFAULTS["session.timeout.ms"]))
    parser.add_argument("--protocol", choices=["classic", "consumer"], default="classic")
    args = parser.parse_args(argv)
    conf: dict[str, Any] = KafkaConnection.from_env(os.environ).confluent_config() | dict(CONSUMER_DEFAULTS) | QUIET
    conf |= {
        "group.id": args.group,
        "group.instance.id": args.instance_id,
        "client.id": args.instance_id,
        "max.poll.interval.ms": args.max_poll_interval_ms,
        "session.timeout.ms": args.session_timeout_ms,
    }
    if args.protocol == "consumer":  # KIP-848: the session, heartbeat and assignor live on the broker
        conf = {k: v for k, v in conf.items() if k not in KIP848_BROKER_SIDE} | {"group.protocol": "consumer"}
    stalled, stopping, withheld = threading.Event(), threading.Event(), threading.Event()

    def stall(_signum: int, _frame: FrameType | None) -> None:
        stalled.set()

    def stop(_signum: int, _frame: FrameType | None) -> None:
        stopping.set()

    def withhold(_signum: int, _frame: FrameType | None) -> None:
        withheld.set()

    signal.signal(signal.SIGUSR1, stall)
    signal.signal(signal.SIGUSR2, withhold)
    signal.signal(signal.SIGTERM, stop)
    consumer = Consumer(conf)
    consumer.subscribe([args.topic])
    print(f"static_app: pid={os.getpid()} instance={args.instance_id} group={args.group}", flush=True)
    seen: tuple[str, int, int] | None = None
    said_withheld = False
    try:
        while not stopping.is_set():
            if stalled.is_set():
                print("static_app: stalled (no more polls)", flush=True)
                while not stopping.wait(0.2):  # short waits: the SIGTERM handler runs between them
                    pass
                break
            if withheld.is_set():
                if not said_withheld:
                    print("static_app: beacons withheld (polling on)", flush=True)
                    said_withheld = True
                confluent_kafka.Consumer.poll(consumer, 0.2)  # the plain poll: no beacon
            else:
                consumer.poll(0.2)
            meta = cgmd.parse(consumer.consumer_group_metadata())
            now = (consumer.memberid() or "", meta.generation if meta else -1, len(consumer.assignment()))
            if now != seen:
                seen = now
                print(f"static_app: member={now[0]} generation={now[1]} assigned={now[2]}", flush=True)
    finally:
        consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
