"""Prometheus metrics of one sidecar. Never a member id as a label (unbounded cardinality, and it changes)."""

from prometheus_client import CollectorRegistry, Counter, Gauge


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.poll_age = Gauge(
            "vigil_sidecar_poll_age_seconds", "Seconds since the app's last poll beacon", registry=self.registry
        )
        self.beacons = Counter("vigil_sidecar_beacons", "Beacons received", ["transport"], registry=self.registry)
        self.bad_beacons = Counter("vigil_sidecar_bad_beacons", "Beacons rejected as malformed", registry=self.registry)
        self.requests = Counter(
            "vigil_sidecar_broker_requests", "Requests sent to Kafka", ["api", "outcome"], registry=self.registry
        )
        self.actions = Counter(
            "vigil_sidecar_actions", "Stall actions taken, by action and Kafka's answer", ["action", "outcome"],
            registry=self.registry,
        )  # fmt: skip
        self.alerts = Counter("vigil_sidecar_alerts", "Alerts raised, by kind", ["kind"], registry=self.registry)
        self.app_probe_failing = Gauge(
            "vigil_sidecar_app_probe_failing",
            "1 while /v1/probe/app fails (a restart was decided)",
            registry=self.registry,
        )
