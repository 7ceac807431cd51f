"""A sidecar's footprint at steady state: RSS, CPU, and broker requests per check, per signal; and what loading
kafka-python at the first eviction (instead of at start) adds to that eviction.

A real `vigil sidecar` watches a healthy 2-member group on a fresh local broker for `--seconds`, once per signal
(beacon, progress, stats); RSS and CPU come from /proc of the sidecar's process, requests from its own metrics, and
whether it loaded kafka-python from its interpreter's import log (`PYTHONPROFILEIMPORTTIME=1`). Ratios compare with
the 65 MB measured before (2026-11-21) and the targets of issue #20 (RSS ≤ 35 MB with beacons, ≤ 40 MB with the
progress and stats signals; CPU ≤ 0.5 % of a core); the stock client sends no extra requests, so requests are
absolute.

First eviction: a fresh interpreter that imported what a sidecar imports at start makes the sidecar's group client,
describes the group (as the watchdog does before it evicts), then times one compare-and-remove of a real member, with
kafka-python's client made: with the group client (before: at start); ahead of need (now: once the app has been
silent for half its stall timeout, `runtime.PREPARE_EVICTION_AT`, the loop wakes for it); by the eviction itself (now,
only when making it ahead of need failed: no broker answered then). Each `--evictions` times, in turn, a new group
each time; the differences of the medians are what the lazy load costs.

`--replicas N` also runs N sidecars at once (beacon signal, a group each) and adds up what the node pays: each one's
private memory (Private_Clean + Private_Dirty) plus the shared rest (the interpreter's and libraries' code) once; per
sidecar that is the cost a fleet multiplies.

`--before DIR` also measures, in the same run, the sidecar of another commit (`git archive COMMIT | tar -x -C DIR`:
its `core/` and `sidecar/` go first on the sidecar's PYTHONPATH) and gives the ratios to it. Anonymous memory is
shown beside RSS: the rest is file-backed (the interpreter's and libraries' shared objects), which the sidecars of
one image on a node share through the page cache.

    .venv/bin/python bench/sidecar_footprint.py [--seconds 60] [--evictions 5] [--before DIR] [--replicas N]
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vigil_dev import procs
from vigil_dev.kafka import cluster as kafka_cluster
from vigil_dev.testing import clients
from vigil_dev.testing.sidecar import RunningSidecar, start_sidecar
from vigil_sidecar.client import Consumer as HelperConsumer

CHECK = 5.0
SIGNALS = ("beacon", "progress", "stats")
BEFORE_MB = 65.0  # bench/RESULTS.md, 2026-11-21: every signal
TARGET_MB = {"beacon": 35.0, "progress": 40.0, "stats": 40.0}
TARGET_CPU = 0.5  # % of a core
TARGET_EVICTION_MS = 100.0  # the most the lazy load may add to the first eviction

MODES = {
    "eager": "made with the client (before)",
    "prepared": "made ahead of need (now)",
    "on-demand": "made by the eviction (now, if ahead of need failed)",
}
#: Run in a fresh interpreter: the first compare-and-remove of a sidecar's group client, timed (argv: a mode of
#: MODES, group, member id; the connection from the environment).
EVICT = """
import json, os, sys, time
import vigil_sidecar.__main__  # what a sidecar has imported once it serves
from vigil_core.kafka.group_client import GroupClient
from vigil_core.kafka.security import KafkaConnection

mode, group, member = sys.argv[1:4]
client = GroupClient(KafkaConnection.from_env(os.environ), client_id="vigil-sidecar-bench",
                     wire_on_demand=mode != "eager")
if mode == "prepared":
    client.open_wire()  # what the sidecar does at half the stall timeout
client.describe(group, subscriptions=False)  # the watchdog's look before it acts (the coordinator is known then)
loaded = "kafka" in sys.modules
started = time.perf_counter()
outcome = client.remove_member(group, member, None, "footprint benchmark")
took = time.perf_counter() - started
print(json.dumps({"ms": took * 1000, "outcome": outcome.name, "kafka_loaded_before": loaded}))
client.close()
"""


def _requests(sidecar: RunningSidecar) -> float:
    text = sidecar.get("/metrics")[1]
    return sum(float(v) for v in re.findall(r"^vigil_sidecar_broker_requests_total\{[^}]*\} ([0-9.e+]+)$", text, re.M))


def _kafka_python_loaded(sidecar: RunningSidecar) -> bool:
    return re.search(r"^import time:.*\|\s+kafka(\.\S+)?$", sidecar.log.read_text(), re.M) is not None


def _trickle(conn, topic: str, end: float, per_second: int) -> None:
    """A steady trickle of work for the groups on `topic`: `per_second` records each second until `end`."""
    i = 0
    while time.monotonic() < end:
        clients.produce(conn, topic, [f"m{i}-{n}" for n in range(per_second)])
        i += 1
        time.sleep(1.0)


def measure(
    conn, state: Path, signal: str, seconds: float, code: Path | None
) -> tuple[float, float, float, float, bool]:
    """RSS, anonymous memory, CPU, requests per check and whether kafka-python was loaded; `code`: another commit's
    tree whose sidecar is measured (None: this checkout's)."""
    topic = clients.create_topic(conn, clients.unique("fp"), partitions=2)
    group = clients.unique("g-fp")
    env = {"PYTHONPROFILEIMPORTTIME": "1"}
    if code is not None:
        env["PYTHONPATH"] = f"{code / 'core'}:{code / 'sidecar'}"
    sidecar = start_sidecar(conn, group, "pod-a", state, env=env, signal=signal,
                            stall_timeout_seconds=60, check_interval_seconds=CHECK, events_topic="",
                            budget="none")  # fmt: skip
    watched = clients.Member(conn, group, [topic], "pod-a")
    if signal in ("beacon", "stats"):
        watched.consumer_factory = lambda c: HelperConsumer(c, beacon_addr=sidecar.beacon_addr, signal=signal)
    members = [watched.start(), clients.Member(conn, group, [topic], "pod-b").start()]
    try:
        deadline = time.monotonic() + 60
        while clients.stable_members(conn, group) != 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(2 * CHECK)  # let identification and the first samples settle: measure the steady state
        pid = sidecar.process.pid()
        assert pid is not None
        cpu0, req0, t0 = procs.cpu_seconds(pid), _requests(sidecar), time.monotonic()
        _trickle(conn, topic, t0 + seconds, 10)
        elapsed = time.monotonic() - t0
        cpu = (procs.cpu_seconds(pid) - cpu0) / elapsed * 100
        per_check = (_requests(sidecar) - req0) / (elapsed / CHECK)
        rss, anon = procs.memory_mb(pid, "VmRSS"), procs.memory_mb(pid, "RssAnon")
        return rss, anon, cpu, per_check, _kafka_python_loaded(sidecar)
    finally:
        for m in members:
            m.close()
        sidecar.stop()


def density(conn, state: Path, replicas: int, seconds: float) -> list[tuple[float, float]]:
    """(RSS, private memory) of each of `replicas` sidecars (beacon signal) running at once on this machine, each
    watching a group of its own whose one member beacons to it, after `seconds` of a trickle of records."""
    topic = clients.create_topic(conn, clients.unique("fp-n"), partitions=replicas)
    sidecars: list[RunningSidecar] = []
    members: list[clients.Member] = []
    try:
        for i in range(replicas):
            group = clients.unique(f"g-fp-n{i}")
            sidecar = start_sidecar(conn, group, f"pod-{i}", state, signal="beacon", stall_timeout_seconds=60,
                                    check_interval_seconds=CHECK, events_topic="", budget="none")  # fmt: skip
            sidecars.append(sidecar)
            member = clients.Member(conn, group, [topic], f"pod-{i}")
            member.consumer_factory = lambda c, addr=sidecar.beacon_addr: HelperConsumer(c, beacon_addr=addr)
            members.append(member.start())
        _trickle(conn, topic, time.monotonic() + 2 * CHECK + seconds, replicas)  # identification settles first
        pids = [s.process.pid() for s in sidecars]
        assert all(pids), "a sidecar died"
        return [(procs.memory_mb(pid, "VmRSS"), procs.private_mb(pid)) for pid in pids if pid is not None]
    finally:
        for m in members:
            m.close()
        for sidecar in sidecars:
            sidecar.stop()


def first_eviction(kafka, mode: str) -> dict:
    """One timed first compare-and-remove (`mode`: one of MODES) of a real member of a new group."""
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("fp-ev"), partitions=2)
    group = clients.unique("g-fp-ev")
    member = clients.Member(conn, group, [topic], "pod-a").start()
    try:
        deadline = time.monotonic() + 60
        while (clients.stable_members(conn, group) != 1 or member.member_id is None) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert member.member_id is not None, "the member never joined"
        env = {**os.environ, **conn.to_env()}
        run = subprocess.run([sys.executable, "-c", EVICT, mode, group, member.member_id], env=env,
                             capture_output=True, text=True, check=True, timeout=120)  # fmt: skip
        result = json.loads(run.stdout.strip().splitlines()[-1])
        assert result["outcome"] == "NONE", result
        return result
    finally:
        member.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--evictions", type=int, default=5, help="timed first evictions per mode")
    parser.add_argument("--before", type=Path, help="another commit's tree (git archive): its sidecar measured too")
    parser.add_argument("--replicas", type=int, default=0,
                        help="also run this many sidecars at once: the memory a node pays for each")  # fmt: skip
    args = parser.parse_args()
    if args.before is not None and not (args.before / "sidecar" / "vigil_sidecar" / "__main__.py").is_file():
        parser.error(f"--before {args.before}: no sidecar/vigil_sidecar/__main__.py there (a `git archive` tree?)")
    state = Path(tempfile.mkdtemp(prefix="vigil-footprint-"))
    kafka = kafka_cluster.create(state / "stack", progress=lambda line: print(f"# {line}", flush=True))
    codes: list[tuple[str, Path | None]] = [("now", None)] + ([("before", args.before)] if args.before else [])
    try:
        rows = [
            (signal, label, *measure(kafka.connection(), state, signal, args.seconds, code))
            for signal in SIGNALS
            for label, code in codes
        ]
        together = density(kafka.connection(), state, args.replicas, args.seconds) if args.replicas > 0 else []
        evictions: dict[str, list[dict]] = {mode: [] for mode in MODES}
        for _ in range(args.evictions):
            for mode in MODES:
                evictions[mode].append(first_eviction(kafka, mode))
    finally:
        kafka.stop()
        shutil.rmtree(state, ignore_errors=True)
    print(f"\nsteady state over {args.seconds:.0f} s, check interval {CHECK:.0f} s, 2 partitions, 2 members\n")
    before = {signal: rss for signal, label, rss, *_ in rows if label == "before"}
    reference = "before, same run" if before else f"{BEFORE_MB:.0f} MB before"
    print(f"| signal | sidecar | RSS | anonymous | RSS / {reference} | RSS / target | CPU (% of a core)"
          " | CPU / 0.5 % target | broker requests per check | kafka-python loaded |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for signal, label, rss, anon, cpu, per_check, loaded in rows:
        target = TARGET_MB[signal]
        loaded_text = "yes" if loaded else "no"
        print(f"| {signal} | {label} | {rss:.1f} MB | {anon:.1f} MB | {rss / before.get(signal, BEFORE_MB):.2f}×"
              f" | {rss / target:.2f}× of {target:.0f} MB | {cpu:.2f} % | {cpu / TARGET_CPU:.2f}× | {per_check:.2f}"
              f" | {loaded_text} |")  # fmt: skip
    if together:
        n = len(together)
        rss = statistics.mean(r for r, _ in together)
        private = statistics.mean(p for _, p in together)
        shared = max(r - p for r, p in together)  # the libraries' pages, held once by the node
        per_pod = (sum(p for _, p in together) + shared) / n
        print(f"\n{n} sidecars at once (beacon signal), each watching its own group with one beaconing member\n")
        print("| sidecars | RSS each (mean) | private each (mean) | shared, once per node | node total | per sidecar"
              " | per sidecar / RSS | per sidecar / 35 MB target |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|")
        print(f"| {n} | {rss:.1f} MB | {private:.1f} MB | {shared:.1f} MB | {per_pod * n:.0f} MB | {per_pod:.1f} MB"
              f" | {per_pod / rss:.2f}× | {per_pod / TARGET_MB['beacon']:.2f}× |")  # fmt: skip
    if args.evictions < 1:
        return
    assert not any(r["kafka_loaded_before"] for r in evictions["on-demand"]), "on-demand: kafka-python was loaded"
    ms = {mode: [float(r["ms"]) for r in runs] for mode, runs in evictions.items()}
    median = {mode: statistics.median(values) for mode, values in ms.items()}
    print(f"\nfirst eviction (compare-and-remove after the watchdog's describe), median of {args.evictions} each\n")
    print("| kafka-python's client | first eviction (median) | all runs | added by the lazy load | added / 100 ms |")
    print("|---|---|---|---|---|")
    for mode, label in MODES.items():
        runs = ", ".join(f"{v:.0f}" for v in ms[mode])
        added = median[mode] - median["eager"]
        cost = "— | —" if mode == "eager" else f"{added:+.0f} ms | {added / TARGET_EVICTION_MS:.2f}×"
        print(f"| {label} | {median[mode]:.0f} ms | {runs} ms | {cost} |")


if __name__ == "__main__":
    main()
