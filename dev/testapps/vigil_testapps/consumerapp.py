"""A real consumer app for test pods: one member of a group, stallable from a test.

`python -m vigil_testapps.consumerapp --group G --topic T [--control-port 8080]` joins G with vigil's app
helper (`vigil_sidecar.client.Consumer`, which beacons to `$VIGIL_BEACON_ADDR` when the sidecar was injected),
honours `KAFKA_CLIENT_ID` and `KAFKA_GROUP_INSTANCE_ID` as the webhook sets them, and reads the broker from
`VIGIL_KAFKA_*` (the same connection variables the sidecar uses). Test hooks, by environment:

- `KAFKA_SESSION_TIMEOUT_MS`, `KAFKA_HEARTBEAT_INTERVAL_MS`, `KAFKA_PARTITION_ASSIGNMENT_STRATEGY`,
  `KAFKA_GROUP_PROTOCOL` (`consumer` drops the settings KIP-848 keeps on the broker);
- `STARTUP_DELAY_SECONDS`: join only that long after starting, like an app with a slow start;
- `CRASH_AFTER_SECONDS` with `CRASH_CLIENT_ID` = its client id: exit 3 that long after its first assignment (a
  crash loop under restartPolicy Always).

Control, on `$VIGIL_POD_IP`:

- `POST /stall` stops calling poll() (librdkafka keeps heartbeating: stalled but alive), `POST /resume`;
- `GET /healthz` → 200; `GET /whoami` → JSON {member_id, client_id, instance_id, assigned, consumed}.
"""

import argparse
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any

from vigil_core.kafka.security import KafkaConnection
from vigil_sidecar.client import Consumer
from vigil_testapps.config import CONSUMER_DEFAULTS, KIP848_BROKER_SIDE
from vigil_testapps.podapp import QuietHandler


class App:
    def __init__(self, group: str, topic: str) -> None:
        conf: dict[str, Any] = KafkaConnection.from_env(os.environ).confluent_config() | dict(CONSUMER_DEFAULTS)
        conf |= {"group.id": group, "client.id": os.environ.get("KAFKA_CLIENT_ID") or f"{group}-app"}
        for name, key in (("KAFKA_SESSION_TIMEOUT_MS", "session.timeout.ms"),
                          ("KAFKA_HEARTBEAT_INTERVAL_MS", "heartbeat.interval.ms")):  # fmt: skip
            if os.environ.get(name):
                conf[key] = int(os.environ[name])
        if os.environ.get("KAFKA_GROUP_INSTANCE_ID"):
            conf["group.instance.id"] = os.environ["KAFKA_GROUP_INSTANCE_ID"]
        if os.environ.get("KAFKA_PARTITION_ASSIGNMENT_STRATEGY"):  # e.g. cooperative-sticky (the default: range)
            conf["partition.assignment.strategy"] = os.environ["KAFKA_PARTITION_ASSIGNMENT_STRATEGY"]
        if os.environ.get("KAFKA_GROUP_PROTOCOL"):  # `consumer`: KIP-848, its settings live on the broker
            conf["group.protocol"] = os.environ["KAFKA_GROUP_PROTOCOL"]
            if conf["group.protocol"] == "consumer":
                for key in KIP848_BROKER_SIDE:  # librdkafka refuses them with group.protocol=consumer
                    conf.pop(key, None)
        self.conf = conf
        self.topic = topic
        self.stalled = threading.Event()
        self.stopping = threading.Event()
        self.view: dict[str, Any] = {"client_id": conf["client.id"], "instance_id": conf.get("group.instance.id")}
        self.consumed = 0

    def run(self) -> None:
        delay = float(os.environ.get("STARTUP_DELAY_SECONDS") or 0)
        if delay > 0 and self.stopping.wait(delay):  # a slow-starting app (rollout tests): joins only after this
            return
        consumer = Consumer(self.conf)
        consumer.subscribe(self.topic.split(","))
        crash_after = float(os.environ.get("CRASH_AFTER_SECONDS") or 0)
        crashes = crash_after > 0 and os.environ.get("CRASH_CLIENT_ID") == self.conf["client.id"]
        assigned_at: float | None = None
        try:
            while not self.stopping.is_set():
                if crashes and assigned_at is not None and time.monotonic() - assigned_at >= crash_after:
                    print("consumerapp: crashing on purpose (CRASH_AFTER_SECONDS)", flush=True)
                    os._exit(3)  # a crash: no close, no LeaveGroup
                if assigned_at is None and consumer.assignment():
                    assigned_at = time.monotonic()
                if self.stalled.is_set():
                    self.stopping.wait(0.2)
                    continue
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    self.consumed += 1
                self.view |= {
                    "member_id": consumer.memberid(),
                    "assigned": [[tp.topic, tp.partition] for tp in consumer.assignment()],
                    "consumed": self.consumed,
                }
        finally:
            consumer.close()


def _handler(app: App) -> type[BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server names it
            if self.path == "/healthz":
                self._reply(200, "ok")
            elif self.path == "/whoami":
                self._reply(200, json.dumps(app.view))
            else:
                self._reply(404, "not found")

        def do_POST(self) -> None:  # noqa: N802 - http.server names it
            if self.path == "/stall":
                app.stalled.set()
            elif self.path == "/resume":
                app.stalled.clear()
            else:
                self._reply(404, "not found")
                return
            print(f"consumerapp: {self.path[1:]}", flush=True)
            self._reply(200, "ok")

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True, help="a topic, or several separated by commas")
    parser.add_argument("--control-port", type=int, default=8080)
    args = parser.parse_args(argv)
    app = App(args.group, args.topic)
    host = os.environ.get("VIGIL_POD_IP", "0.0.0.0")  # noqa: S104 - the pod's own network namespace
    server = ThreadingHTTPServer((host, args.control_port), _handler(app))
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop(_signum: int, _frame: FrameType | None) -> None:
        app.stopping.set()

    signal.signal(signal.SIGTERM, stop)
    print(f"consumerapp: {app.view}", flush=True)
    app.run()
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
