"""A sidecar's footprint at steady state: RSS, CPU, and broker requests per check, per signal.

A real `vigil sidecar` watches a healthy 2-member group on a fresh local broker for `--seconds`; RSS and CPU come
from /proc of the sidecar's process, requests from its own metrics. The ratio column compares with the targets
(RSS ≤ 80 MB, CPU ≤ 1% of a core); the "stock" client sends no extra requests, so requests are absolute.

    .venv/bin/python bench/sidecar_footprint.py [--seconds 60]
"""

import argparse
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from vigil_dev.kafka import cluster as kafka_cluster
from vigil_dev.testing import clients
from vigil_dev.testing.sidecar import RunningSidecar, start_sidecar
from vigil_sidecar.client import Consumer as BeaconingConsumer

CHECK = 5.0
TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def _rss_mb(pid: int) -> float:
    match = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(match.group(1)) / 1024 if match else float("nan")


def _requests(sidecar: RunningSidecar) -> float:
    text = sidecar.get("/metrics")[1]
    return sum(float(v) for v in re.findall(r"^vigil_sidecar_broker_requests_total\{[^}]*\} ([0-9.e+]+)$", text, re.M))


def measure(conn, state: Path, signal: str, seconds: float) -> tuple[float, float, float]:
    topic = clients.create_topic(conn, clients.unique("fp"), partitions=2)
    group = clients.unique("g-fp")
    sidecar = start_sidecar(conn, group, "pod-a", state, signal=signal, stall_timeout_seconds=60,
                            check_interval_seconds=CHECK, events_topic="", budget="none")  # fmt: skip
    factory = (lambda c: BeaconingConsumer(c, beacon_addr=sidecar.beacon_addr)) if signal == "beacon" else None
    watched = clients.Member(conn, group, [topic], "pod-a")
    if factory is not None:
        watched.consumer_factory = factory
    members = [watched.start(), clients.Member(conn, group, [topic], "pod-b").start()]
    try:
        deadline = time.monotonic() + 60
        while clients.stable_members(conn, group) != 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(2 * CHECK)  # let identification and the first samples settle: measure the steady state
        pid = sidecar.process.pid()
        assert pid is not None
        cpu0, req0, t0 = _cpu_seconds(pid), _requests(sidecar), time.monotonic()
        end = t0 + seconds
        i = 0
        while time.monotonic() < end:  # a steady trickle of work for the group
            clients.produce(conn, topic, [f"m{i}-{n}" for n in range(10)])
            i += 1
            time.sleep(1.0)
        elapsed = time.monotonic() - t0
        cpu = (_cpu_seconds(pid) - cpu0) / elapsed * 100
        per_check = (_requests(sidecar) - req0) / (elapsed / CHECK)
        return _rss_mb(pid), cpu, per_check
    finally:
        for m in members:
            m.close()
        sidecar.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    state = Path(tempfile.mkdtemp(prefix="vigil-footprint-"))
    kafka = kafka_cluster.create(state / "stack", progress=lambda line: print(f"# {line}", flush=True))
    try:
        rows = [
            (signal, *measure(kafka.connection(), state, signal, args.seconds)) for signal in ("beacon", "progress")
        ]
    finally:
        kafka.stop()
        shutil.rmtree(state, ignore_errors=True)
    print(f"\nsteady state over {args.seconds:.0f} s, check interval {CHECK:.0f} s, 2 partitions, 2 members\n")
    print("| signal | RSS | RSS / 80 MB target | CPU (% of a core) | CPU / 1% target | broker requests per check |")
    print("|---|---|---|---|---|---|")
    for signal, rss, cpu, per_check in rows:
        print(f"| {signal} | {rss:.0f} MB | {rss / 80:.2f}× | {cpu:.2f} % | {cpu / 1.0:.2f}× | {per_check:.2f} |")


if __name__ == "__main__":
    main()
