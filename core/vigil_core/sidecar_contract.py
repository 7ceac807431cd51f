"""What the operator and the sidecar agree on without importing each other: the sidecar's environment (`VIGIL_*`,
written by the injection webhook, read by `vigil_sidecar.config` and the app helper), its ports and HTTP paths,
the broker bounds it checks timings against at start, and the member `/v1/status` reports (the operator's
coordinated rollout bridges with it). Pure: no I/O.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from vigil_core import rules

ENV_PREFIX: Final = "VIGIL_"


def env_var(setting: str) -> str:
    """`VIGIL_<SETTING>`: the variable of a sidecar setting (a `SidecarSettings` field: `stall_timeout_seconds`)."""
    return f"{ENV_PREFIX}{setting.upper()}"


POD_IP_ENV: Final = f"{ENV_PREFIX}POD_IP"
"""Not a sidecar setting: the one helper variable other injected values expand (`$(VIGIL_POD_IP)`)."""
BEACON_ADDR_ENV: Final = f"{ENV_PREFIX}BEACON_ADDR"
"""An app container's: `host:port` of its sidecar's beacon listener (the helper beacons there; unset: no sidecar)."""
BEACON_URL_ENV: Final = f"{ENV_PREFIX}BEACON_URL"
"""An app container's: the beacon's HTTP URL, for apps that beacon without the helper."""

DEFAULT_BEACON_PORT: Final = 7390
DEFAULT_HEALTH_PORT: Final = 7391

BEACON_PATH: Final = "/v1/beacon"
"""Beacon listener: the app's poll reports (`POST`; the same JSON as a UDP datagram on the same port number)."""
STATS_PATH: Final = "/v1/stats"
"""Beacon listener: librdkafka's statistics JSON, forwarded by the app (the stats signal)."""
LIVEZ_PATH: Final = "/livez"
"""Health listener: the sidecar's own liveness (its loop)."""
APP_PROBE_PATH: Final = "/v1/probe/app"
"""Health listener: fails only once the sidecar decided to restart the app (the app's livenessProbe)."""
STATUS_PATH: Final = "/v1/status"
"""Health listener: what the watchdog believes, as JSON; the operator reads its `member` (`StatusMember`)."""

#: Broker bounds and KIP-848 group timings that accept anything: at start only the client's own consistency is
#: checked (start never waits for Kafka); the broker's limits and, KIP-848, the group's own timings are read and
#: checked once the group's coordinator has answered (`Sidecar._check_timings`). The operator injects no sidecar
#: whose timings fail this check (it would only crash-loop).
NO_BROKER_LIMITS: Final = rules.BrokerLimits(
    min_session_ms=1,
    max_session_ms=2**31 - 1,
    consumer_min_session_ms=1,
    consumer_max_session_ms=2**31 - 1,
    consumer_min_heartbeat_ms=1,
    consumer_max_heartbeat_ms=2**31 - 1,
    from_defaults=False,
    consumer_session_ms=2**31 - 1,
    consumer_heartbeat_ms=1,
)


@dataclass(frozen=True)
class StatusMember:
    """`member` in `/v1/status`: the member the sidecar proved for its pod, with the generation its app last
    reported (DescribeGroups does not give it). Other keys of `/v1/status` may come and go; these three stay."""

    member_id: str
    instance_id: str | None
    """The member's `group.instance.id`: None for a dynamic member."""
    generation: int | None
    """None unless the app's last beacon named this member."""

    def to_json(self) -> dict[str, Any]:
        return {"member_id": self.member_id, "instance_id": self.instance_id, "generation": self.generation}

    @classmethod
    def from_status(cls, status: Mapping[str, Any]) -> "StatusMember | None":
        """The `member` of a `/v1/status` body; None when there is none, or it is not of this shape."""
        member = status.get("member")
        if not isinstance(member, dict):
            return None
        member_id, instance_id, generation = (member.get(k) for k in ("member_id", "instance_id", "generation"))
        if not isinstance(member_id, str) or not isinstance(instance_id, str | None):
            return None
        if generation is not None and (isinstance(generation, bool) or not isinstance(generation, int)):
            return None
        return cls(member_id, instance_id, generation)
