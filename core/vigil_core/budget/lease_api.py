"""The eviction budget's I/O: read the group's Lease, apply the pure ledger rule, write it back compare-and-swap.

Two raw HTTP calls and nothing else — `GET` the Lease and `PUT` it back with the `metadata.resourceVersion` it was
read at — so the sidecar needs neither the `kubernetes` client (it stays small: `vigil_core.http_client`) nor more
RBAC than `get`/`update` on one pre-created Lease (RBAC cannot limit `create` by `resourceNames`). A `409
Conflict` means another sidecar wrote in between: read again, decide again on the new content, retry (bounded).

Every failure is an answer, never an exception: `BudgetUnavailable`. The sidecar treats it as "no permit" and
only alerts (event `eviction-refused` with the cause below) — no API access, a missing Lease or an unreachable
API server must never turn into unbudgeted evictions.
"""

import asyncio
import json
import os
import random
import ssl
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, Protocol, TypeVar

from vigil_core import http_client
from vigil_core.budget import ledger as ledger_rules
from vigil_core.budget.ledger import ANNOTATION, DEFAULT_FRESHNESS, Ledger, LedgerDecodeError, Permit, Refusal
from vigil_core.budget.poison import TopicPartition

SERVICE_ACCOUNT_DIR: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where the kubelet mounts the pod's token, CA and namespace (absent with `automountServiceAccountToken: false`)."""
LEASE_PATH: Final = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"

UnavailableCause = Literal["no-api", "no-permission", "no-lease", "unreachable", "bad-ledger", "contention"]
T = TypeVar("T")


@dataclass(frozen=True)
class BudgetUnavailable:
    """The budget cannot be consulted: do not evict; alert instead (the sidecar's alert-only mode).

    Causes: "no-api" (no token or service env: not in a cluster, or the token is not mounted), "no-permission"
    (403: the Role is missing), "no-lease" (404: the operator has not created it), "unreachable" (network,
    timeout, 5xx, 401 while a rotated token is picked up), "bad-ledger" (the annotation is not a ledger; fails
    closed until someone removes it), "contention" (still conflicting after the bounded retries).
    """

    cause: UnavailableCause
    message: str

    @property
    def retriable(self) -> bool:
        """Worth asking again at the next stall check ("unreachable", "contention"); the others need a human or the
        operator."""
        return self.cause in ("unreachable", "contention")


@dataclass(frozen=True)
class BudgetPolicy:
    """The group's guardrail settings (from the VigilGroup spec through the sidecar's config)."""

    stall_timeout: float
    max_concurrent: int
    """maxConcurrentEvictions."""
    cooldown: float
    systemic_percent: float
    """systemicStallPercent."""
    settle: float
    freshness: float = DEFAULT_FRESHNESS


class UnavailableError(Exception):
    """Raised by a store's read/replace; `update` turns it into its answer."""

    def __init__(self, answer: BudgetUnavailable) -> None:
        super().__init__(answer.message)
        self.answer = answer


class LeaseApi:
    """One group's budget Lease on one API server: `read` (GET) and `replace` (PUT under resourceVersion).

    Authentication is a bearer token (production: `token_file`, re-read per request because the kubelet rotates
    projected tokens) or a client certificate (`client_cert=(cert, key)`, e.g. the test harness's admin).
    """

    def __init__(
        self,
        server_url: str,
        namespace: str,
        lease_name: str,
        *,
        ca_file: Path | None = None,
        token: str | None = None,
        token_file: Path | None = None,
        client_cert: tuple[Path, Path] | None = None,
        timeout: float = 5.0,
        max_attempts: int = 8,
    ) -> None:
        self.url = server_url.rstrip("/") + LEASE_PATH.format(namespace=namespace, name=lease_name)
        self.namespace = namespace
        self.lease_name = lease_name
        self._token = token
        self._token_file = token_file
        self._ssl = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
        if client_cert is not None:
            self._ssl.load_cert_chain(str(client_cert[0]), str(client_cert[1]))
        self._timeout = timeout
        self.max_attempts = max_attempts
        self.conflicts = 0
        """409 answers seen (each one re-read and retried): for metrics, and for tests to prove the CAS ran."""
        self.writes = 0
        """Successful PUTs."""

    @classmethod
    def in_cluster(
        cls,
        lease_name: str,
        *,
        namespace: str | None = None,
        env: Mapping[str, str] = os.environ,
        account_dir: Path = SERVICE_ACCOUNT_DIR,
    ) -> "LeaseApi | BudgetUnavailable":
        """From the pod's mounted service account and `KUBERNETES_SERVICE_HOST/PORT`; without them, the reason."""
        host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
        token_file, ca_file = account_dir / "token", account_dir / "ca.crt"
        if not host or not port:
            return BudgetUnavailable("no-api", "KUBERNETES_SERVICE_HOST/PORT are not set: not running in a cluster")
        if not token_file.is_file() or not ca_file.is_file():
            return BudgetUnavailable("no-api", f"no service account token in {account_dir} (automount disabled?)")
        if namespace is None:
            try:
                namespace = (account_dir / "namespace").read_text().strip()
            except OSError as exc:
                return BudgetUnavailable("no-api", f"the pod's namespace is unknown: {exc}")
        server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
        return cls(server, namespace, lease_name, ca_file=ca_file, token_file=token_file)

    async def __aenter__(self) -> "LeaseApi":
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Nothing is kept open (a connection per call: the Lease is read at an eviction, rarely)."""

    # -- the two calls ---------------------------------------------------------------------------------------------

    async def read(self) -> dict[str, Any]:
        """GET the Lease (raises `UnavailableError`)."""
        status, body = await self._call("GET", None)
        if status != 200:
            raise UnavailableError(answer_for(status, body, self))
        return body

    async def replace(self, lease: dict[str, Any]) -> dict[str, Any] | None:
        """PUT the Lease as read (its resourceVersion is the compare); None on 409 Conflict."""
        status, body = await self._call("PUT", lease)
        if status == 409:
            self.conflicts += 1
            return None
        if status != 200:
            raise UnavailableError(answer_for(status, body, self))
        self.writes += 1
        return body

    async def _call(self, method: str, payload: dict[str, Any] | None) -> tuple[int, dict[str, Any]]:
        headers = [("Accept", "application/json")]
        token = self._bearer()
        if token:
            headers.append(("Authorization", f"Bearer {token}"))
        data = b""
        if payload is not None:
            headers.append(("Content-Type", "application/json"))
            data = json.dumps(payload).encode()
        try:
            async with asyncio.timeout(self._timeout):
                status, answer = await http_client.request(
                    method, self.url, headers=headers, body=data, ssl_context=self._ssl
                )
        except (TimeoutError, OSError) as exc:
            raise UnavailableError(
                BudgetUnavailable("unreachable", f"{method} {self.url}: {type(exc).__name__}: {exc}")
            ) from None
        try:
            body = json.loads(answer) if answer else {}
        except ValueError:
            body = {}
        return status, body if isinstance(body, dict) else {}

    def _bearer(self) -> str | None:
        if self._token_file is not None:
            try:
                return self._token_file.read_text().strip()
            except OSError as exc:
                raise UnavailableError(BudgetUnavailable("no-api", f"cannot read {self._token_file}: {exc}")) from None
        return self._token

    # -- read, decide, compare-and-swap ------------------------------------------------------------------------------

    async def update(
        self, change: Callable[[Ledger, float], tuple[Ledger, T]], clock: Callable[[], float]
    ) -> T | BudgetUnavailable:
        return await update(self, change, clock, max_attempts=self.max_attempts)


class LeaseStore(Protocol):
    """Where a group's budget Lease is read and replaced under its resourceVersion: the sidecar's raw HTTP
    `LeaseApi`, or the operator's own API client. `read`/`replace` raise `UnavailableError`."""

    @property
    def namespace(self) -> str: ...

    @property
    def lease_name(self) -> str: ...

    async def read(self) -> dict[str, Any]: ...

    async def replace(self, lease: dict[str, Any]) -> dict[str, Any] | None:
        """None on 409 Conflict (someone wrote in between)."""


async def update(
    store: LeaseStore,
    change: Callable[[Ledger, float], tuple[Ledger, T]],
    clock: Callable[[], float],
    *,
    max_attempts: int = 8,
) -> T | BudgetUnavailable:
    """Apply `change(ledger, now)` → (new ledger, answer) under compare-and-swap; the answer once written.

    Each attempt re-reads and re-decides, so a retried decision is taken on what the winner wrote, never on a
    stale view. Nothing is written when the ledger is unchanged.
    """
    where = f"lease {store.namespace}/{store.lease_name}"
    try:
        for attempt in range(max_attempts):
            lease = await store.read()
            annotations = lease.setdefault("metadata", {}).get("annotations") or {}
            current = annotations.get(ANNOTATION)
            try:
                ledger = ledger_rules.loads(current)
            except LedgerDecodeError as exc:
                return BudgetUnavailable("bad-ledger", f"{where}: {exc}")
            new, answer = change(ledger, clock())
            if new == ledger:
                return answer
            text = ledger_rules.dumps(new)
            if text == current:
                return answer
            lease["metadata"]["annotations"] = {**annotations, ANNOTATION: text}
            if await store.replace(lease) is not None:
                return answer
            await asyncio.sleep(random.uniform(0, 0.02 * 2**attempt))  # noqa: S311 - jitter, not crypto
    except UnavailableError as exc:
        return exc.answer
    return BudgetUnavailable("contention", f"{where}: still conflicting after {max_attempts} tries")


def answer_for(status: int, body: Mapping[str, Any], api: LeaseStore) -> BudgetUnavailable:
    """What an HTTP error status from the API server means for the budget."""
    what = f"lease {api.namespace}/{api.lease_name}: HTTP {status}: {body.get('message', '')}".rstrip(": ")
    if status == 403:
        return BudgetUnavailable("no-permission", f"{what} (vigil needs get/update on it)")
    if status == 404:
        return BudgetUnavailable("no-lease", f"{what} (the operator pre-creates it)")
    return BudgetUnavailable("unreachable", what)


# -- the two operations the sidecar uses -----------------------------------------------------------------------------


async def publish(
    api: LeaseApi,
    pod: str,
    poll_age: float,
    *,
    stall_timeout: float | None = None,
    freshness: float = DEFAULT_FRESHNESS,
    clock: Callable[[], float] = time.time,
) -> Ledger | BudgetUnavailable:
    """Write this pod's poll age into the group's ledger; the ledger as written (for `should_publish` next time)."""

    def change(ledger: Ledger, now: float) -> tuple[Ledger, Ledger]:
        new = ledger_rules.publish(ledger, pod, poll_age, now, stall_timeout=stall_timeout, freshness=freshness)
        return new, new

    return await api.update(change, clock)


async def request_permit(
    api: LeaseApi,
    pod: str,
    member_id: str,
    poll_age: float,
    policy: BudgetPolicy,
    *,
    partitions: Collection[TopicPartition] = (),
    committed: Mapping[TopicPartition, int] | None = None,
    clock: Callable[[], float] = time.time,
) -> Permit | Refusal | BudgetUnavailable:
    """Publish this pod's poll age and ask for a permit to evict `member_id`, in one compare-and-swap write.

    `partitions` (the member's) and their `committed` offsets feed the poison-pill guard. A `Permit` is returned
    only once it is recorded in the Lease; evict only then. A `Refusal` with cause "settle" says to ask again at
    `retry_at`.
    """

    def decide(ledger: Ledger, now: float) -> Permit | Refusal:
        published = ledger_rules.publish(
            ledger, pod, poll_age, now, stall_timeout=policy.stall_timeout, freshness=policy.freshness
        )
        return ledger_rules.decide_permit(
            published,
            pod,
            policy.stall_timeout,
            now,
            member_id=member_id,
            max_concurrent=policy.max_concurrent,
            cooldown=policy.cooldown,
            systemic_percent=policy.systemic_percent,
            settle=policy.settle,
            freshness=policy.freshness,
            partitions=partitions,
            committed=committed,
        )

    return await update(api, _recorded(decide), clock, max_attempts=api.max_attempts)


async def request_removal(
    store: LeaseStore,
    pod: str,
    member_id: str,
    *,
    proven_gone: bool,
    max_concurrent: int,
    cooldown: float,
    clock: Callable[[], float] = time.time,
) -> Permit | Refusal | BudgetUnavailable:
    """The operator's removal of a departed member, recorded in (and, unless proven gone, limited by) the budget
    the sidecars share (`ledger.decide_removal`)."""

    def decide(ledger: Ledger, now: float) -> Permit | Refusal:
        return ledger_rules.decide_removal(
            ledger, pod, now, member_id=member_id, proven_gone=proven_gone, max_concurrent=max_concurrent,
            cooldown=cooldown,
        )  # fmt: skip

    return await update(store, _recorded(decide), clock)


def _recorded(
    decide: Callable[[Ledger, float], Permit | Refusal],
) -> Callable[[Ledger, float], tuple[Ledger, Permit | Refusal]]:
    """A decision as an `update` change: its ledger is written, the decision is the answer."""

    def change(ledger: Ledger, now: float) -> tuple[Ledger, Permit | Refusal]:
        decision = decide(ledger, now)
        return decision.ledger, decision

    return change
