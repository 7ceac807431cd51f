"""kafka-python (the LeaveGroup/Heartbeat client, ~9 MB of a sidecar's RSS) is not loaded by the sidecar's start: not
by importing its entry point, nor by making the worker's group client (the beacon and progress signals' client).
Each check runs in a fresh interpreter; the running sidecar is checked against the real broker in
tests/integration/test_sidecar_lazy_loading.py."""

import json
import subprocess
import sys

PROBE = """
import json, sys
import vigil_sidecar.__main__
from vigil_core.kafka.security import KafkaConnection
from vigil_sidecar.shells.common import KafkaWorker

seen = {"after_import": "kafka" in sys.modules}
# nothing listens: never contacted
worker = KafkaWorker(KafkaConnection(bootstrap_servers="127.0.0.1:9"), "pod-a", other_types_after=3.0)
client = worker.client()
seen |= {"after_client": "kafka" in sys.modules, "wire_made": client.wire_made}
import vigil_core.kafka.wire  # the adapter itself: the probe sees kafka-python once it is loaded
seen["after_wire_import"] = "kafka" in sys.modules
print(json.dumps(seen))
"""


def test_the_sidecar_starts_without_kafka_python() -> None:
    run = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60)
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen == {"after_import": False, "after_client": False, "wire_made": False, "after_wire_import": True}
