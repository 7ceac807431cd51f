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
        self.stats_documents = Counter(
            "vigil_sidecar_stats_documents", "librdkafka statistics documents received (stats signal), by outcome",
            ["outcome"], registry=self.registry,
        )  # fmt: skip
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
        # the app's end (its helper's connection) and the heartbeat bridge
        self.app_holds = Gauge(
            "vigil_sidecar_app_holds", "Open helper connections (each closes when its app process ends)",
            registry=self.registry,
        )  # fmt: skip
        self.app_ends = Counter(
            "vigil_sidecar_app_ends", "App processes seen ending (helper connection closed)", registry=self.registry
        )
        self.bridges_started = Counter(
            "vigil_sidecar_bridges_started", "Heartbeat bridges started, by proof", ["proof"], registry=self.registry
        )
        self.bridges_refused = Counter(
            "vigil_sidecar_bridges_refused",
            "App ends not bridged (KIP-848: not released), by cause",
            ["cause"],
            registry=self.registry,
        )
        self.bridges_ended = Counter(
            "vigil_sidecar_bridges_ended", "Heartbeat bridges ended, by outcome", ["outcome"], registry=self.registry
        )
        self.bridged_seconds = Counter(
            "vigil_sidecar_bridged_seconds", "Seconds spent bridging (added when a bridge ends)", registry=self.registry
        )
        self.bridge_heartbeats = Counter(
            "vigil_sidecar_bridge_heartbeats", "Heartbeats sent on behalf of an ended app", registry=self.registry
        )
        self.bridging = Gauge("vigil_sidecar_bridging", "1 while a bridge runs", registry=self.registry)
