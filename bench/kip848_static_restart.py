"""A KIP-848 static member's app killed and restarted after two sessions: group epochs bumped, vigil vs stock.

One fresh local broker; per round, vigil then stock, each on a fresh 4-partition topic and group of two static
KIP-848 members (the app, a real process, and one in-process member) with the broker's 10 s session. The app is
killed (-9), stays away `--away` seconds, is started again; the clock runs from the restart until the app holds
partitions again, and the group must then be Stable with 2 members. What happened in between is counted from the
broker's own log for that group (`vigil_dev.testing.broker_log`), never from vigil: epoch bumps, session expiries,
static releases (epoch -2), static replacements, UNRELEASED_INSTANCE_ID refusals.

- vigil: a sidecar with bridging on watches the app, which beacons to it through the helper
  (`vigil_sidecar.client.Consumer`): while the app is away the sidecar keeps its member alive at its epoch; the
  restarted helper asks for the go-ahead, the sidecar releases the instance id, and the app's join replaces the
  member.
- stock: the same app with an empty beacon address. The helper then does nothing (no hold, no go-ahead wait, no
  beacons: `_BeaconSender.from_addr("")` is None), so the app runs exactly the plain confluent-kafka consumer — the
  fairest stock. An unused loopback port instead would add a refused hold connection and a retry thread the stock
  client does not have.

    .venv/bin/python bench/kip848_static_restart.py [--rounds 3] [--away 20] [--kafka-version 4.4.0]
"""

import argparse
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from vigil_core.kafka.security import ClientConfig, KafkaConnection
from vigil_dev import procs
from vigil_dev.errors import DevError
from vigil_dev.kafka import cluster as kafka_cluster
from vigil_dev.kafka import install
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.kafka.config import TEST_BROKER_SETTINGS
from vigil_dev.testing import broker_log, clients, static_app
from vigil_dev.testing.sidecar import RunningSidecar, start_sidecar
from vigil_dev.testing.waiting import WaitTimeoutError, wait_for

ROOT = Path(__file__).resolve().parents[1]
SESSION = int(TEST_BROKER_SETTINGS["group.consumer.session.timeout.ms"]) / 1000
"""The broker's KIP-848 session: the coordinator fences a member silent this long."""
APP, OTHER = "k848-app", "k848-other"
"""The static app's and the other member's instance ids (each round has its own group)."""
ASSIGNED = re.compile(r"static_app: member=(\S+) generation=\d+ assigned=[1-9]")
"""The app's own line when it holds partitions."""
KIP848_VERSIONS = [v for v in install.SUPPORTED_VERSIONS if int(v.split(".")[0]) >= 4]
"""Static members on the consumer protocol are GA from Kafka 4.0."""


@dataclass(frozen=True)
class Round:
    """What the broker logged for the group between the kill and the recovery, and the restart's duration."""

    bumps: list[int]
    """The group epochs bumped to."""
    expiries: int
    releases: int
    replacements: int
    refusals: int
    to_partitions: float
    """Seconds from the restart until the app holds partitions again."""
    kept: str
    """vigil: how long the sidecar kept the member alive, with how many keep-alives, and how the bridge ended."""


def say(line: str) -> None:
    print(f"# {line}", flush=True)


def holding(log: Path, since: int) -> str | None:
    """The app's member id once its log (after byte `since`) says it holds partitions, else None."""
    text = log.read_bytes()[since:].decode(errors="replace") if log.exists() else ""
    found = ASSIGNED.findall(text)
    return found[-1] if found else None


def restart_round(kafka: KafkaCluster, state: Path, *, vigil: bool, away: float) -> Round:
    """One kill-and-restart of the app in a fresh group; every process it started is stopped on the way out."""
    conn: KafkaConnection = kafka.connection()
    state.mkdir(parents=True)
    topic = clients.create_topic(conn, clients.unique("k848-bench"), partitions=4)
    group = clients.unique("g-k848-bench")
    sidecar: RunningSidecar | None = None
    other: clients.Member | None = None
    app: procs.Managed | None = None
    log = static_app.log_path(state, APP)
    try:
        if vigil:
            sidecar = start_sidecar(
                conn, group, "pod-k848", state, instance_id=APP, group_protocol="consumer", budget="none",
                stall_timeout_seconds=60, check_interval_seconds=1, session_timeout_seconds=SESSION,
                bridge_enabled="true", max_bridge_seconds=max(120.0, 3 * away), events_topic="",
            )  # fmt: skip
        beacon_addr = sidecar.beacon_addr if sidecar is not None else ""
        extra: ClientConfig = {"group.protocol": "consumer", "group.instance.id": OTHER}
        other = clients.Member(conn, group, [topic], OTHER, extra=extra).start()
        app = static_app.start(conn, group, topic, APP, state, beacon_addr=beacon_addr, protocol="consumer")
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 2, timeout=90, what="2 members Stable")
        first = wait_for(lambda: holding(log, 0), timeout=60, what="the app holding partitions")
        if sidecar is not None:  # the bridge starts only for a member the sidecar has proven, on the hold's close
            watched = sidecar
            wait_for(watched.status, lambda s: (s.get("member") or {}).get("member_id") == first
                     and s["app"]["helper_connections"] == 1, timeout=60,
                     what="the sidecar holding the app's connection and proving its member")  # fmt: skip
        before = counts(kafka, group)
        app.kill()
        time.sleep(away)  # the scenario's duration (the app is away), not a wait for a condition
        kept = "—"
        if sidecar is not None:
            bridge = sidecar.status().get("bridge") or {}
            kept = f"{bridge.get('seconds_bridged') or 0:.1f} s, {bridge.get('heartbeats_sent') or 0}"
        since = log.stat().st_size
        restarted = time.monotonic()
        app = static_app.start(conn, group, topic, APP, state, beacon_addr=beacon_addr, protocol="consumer")
        wait_for(lambda: holding(log, since), timeout=90, what="the restarted app holding partitions", interval=0.05)
        to_partitions = time.monotonic() - restarted
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 2, timeout=60, what="2 members Stable")
        if sidecar is not None:
            watched = sidecar
            ended = wait_for(lambda: watched.status().get("bridge") or {}, lambda b: b.get("state") == "ended",
                             timeout=30, what="the bridge ended")  # fmt: skip
            kept += f", {ended.get('outcome')}"
        after = counts(kafka, group)
        return Round(
            bumps=after.bumps[len(before.bumps) :],
            expiries=after.expiries - before.expiries,
            releases=after.releases - before.releases,
            replacements=after.replacements - before.replacements,
            refusals=after.refusals - before.refusals,
            to_partitions=to_partitions,
            kept=kept,
        )
    finally:
        if app is not None:
            app.stop(grace=5)
        if other is not None:
            other.close()
        if sidecar is not None:
            sidecar.stop()


@dataclass(frozen=True)
class Counts:
    bumps: list[int]
    expiries: int
    releases: int
    replacements: int
    refusals: int


def counts(kafka: KafkaCluster, group: str) -> Counts:
    """The broker log's lines for `group` so far (the app's instance id where they name one)."""
    return Counts(
        bumps=broker_log.epoch_bumps(kafka, group),
        expiries=len(broker_log.session_expiries(kafka, group)),
        releases=len(broker_log.static_releases(kafka, group, APP)),
        replacements=len(broker_log.static_replacements(kafka, group, APP)),
        refusals=len(broker_log.unreleased_refusals(kafka, group, APP)),
    )


def table(arm: str, rounds: list[Round]) -> None:
    print(f"\n{arm}\n")
    print(
        "| round | epoch bumps (to) | session expiries | static releases | static replacements | unreleased refusals "
        "| restart → partitions | kept alive (s, keep-alives, end) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(rounds, 1):
        bumped = f"{len(r.bumps)} ({', '.join(map(str, r.bumps))})" if r.bumps else "0"
        print(f"| {i} | {bumped} | {r.expiries} | {r.releases} | {r.replacements} | {r.refusals} "
              f"| {r.to_partitions:.1f} s | {r.kept} |")  # fmt: skip
    med = statistics.median
    print(
        f"| median | {med(len(r.bumps) for r in rounds):g} | {med(r.expiries for r in rounds):g} "
        f"| {med(r.releases for r in rounds):g} | {med(r.replacements for r in rounds):g} "
        f"| {med(r.refusals for r in rounds):g} | {med(r.to_partitions for r in rounds):.1f} s | |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3, help="kill-and-restart rounds per arm")
    parser.add_argument("--away", type=float, default=2 * SESSION, help="seconds the app stays dead")
    parser.add_argument("--kafka-version", choices=KIP848_VERSIONS, default=None,
                        help="default: the dev stack's")  # fmt: skip
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="default: test-artifacts/bench-k848-<time> (kept: broker and app logs)")  # fmt: skip
    args = parser.parse_args()
    state = (args.state_dir or ROOT / "test-artifacts" / f"bench-k848-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    state.mkdir(parents=True, exist_ok=True)
    os.environ[procs.DIE_WITH_PARENT_ENV] = str(os.getpid())  # servers die with this process, even on SIGKILL
    say(f"state and logs: {state}")
    kafka: KafkaCluster | None = None
    version, server_log = args.kafka_version or "?", state / "stack"
    rows: dict[str, list[Round]] = {"vigil": [], "stock": []}
    try:
        kafka = kafka_cluster.create(state / "stack", version=args.kafka_version, progress=say)
        version, server_log = kafka.version, kafka.server_log(kafka.nodes[0].node_id)
        for n in range(1, args.rounds + 1):
            for arm, done in rows.items():  # interleaved: both arms see the same machine load
                say(f"round {n}/{args.rounds}, {arm}: kill -9, away {args.away:g} s, restart ...")
                done.append(restart_round(kafka, state / f"{arm}-{n}", vigil=arm == "vigil", away=args.away))
                say(f"  {done[-1]}")
    except (DevError, WaitTimeoutError) as exc:
        print(f"kip848 bench: {' '.join(str(exc).split())[:500]} (logs: {state})", file=sys.stderr)
        return 1
    finally:
        if kafka is not None:
            kafka.stop()
    print(f"\nKafka {version}, KIP-848 session {SESSION:g} s, app away {args.away:g} s, {args.rounds} rounds per arm")
    for arm, rounds in rows.items():
        table(arm, rounds)
    vigil, stock = rows["vigil"], rows["stock"]
    bumps_v = statistics.median(len(r.bumps) for r in vigil)
    bumps_s = statistics.median(len(r.bumps) for r in stock)
    time_v = statistics.median(r.to_partitions for r in vigil)
    time_s = statistics.median(r.to_partitions for r in stock)
    print(
        f"\nepoch bumps per restart (median): vigil {bumps_v:g} vs stock {bumps_s:g} "
        f"({sum(len(r.bumps) for r in vigil)} vs {sum(len(r.bumps) for r in stock)} in all); "
        f"restart → partitions (median): vigil {time_v:.1f} s / stock {time_s:.1f} s = {time_v / time_s:.2f}×"
    )
    if any(r.bumps for r in vigil):
        print(f"kip848 bench: vigil bumped an epoch; see {server_log} (grep the group ids)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # every process and the broker were stopped on the way out
        sys.exit(130)
