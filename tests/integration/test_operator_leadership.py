"""Leader election of operator replicas (`shells.leadership.Leadership`) on a real Lease of the real kube-apiserver:
two replicas in one process, each with its own API client, as two operator pods would be. Exactly one leads; a
release hands over at the standby's next try; a leader that stops renewing (its loop cancelled without a release:
a crash) is replaced once the lease duration has passed since its last renewal, not before; an API server that
refuses (403) or does not answer is one log line and no leader, and leadership follows once it answers.

Short timings keep it fast: the Lease's duration is 3 s (10 s where a handover must be told from an expiry)."""

import asyncio
import json
import logging
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypeVar

import pytest
from kubernetes import client, config

from vigil_dev.testing.clients import unique
from vigil_dev.testing.kube_fixtures import Kube
from vigil_dev.testing.waiting import bound
from vigil_operator.domain.leadership import Timing
from vigil_operator.k8s.api import KubeApi
from vigil_operator.shells.base import SyncStoppedError, stopping, unless_stopped
from vigil_operator.shells.leadership import Leadership, TermEnd

pytestmark = [pytest.mark.kube, pytest.mark.integration]

LEASE = "vigil-operator-leader"
QUICK = Timing(lease_duration=3, renew_deadline=2, retry_period=0.5)
SLOW_EXPIRY = Timing(lease_duration=10, renew_deadline=4, retry_period=0.5)
"""A lease long enough that a handover within a few retry periods can only be the release's doing."""
LOGGER = "vigil_operator.shells.leadership"
T = TypeVar("T")


@contextmanager
def replica_api(kube: Kube, clients: list[Any] | None = None) -> Iterator[KubeApi]:
    """An API client of its own, as each operator pod has (the admin's credentials); its `ApiClient` appended to
    `clients`, for a test that cuts it off."""
    loader: Any = config
    api_client = loader.new_client_from_config(config_file=str(kube.kubeconfig))
    if clients is not None:
        clients.append(api_client)
    api = KubeApi(api_client)
    try:
        yield api
    finally:
        api.close()


async def until(probe: Callable[[], T], accept: Callable[[T], bool], *, timeout: float, what: str) -> T:
    """`waiting.wait_for` for a test running on the event loop the replicas run on."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if accept(value):
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout:.1f}s (last: {value!r})")
        await asyncio.sleep(0.05)


def stored(kube: Kube, namespace: str) -> dict[str, Any]:
    """The Lease's spec as the API server stores it."""
    lease = client.CoordinationV1Api(kube.api).read_namespaced_lease(LEASE, namespace, _preload_content=False)
    return dict(json.loads(lease.data)["spec"])


def epoch(micro_time: str) -> float:
    return datetime.fromisoformat(micro_time.replace("Z", "+00:00")).timestamp()


def test_of_two_replicas_exactly_one_leads_and_its_release_hands_over_at_the_next_try(
    kube: Kube, namespace: str
) -> None:
    async def scenario() -> float:
        with replica_api(kube) as api_a, replica_api(kube) as api_b:
            a = Leadership(api_a, namespace, LEASE, unique("replica-a"), timing=SLOW_EXPIRY)
            b = Leadership(api_b, namespace, LEASE, unique("replica-b"), timing=SLOW_EXPIRY)
            runs = [asyncio.create_task(a.run())]
            term = await asyncio.wait_for(a.leading(), timeout=bound(SLOW_EXPIRY.retry_period))
            assert stopping(term) is None
            resync = asyncio.create_task(unless_stopped(term, asyncio.Event().wait()))  # work under a's term
            runs.append(asyncio.create_task(b.run()))
            both: list[float] = []

            def sample() -> tuple[int, int]:
                if a.is_leader and b.is_leader:
                    both.append(time.monotonic())
                return a.writes, b.reads

            renewed, read = a.writes, b.reads
            await until(sample, lambda n: n[0] >= renewed + 4 and n[1] >= read + 4,
                        timeout=bound(5 * SLOW_EXPIRY.retry_period),
                        what="a renewing and b reading the Lease, four times each")  # fmt: skip
            assert both == [], "both replicas led at once"
            assert (a.is_leader, b.is_leader, b.holder) == (True, False, a.identity)
            assert b.writes == 0, "the standby wrote the Lease while it was held"
            held = stored(kube, namespace)
            assert (held["holderIdentity"], held["leaseDurationSeconds"], held["leaseTransitions"]) == (
                a.identity, 10, 0,
            )  # fmt: skip

            assert not resync.done()
            released = time.monotonic()
            await a.release()
            assert term.is_set()
            assert stopping(term) == "leadership released"
            assert not a.is_leader
            with pytest.raises(SyncStoppedError):
                await asyncio.wait_for(resync, timeout=1)  # the work under the term gave way
            took_over = await asyncio.wait_for(b.leading(), timeout=bound(SLOW_EXPIRY.retry_period))
            handover = time.monotonic() - released
            assert not took_over.is_set()
            assert runs[0].done(), "the release did not stop the loop"
            held = stored(kube, namespace)
            assert (held["holderIdentity"], held["leaseTransitions"]) == (b.identity, 1)
            await b.release()
            assert stored(kube, namespace).get("holderIdentity") is None
            for run in runs:
                run.cancel()
            await asyncio.gather(*runs, return_exceptions=True)
            return handover

    handover = asyncio.run(scenario())
    print(f"handover after a release: {handover:.2f}s (retry period {SLOW_EXPIRY.retry_period}s, lease 10s)")
    assert handover <= bound(SLOW_EXPIRY.retry_period) < SLOW_EXPIRY.lease_duration


def test_a_leader_that_stops_renewing_is_replaced_after_the_lease_duration_not_before(
    kube: Kube, namespace: str
) -> None:
    async def scenario() -> tuple[list[dict[str, Any]], int, float]:
        with replica_api(kube) as api_a, replica_api(kube) as api_b:
            a = Leadership(api_a, namespace, LEASE, unique("replica-a"), timing=QUICK)
            b = Leadership(api_b, namespace, LEASE, unique("replica-b"), timing=QUICK)
            run_a = asyncio.create_task(a.run())
            term = await asyncio.wait_for(a.leading(), timeout=bound(QUICK.retry_period))
            run_b = asyncio.create_task(b.run())
            await until(lambda: (b.reads, b.holder), lambda r: r[0] >= 2 and r[1] == a.identity,
                        timeout=bound(2 * QUICK.retry_period), what="b standing by for a")  # fmt: skip

            history: list[dict[str, Any]] = []  # every version of the Lease the test saw, until b holds it

            def watch() -> str | None:
                spec = stored(kube, namespace)
                if not history or spec != history[-1]:
                    history.append(spec)
                return spec.get("holderIdentity")

            run_a.cancel()  # a crash: no release; a write in flight may still land
            crashed = time.monotonic()
            await asyncio.gather(run_a, return_exceptions=True)
            assert term.is_set()
            assert term.reason is TermEnd.ELECTION_STOPPED
            reads = b.reads
            await until(lambda: (watch(), b.is_leader), lambda w: w == (b.identity, True),
                        timeout=bound(QUICK.lease_duration + QUICK.retry_period),
                        what="b taking over from the crashed a")  # fmt: skip
            replaced = time.monotonic() - crashed
            looked = b.reads - reads
            await b.release()
            run_b.cancel()
            await asyncio.gather(run_b, return_exceptions=True)
            return history, looked, replaced

    history, looked, replaced = asyncio.run(scenario())
    held_by_a = [spec for spec in history if spec.get("holderIdentity", "").startswith("replica-a")]
    last_renewal = epoch(held_by_a[-1]["renewTime"])
    taken = history[-1]
    assert taken["leaseTransitions"] == 1
    after = epoch(taken["acquireTime"]) - last_renewal  # both stamped by this machine's clock
    print(f"crashed leader replaced {after:.2f}s after its last renewal ({replaced:.2f}s after the crash); "
          f"b read the Lease {looked} times meanwhile")  # fmt: skip
    assert after >= QUICK.lease_duration, f"taken {after:.2f}s after the last renewal: before the lease ran out"
    assert after <= bound(QUICK.lease_duration + QUICK.retry_period)
    assert looked >= 3, "b did not keep reading while it waited: the wait proves nothing"


def test_a_write_under_a_stale_resource_version_is_refused(kube: Kube, namespace: str) -> None:
    """The compare-and-swap the election rests on (`KubeApi.create_lease`, `update_lease`: a JSON merge patch
    carrying the resourceVersion it was read at): the API server refuses the second of two writes from one version
    (409 → None) and a second create; a merge patch's null removes the holder."""

    async def scenario() -> list[Any]:
        with replica_api(kube) as api:
            spec = {"holderIdentity": "a", "leaseDurationSeconds": 3, "renewTime": "2027-01-15T08:00:00.250000Z"}
            created = await api.create_lease(namespace, LEASE, spec)
            assert created is not None
            version = created["metadata"]["resourceVersion"]
            first = await api.update_lease(namespace, LEASE, {"holderIdentity": "b"}, resource_version=version)
            second = await api.update_lease(namespace, LEASE, {"holderIdentity": "c"}, resource_version=version)
            again = await api.create_lease(namespace, LEASE, spec)
            assert first is not None
            cleared = await api.update_lease(
                namespace, LEASE, {"holderIdentity": None}, resource_version=first["metadata"]["resourceVersion"]
            )
            return [first["spec"]["holderIdentity"], second, again, cleared and cleared["spec"]]

    first, second, again, cleared = asyncio.run(scenario())
    assert (first, second, again) == ("b", None, None)
    assert cleared == {"leaseDurationSeconds": 3, "renewTime": "2027-01-15T08:00:00.250000Z"}
    assert stored(kube, namespace) == cleared


def test_a_leader_cut_off_from_the_api_server_stops_leading_before_the_standby_takes_over(
    kube: Kube, namespace: str
) -> None:
    """`a` keeps running but its requests are refused (its client pointed at a closed port: as if its node lost the
    network): its term ends at the renew deadline after its last renewal, and only after that — the lease duration
    after `b` last saw the Lease change — does `b` lead. Then `a`, answered again, stands by."""

    async def scenario() -> tuple[float, float, float]:
        clients: list[Any] = []
        with replica_api(kube, clients) as api_a, replica_api(kube) as api_b:
            a = Leadership(api_a, namespace, LEASE, unique("replica-a"), timing=QUICK)
            b = Leadership(api_b, namespace, LEASE, unique("replica-b"), timing=QUICK)
            runs = [asyncio.create_task(a.run())]
            term = await asyncio.wait_for(a.leading(), timeout=bound(QUICK.retry_period))
            runs.append(asyncio.create_task(b.run()))
            await until(lambda: (b.reads, b.holder), lambda r: r[0] >= 2 and r[1] == a.identity,
                        timeout=bound(2 * QUICK.retry_period), what="b standing by for a")  # fmt: skip
            server = clients[0].configuration.host
            failures = a.failures
            clients[0].configuration.host = f"https://127.0.0.1:{closed_port()}"
            cut = time.monotonic()
            await asyncio.wait_for(term.wait(), timeout=bound(QUICK.renew_deadline))
            ended = time.monotonic()
            assert a.failures > failures
            assert stopping(term) == "leadership lost"
            assert not b.is_leader, "b led before a's term ended"
            await asyncio.wait_for(b.leading(), timeout=bound(QUICK.lease_duration))
            began = time.monotonic()
            clients[0].configuration.host = server
            await until(lambda: a.holder, lambda h: h == b.identity, timeout=bound(2 * QUICK.retry_period),
                        what="a, answered again, seeing b hold the Lease")  # fmt: skip
            assert not a.is_leader
            await b.release()
            for run in runs:
                run.cancel()
            await asyncio.gather(*runs, return_exceptions=True)
            return cut, ended, began

    cut, ended, began = asyncio.run(scenario())
    print(f"cut off: a stopped leading after {ended - cut:.2f}s, b led {began - ended:.2f}s later")
    assert ended - cut <= QUICK.renew_deadline + 0.5  # from its last renewal (before the cut), not the lease's 3 s
    assert began - ended >= QUICK.lease_duration - QUICK.renew_deadline - QUICK.retry_period


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def token_api(kube: Kube, token: str) -> KubeApi:
    configuration = client.Configuration()
    configuration.host = kube.cluster.server
    configuration.ssl_ca_cert = str(kube.cluster.pki.ca_cert)
    configuration.api_key = {"authorization": f"Bearer {token}"}
    return KubeApi(client.ApiClient(configuration))


def test_an_api_server_that_refuses_or_does_not_answer_is_one_log_line_and_no_leader(
    kube: Kube, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A ServiceAccount without RBAC on Leases (403), then granted it: the same replica leads, no restart. A
    replica whose API server does not answer stays a candidate, with one log line however often it tries."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    account = "vigil-operator-test"
    kube.core.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
    token = kube.core.create_namespaced_service_account_token(account, namespace, {"spec": {"expirationSeconds": 600}})
    unreachable = client.Configuration()
    unreachable.host = f"https://127.0.0.1:{closed_port()}"
    unreachable.retries = 0

    async def scenario() -> tuple[Leadership, Leadership]:
        forbidden = Leadership(token_api(kube, token.status.token), namespace, LEASE, "forbidden", timing=QUICK)
        away = Leadership(KubeApi(client.ApiClient(unreachable)), namespace, LEASE, "away", timing=QUICK)
        runs = [asyncio.create_task(forbidden.run()), asyncio.create_task(away.run())]
        await until(lambda: (forbidden.failures, away.failures), lambda f: min(f) >= 4,
                    timeout=bound(4 * QUICK.retry_period), what="both replicas trying four times")  # fmt: skip
        assert not forbidden.is_leader
        assert not away.is_leader
        assert not any(run.done() for run in runs), "an API error ended the election loop"
        kube.apply(
            f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: vigil-leader-election, namespace: {namespace}}}
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: vigil-leader-election, namespace: {namespace}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: vigil-leader-election}}
subjects:
- {{kind: ServiceAccount, name: {account}, namespace: {namespace}}}
"""
        )
        await asyncio.wait_for(forbidden.leading(), timeout=30)  # RBAC reaches the authorizer through an informer
        assert not away.is_leader
        await forbidden.release()
        for run in runs:
            run.cancel()
        await asyncio.gather(*runs, return_exceptions=True)
        forbidden.kube.close()
        away.kube.close()
        return forbidden, away

    forbidden, away = asyncio.run(scenario())
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    forbidden_line = f"leader election as forbidden: Lease {namespace}/{LEASE}: 403 "
    refused = [line for line in lines if line.startswith(forbidden_line)]
    assert len(refused) == 1, lines
    assert refused[0].endswith("; not leading"), refused[0]
    down = [line for line in lines if "as away:" in line and "unreachable" in line]
    assert len(down) == 1, lines
    assert any("as forbidden: the API server answers again" in line for line in lines), lines
    assert any("as forbidden: leading (term 1" in line for line in lines), lines
    assert forbidden.failures >= 4
    assert away.failures >= 4
