"""Prometheus metrics of the operator (`/metrics` on `--metrics-port`). Labels are bounded vocabularies (causes,
outcomes), never a group, member or pod name: one operator watches thousands of groups."""

from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, start_http_server


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
        self.rollout_restarts = Counter(
            "vigil_operator_rollout_pod_restarts", "Pods deleted by coordinated rollouts, by how the member was kept",
            ["bridge"], registry=self.registry,
        )  # fmt: skip
        self.deliberate_rebalances = Counter(
            "vigil_operator_deliberate_rebalances", "Rebalances started after a rollout changed subscriptions",
            ["rejoined"], registry=self.registry,
        )  # fmt: skip

    def serve(self, bind: str, port: int) -> WSGIServer:
        """`/metrics` in a thread of its own (the text exposition; scraped by Prometheus or the chart's
        ServiceMonitor)."""
        server, _ = start_http_server(port, bind, registry=self.registry)
        return server
