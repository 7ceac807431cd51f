"""Prometheus metrics of the operator (`/metrics` on `--metrics-port`). Labels are bounded vocabularies (causes,
outcomes), never a group, member or pod name: one operator watches thousands of groups."""

from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from vigil_core.kafka.model import GroupState


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

        self.group_states = Gauge(
            "vigil_operator_group_state",
            "ConsumerGroups this replica resyncs, by the Kafka group state their last resync saw (KIP-848 Assigning and"
            " Reconciling named by ConsumerGroupDescribe; Unknown: not described)", ["state"], registry=self.registry,
        )  # fmt: skip
        for state in GroupState:  # every state at 0, so a dashboard sees a state empty out rather than vanish
            self.group_states.labels(state.value).set(0)

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
