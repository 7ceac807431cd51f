"""The `ConsumerGroup` spec (vigil.dev/v1alpha1) as pydantic models: what the operator and webhook read.

The canonical schema is `crds/consumergroups.vigil.dev.yaml` (structural, with defaults and CEL); these models
mirror it field for field (tests/…/test_crd_schema.py proves sample CRs agree both ways). The apiserver applies
the defaults, so a parsed spec always has them; the models repeat them for CRs read without a server (dry tools,
tests). Names are the CRD's camelCase; Python attributes are snake_case.

A ConsumerGroup *observes* a group its clients created and states the policy vigil enforces for it; nothing here
creates or deletes the Kafka group.
"""

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any, Final

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel

from vigil_core import liveness, names, rules
from vigil_core.kafka import security
from vigil_core.kafka.security import Mechanism, Protocol
from vigil_core.liveness import ForeignRebalance, Signal, StallAction


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True)


class SecretKeyRef(_Spec):
    """One key of a Secret in the ConsumerGroup's namespace."""

    name: Annotated[str, Field(min_length=1)]
    key: Annotated[str, Field(min_length=1)]


class Sasl(_Spec):
    mechanism: Mechanism
    username: Annotated[str, Field(min_length=1)] | None = None
    """The SASL user, given inline …"""
    username_secret_ref: SecretKeyRef | None = None
    """… or from a Secret (exactly one of the two)."""
    password_secret_ref: SecretKeyRef


class Tls(_Spec):
    ca_secret_ref: SecretKeyRef | None = None
    """CA bundle (PEM) to verify the brokers; the system store when absent."""
    cert_secret_ref: SecretKeyRef | None = None
    """Client certificate (PEM) for mutual TLS; with keySecretRef."""
    key_secret_ref: SecretKeyRef | None = None
    check_hostname: bool = True


class Kafka(_Spec):
    bootstrap_servers: Annotated[
        str,
        Field(min_length=1, max_length=4096, json_schema_extra={"pattern": security.BOOTSTRAP_SERVERS_PATTERN}),
        AfterValidator(security.bootstrap_servers),  # the pattern's check, with a message in words
    ]
    """host:port[,host:port…] as the pods reach the brokers."""
    security_protocol: Protocol = Protocol.PLAINTEXT
    sasl: Sasl | None = None
    tls: Tls | None = None
    cluster_name: Annotated[str, Field(min_length=1)] | None = None
    """A human name for the cluster in events and reports; the cluster id identifies it either way."""


class WorkloadKind(StrEnum):
    STATEFUL_SET = "StatefulSet"
    DEPLOYMENT = "Deployment"


class LabelSelector(_Spec):
    match_labels: Annotated[dict[str, str], Field(min_length=1)]
    """At least one label: an empty selector would select every pod of the namespace."""


class Workload(_Spec):
    """The pods that consume for the group: a StatefulSet or Deployment by name, or a label selector."""

    kind: WorkloadKind | None = None
    name: Annotated[str, Field(min_length=1)] | None = None
    selector: LabelSelector | None = None
    service_account_name: Annotated[
        str,
        Field(min_length=1, max_length=253, json_schema_extra={"pattern": names.DNS_SUBDOMAIN}),
        AfterValidator(names.kubernetes_name),  # the pattern's check, with a message in words
    ] = "default"
    """The ServiceAccount the pods run as: bound to the group's budget Lease (a name the apiserver would refuse is
    refused here, not when the operator provisions that binding, long after the spec was accepted)."""


class Membership(StrEnum):
    DYNAMIC = "dynamic"
    STATIC = "static"


class Bridge(_Spec):
    enabled: bool = False
    max_bridge_seconds: Annotated[float, Field(gt=0, le=3600)] = liveness.DEFAULT_MAX_BRIDGE_SECONDS
    on_foreign_rebalance: ForeignRebalance = liveness.DEFAULT_FOREIGN_REBALANCE


class Liveness(_Spec):
    signal: Signal = liveness.DEFAULT_SIGNAL
    stall_timeout_seconds: Annotated[float, Field(ge=1, le=86400)] = liveness.DEFAULT_STALL_TIMEOUT_SECONDS
    action: StallAction | None = None
    """Default: leave-group with the beacon signal, alert with progress (it cannot prove a stall as precisely)."""
    cooldown_seconds: Annotated[float, Field(ge=1, le=86400)] | None = None
    """Default: twice the stall timeout."""
    max_concurrent_evictions: Annotated[int, Field(ge=1, le=1000)] = liveness.DEFAULT_MAX_CONCURRENT_EVICTIONS
    systemic_stall_percent: Annotated[float, Field(gt=0, le=100)] = liveness.DEFAULT_SYSTEMIC_STALL_PERCENT
    node_lost_grace_seconds: Annotated[float, Field(ge=10, le=86400)] = 60.0
    """A member on a node not Ready this long, with no commit over as long and records waiting, is removed."""
    bridge: Bridge = Bridge()

    @property
    def effective_action(self) -> StallAction:
        return liveness.stall_action(self.action, self.signal)

    @property
    def cooldown(self) -> float:
        """The eviction budget's window (the sidecar's `SidecarSettings.cooldown`: the same rule)."""
        return liveness.cooldown(self.cooldown_seconds, self.stall_timeout_seconds)


class Client(_Spec):
    """The timings the app's consumer is configured with (unset: the client's default applies)."""

    group_protocol: rules.GroupProtocol = rules.GroupProtocol.CLASSIC
    session_timeout_ms: Annotated[int, Field(ge=1)] | None = None
    heartbeat_interval_ms: Annotated[int, Field(ge=1)] | None = None
    max_poll_interval_ms: Annotated[int, Field(ge=1)] | None = None


class RestartStrategy(StrEnum):
    COORDINATED = "Coordinated"
    NONE = "None"


class Restart(_Spec):
    strategy: RestartStrategy = RestartStrategy.NONE
    max_restart_seconds: Annotated[float, Field(ge=1, le=3600)] = 300.0


class SidecarMode(StrEnum):
    AUTO = "auto"
    """Native when every node's kubelet is ≥ 1.29, else a plain container."""
    NATIVE = "native"
    CONTAINER = "container"


#: A Kubernetes resource quantity written as a string (the pattern `resource.Quantity` has in the OpenAPI).
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


def _quantity(value: object) -> object:
    """Checked before the union, so a bad value gets one message at its own path (not one per union member)."""
    if isinstance(value, bool) or not isinstance(value, int | str) or not re.fullmatch(QUANTITY_PATTERN, str(value)):
        raise ValueError(f"not a Kubernetes quantity (an integer, or a string like 500m or 64Mi), got {value!r}")
    return value


#: int-or-string, as the schema admits it (`x-kubernetes-int-or-string` with the quantity pattern).
Quantity = Annotated[
    int | str,
    BeforeValidator(_quantity),
    WithJsonSchema({"anyOf": [{"type": "integer"}, {"type": "string", "pattern": QUANTITY_PATTERN}]}),
]


class Resources(_Spec):
    """A container's `resources`: requests and limits by resource name (cpu, memory, …)."""

    requests: dict[str, Quantity] | None = None
    limits: dict[str, Quantity] | None = None


class Sidecar(_Spec):
    mode: SidecarMode = SidecarMode.AUTO
    image: Annotated[str, Field(min_length=1)] | None = None
    """Default: the operator's configured sidecar image."""
    resources: Resources | None = None
    """The sidecar container's requests/limits; default: the operator's."""


class ConsumerGroupSpec(_Spec):
    group_id: Annotated[str, Field(min_length=1, max_length=249)]
    kafka: Kafka
    workload: Workload
    membership: Membership = Membership.DYNAMIC
    liveness: Liveness = Liveness()
    client: Client = Client()
    restart: Restart = Restart()
    sidecar: Sidecar = Sidecar()

    @model_validator(mode="after")
    def _possible(self) -> "ConsumerGroupSpec":
        """The impossible combinations the CRD's CEL rules also reject (the same words)."""
        for problem in impossible(self):
            raise ValueError(problem)
        return self

    def timings(self) -> rules.ClientTimings:
        """The client timings the rules check (their findings name settings; TIMING_FIELDS maps them to the spec)."""
        return rules.ClientTimings(
            protocol=self.client.group_protocol,
            session_timeout_ms=self.client.session_timeout_ms,
            heartbeat_interval_ms=self.client.heartbeat_interval_ms,
            max_poll_interval_ms=self.client.max_poll_interval_ms,
            stall_timeout_ms=round(self.liveness.stall_timeout_seconds * 1000),
        )


#: The spec's field for each setting a timing finding names (`rules.check_timings`).
TIMING_FIELDS: Final[Mapping[str, str]] = {
    rules.SESSION: "spec.client.sessionTimeoutMs",
    rules.HEARTBEAT: "spec.client.heartbeatIntervalMs",
    rules.MAX_POLL: "spec.client.maxPollIntervalMs",
    rules.STALL_TIMEOUT: "spec.liveness.stallTimeoutSeconds",
}


def impossible(spec: ConsumerGroupSpec) -> list[str]:
    """Why the spec cannot describe a running group (the CEL rules' messages); advice is not here."""
    problems = []
    w, c, k = spec.workload, spec.client, spec.kafka
    if (w.selector is None) == (w.kind is None or w.name is None) or (w.kind is None) != (w.name is None):
        problems.append("spec.workload: give kind and name, or a selector (not both)")
    if spec.membership is Membership.STATIC and w.kind is not WorkloadKind.STATEFUL_SET:
        problems.append("spec.membership: static needs workload.kind StatefulSet (pod names must be stable)")
    if spec.restart.strategy is RestartStrategy.COORDINATED and spec.membership is not Membership.STATIC:
        problems.append(
            "spec.restart.strategy: Coordinated needs membership static (a restarted pod keeps its member only by"
            " its group.instance.id)"
        )
    session, heartbeat = c.session_timeout_ms, c.heartbeat_interval_ms
    if session is not None and heartbeat is not None and heartbeat >= session:
        problems.append("spec.client: heartbeatIntervalMs must be below sessionTimeoutMs")
    sasl_protocol = k.security_protocol in (Protocol.SASL_PLAINTEXT, Protocol.SASL_SSL)
    if sasl_protocol != (k.sasl is not None):
        problems.append("spec.kafka.sasl: required exactly when securityProtocol is SASL_PLAINTEXT or SASL_SSL")
    if k.sasl is not None and (k.sasl.username is None) == (k.sasl.username_secret_ref is None):
        problems.append("spec.kafka.sasl: give username or usernameSecretRef (one of them)")
    if k.tls is not None:
        if (k.tls.cert_secret_ref is None) != (k.tls.key_secret_ref is None):
            problems.append("spec.kafka.tls: certSecretRef and keySecretRef go together (mutual TLS)")
        if k.security_protocol not in (Protocol.SSL, Protocol.SASL_SSL):
            problems.append("spec.kafka.tls: only with securityProtocol SSL or SASL_SSL")
    return problems


class SpecError(ValueError):
    """A CR the models refuse: one line naming the field and what is expected."""


def parse_spec(spec: dict[str, Any]) -> ConsumerGroupSpec:
    try:
        return ConsumerGroupSpec.model_validate(spec)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(["spec", *(str(p) for p in first["loc"])]) if first["loc"] else ""
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "missing":
            message = "required, not set"
        elif first["type"] == "extra_forbidden":
            message = "not a field of ConsumerGroup v1alpha1"
        elif "input" in first and first["type"] not in ("value_error",):
            message = f"{message}, got {first['input']!r}"
        return _raise(where, message)


def _raise(where: str, message: str) -> ConsumerGroupSpec:
    raise SpecError(f"{where}: {message}" if where else message)
