"""Prometheus metrics of the operator (`/metrics` on `--metrics-port`).

Counters of the operator's own work have bounded labels (causes, outcomes). The per-group series
(`vigil_operator_consumergroup_*`) carry the ConsumerGroup's namespace and name and the Kafka group id, one series
per group and never a member or pod name (members come and go; groups are what a team alerts on); a deleted
ConsumerGroup's series go with it."""

import contextlib
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, disable_created_metrics, start_http_server

from vigil_core.kafka.model import GroupState
from vigil_operator.domain.readings import Readings

# No `_created` series beside each counter: at 10,000 groups, 10,000 more per-group series that no rate() reads.
disable_created_metrics()  # type: ignore[no-untyped-call]
GROUP_LABELS = ("namespace", "consumergroup", "group")
"""The ConsumerGroup's namespace and name, and its Kafka group id."""
GroupLabels = tuple[str, str, str]
INJECT_SIDECAR = "inject-sidecar"
ONE_CR_PER_GROUP = "one-cr-per-group"
OTHER_WEBHOOK = "other"
WEBHOOKS = (INJECT_SIDECAR, ONE_CR_PER_GROUP, OTHER_WEBHOOK)
"""The `webhook` label's values: the admission handlers' ids (their paths), and `other` for any other path a
caller posts to (never the path itself: the label's values stay a closed set)."""


class OperatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.resyncs = Counter("vigil_operator_resyncs", "Group resyncs (describe, status)", registry=self.registry)
        self.member_removals = Counter(
            "vigil_operator_member_removals", "Departed members removed at once, by cause", ["cause"],
            registry=self.registry,
        )  # fmt: skip
        self.removals_deferred = Counter(
            "vigil_operator_member_removals_deferred", "Removals the eviction budget held back, by cause", ["cause"],
            registry=self.registry,
        )  # fmt: skip
        self.removal_failures = Counter(
            "vigil_operator_member_removal_failures", "Removals Kafka refused or did not answer, by cause", ["cause"],
            registry=self.registry,
        )  # fmt: skip
        self.member_releases = Counter(
            "vigil_operator_member_releases",
            "KIP-848 static members of gone consumers whose instance id was released for their replacement, by cause"
            " and the broker's answer", ["cause", "outcome"], registry=self.registry,
        )  # fmt: skip
        self.rollout_restarts = Counter(
            "vigil_operator_rollout_pod_restarts", "Pods deleted by coordinated rollouts, by how the member was kept",
            ["bridge"], registry=self.registry,
        )  # fmt: skip
        self.deliberate_rebalances = Counter(
            "vigil_operator_deliberate_rebalances", "Rebalances started after a rollout changed subscriptions",
            ["rejoined"], registry=self.registry,
        )  # fmt: skip

        self.webhook_errors = Counter(
            "vigil_operator_webhook_errors",
            "Admission requests a webhook failed (an error, not a refusal: a handler's exception or a request it"
            " could not serve), by webhook (its path: inject-sidecar, one-cr-per-group; other for any other path)",
            ["webhook"], registry=self.registry,
        )  # fmt: skip
        for webhook in WEBHOOKS:  # at 0 from the start, so increase() sees the first error
            self.webhook_errors.labels(webhook)

        self.group_states = Gauge(
            "vigil_operator_group_state",
            "ConsumerGroups this replica resyncs, by the Kafka group state their last resync saw (KIP-848 Assigning and"
            " Reconciling named by ConsumerGroupDescribe; Unknown: not described)", ["state"], registry=self.registry,
        )  # fmt: skip
        for state in GroupState:  # every state at 0, so a dashboard sees a state empty out rather than vanish
            self.group_states.labels(state.value).set(0)
        self.status_writes = Counter(
            "vigil_operator_status_writes", "ConsumerGroup status writes (a resync that changed nothing writes none)",
            registry=self.registry,
        )  # fmt: skip
        self.group_state = Gauge(
            "vigil_operator_consumergroup_state", "1 for the Kafka group state the group's last resync saw",
            [*GROUP_LABELS, "state"], registry=self.registry,
        )  # fmt: skip
        self.group_members = Gauge(
            "vigil_operator_consumergroup_members", "Members in the group at its last resync", GROUP_LABELS,
            registry=self.registry,
        )  # fmt: skip
        self.group_lag = Gauge(
            "vigil_operator_consumergroup_lag",
            "Committed lag at the last resync: over the members' assigned partitions, the read_committed end offset"
            " minus the committed offset, summed; for a share group, the records not yet delivered and acknowledged"
            " as the broker counts them (KIP-1226, Kafka 4.4+) (absent when unknown)", GROUP_LABELS,
            registry=self.registry,
        )  # fmt: skip
        self.group_rebalances = Counter(
            "vigil_operator_consumergroup_rebalances",
            "Rebalances of the group, counted from its group epoch (KIP-848) or generation (classic, as"
            " __consumer_offsets says it) delta between two resyncs", GROUP_LABELS, registry=self.registry,
        )  # fmt: skip
        self.group_without_sidecar = Gauge(
            "vigil_operator_consumergroup_pods_without_sidecar",
            "The group's pods labelled for injection that run without the vigil sidecar (condition SidecarMissing)",
            GROUP_LABELS, registry=self.registry,
        )  # fmt: skip
        self.group_resynced = Gauge(
            "vigil_operator_consumergroup_last_resync_timestamp_seconds", "Unix time of the group's last resync",
            GROUP_LABELS, registry=self.registry,
        )  # fmt: skip

    def read_group(self, labels: GroupLabels, last: Readings | None, now: Readings, rebalances: int) -> None:
        """One ConsumerGroup's resync: its series set (only those that changed are touched beyond the time)."""
        if last is None or last.state is not now.state:
            if last is not None:
                _remove(self.group_state, *labels, last.state.value)
            self.group_state.labels(*labels, now.state.value).set(1)
        self.group_members.labels(*labels).set(now.members)
        self.group_without_sidecar.labels(*labels).set(now.without_sidecar)
        if now.lag is not None:
            self.group_lag.labels(*labels).set(now.lag)
        elif last is not None and last.lag is not None:
            _remove(self.group_lag, *labels)
        self.group_rebalances.labels(*labels).inc(rebalances)
        self.group_resynced.labels(*labels).set(now.resynced_at)

    def forget_group(self, labels: GroupLabels, last: Readings | None) -> None:
        """The ConsumerGroup is gone from this replica (deleted, or its loop stopped): its series go."""
        if last is not None:
            _remove(self.group_state, *labels, last.state.value)
        for metric in (
            self.group_members,
            self.group_without_sidecar,
            self.group_lag,
            self.group_rebalances,
            self.group_resynced,
        ):
            _remove(metric, *labels)

    def move_state(self, before: GroupState | None, after: GroupState | None) -> None:
        """One ConsumerGroup's state changed (None: not resynced here): O(1) per resync, whatever the group count."""
        if before is after:
            return
        if before is not None:
            self.group_states.labels(before.value).dec()
        if after is not None:
            self.group_states.labels(after.value).inc()

    def serve(self, bind: str, port: int) -> WSGIServer:
        """`/metrics` in a thread of its own (the text exposition; scraped by Prometheus or the chart's
        ServiceMonitor)."""
        server, _ = start_http_server(port, bind, registry=self.registry)
        return server


def _remove(metric: Gauge | Counter, *labels: str) -> None:
    with contextlib.suppress(KeyError):  # never set (e.g. no lag known)
        metric.remove(*labels)
