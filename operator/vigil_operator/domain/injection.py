"""What the mutating webhook does to a pod: add the vigil sidecar and wire the app to it.

Pure: the admitted pod, its ConsumerGroup spec and the operator's settings in, a `Decision` out. The kopf adapter
turns `Decision.changes` (whole top-level values to replace) into a JSON patch and `warnings` into admission
warnings. Same input → same output; the input is never mutated.

Why the layout is what it is:
- every pod-dependent value comes from the downward API (`fieldRef`), never from the admission request: a
  Deployment's pod has only `generateName` when it is admitted;
- the sidecar binds the pod IP for both listeners: the containers of a pod share that address, and the kubelet
  probes it (a beacon on loopback only would be tighter: other pods can reach the pod IP);
- the sidecar has no readinessProbe: a native sidecar's readiness gates Pod Ready, and a Kafka outage must not
  pull the app out of its Service;
- an app container's existing env entries and probes are never changed: only missing names are appended;
- the operator's image pull secrets (for the sidecar image) are appended to the pod's `imagePullSecrets` only where
  it does not name them: its own stay first and unchanged;
- a group whose timings the sidecar would refuse at start (`config.load` exits 2) is not injected: the sidecar
  would only crash-loop, and with action restart take the app down with it (do no harm) — a warning says why.
"""

import copy
import dataclasses
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from vigil_core import rules
from vigil_core.budget.ledger import lease_name
from vigil_core.kafka.security import ENV_PREFIX as KAFKA_PREFIX
from vigil_core.kafka.security import Protocol
from vigil_core.liveness import Signal, StallAction
from vigil_core.sidecar_contract import (
    APP_PROBE_PATH,
    BEACON_ADDR_ENV,
    BEACON_PATH,
    BEACON_URL_ENV,
    DEFAULT_BEACON_PORT,
    DEFAULT_HEALTH_PORT,
    ENV_PREFIX,
    LIVEZ_PATH,
    NO_BROKER_LIMITS,
    POD_IP_ENV,
    env_var,
)
from vigil_core.version import VERSION
from vigil_operator.domain import tenancy
from vigil_operator.domain.spec import ConsumerGroupSpec, Kafka, Membership, SecretKeyRef, SidecarMode
from vigil_operator.domain.tenancy import Tenancy

INJECT_LABEL: Final = "vigil.dev/inject"
GROUP_ANNOTATION: Final = "vigil.dev/consumer-group"
INJECTED_ANNOTATION: Final = "vigil.dev/injected"
SIDECAR_NAME: Final = "vigil-sidecar"
SYSTEM_NAMESPACES: Final = frozenset({"kube-system"})

INSTANCE_ID_ENV: Final = "KAFKA_GROUP_INSTANCE_ID"
CLIENT_ID_ENV: Final = "KAFKA_CLIENT_ID"
POD_NAME_ENV: Final = env_var("pod_name")
NAMESPACE_ENV: Final = env_var("namespace")

APP_PROBE_PERIOD: Final = 10
SECRET_VOLUME_PREFIX: Final = "vigil-kafka-"  # noqa: S105 - a volume name, not a secret

Obj = dict[str, Any]


SIDECAR_SECURITY_CONTEXT: Final = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""The Pod Security `restricted` standard, and a read-only root: the sidecar writes no file. The image's user
(65532) satisfies runAsNonRoot; no runAsUser is set, so a group's own image with another non-root user works."""


def _default_resources() -> dict[str, dict[str, int | str]]:
    return {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}


@dataclass(frozen=True, kw_only=True)
class InjectionConfig:
    """The operator's injection settings (from its deployment)."""

    operator_namespace: str
    sidecar_image: str = f"vigil-sidecar:{VERSION}"
    image_pull_secrets: tuple[str, ...] = ()
    """Secrets (in the pod's namespace) the kubelet pulls the sidecar image with: added to the pod's
    `imagePullSecrets` when it does not name them already."""
    sidecar_resources: Mapping[str, Mapping[str, int | str]] = field(default_factory=_default_resources)
    beacon_port: int = DEFAULT_BEACON_PORT
    health_port: int = DEFAULT_HEALTH_PORT
    events_topic: str = "vigil.events"
    secret_mount_root: str = "/etc/vigil/kafka"  # noqa: S105 - a path
    sidecar_restart_seconds: float = 30.0
    """How long the sidecar itself may take to restart: the app's injected livenessProbe outlasts it."""
    reject_unknown_group: bool = False
    allowed_sidecar_images: tuple[str, ...] = ()
    """Patterns of further images `spec.sidecar.image` may name (domain.tenancy)."""
    allowed_secrets: tuple[str, ...] = ()
    """Patterns of the Secret names a ConsumerGroup may reference; none: any of its namespace."""
    allowed_bootstrap_servers: tuple[str, ...] = ()
    """Patterns of the brokers a ConsumerGroup may name; none: any."""

    def tenancy(self) -> Tenancy:
        return Tenancy(
            self.sidecar_image, self.allowed_sidecar_images, self.allowed_secrets, self.allowed_bootstrap_servers
        )

    def __post_init__(self) -> None:
        for port in (self.beacon_port, self.health_port):
            if not 1 <= port <= 65535:
                raise ValueError(f"injection: port {port} is not in 1..65535")
        if self.beacon_port == self.health_port:
            raise ValueError("injection: the beacon and health ports must differ (one address)")
        if self.sidecar_restart_seconds < 0:
            raise ValueError("injection: sidecar_restart_seconds must be 0 or more")


@dataclass(frozen=True)
class Decision:
    """The webhook's answer. `changes` holds whole top-level values to replace (lists replaced whole), only the
    ones that changed: `{"metadata": {"annotations": …}, "spec": {"containers"|"initContainers"|"volumes"|
    "imagePullSecrets": …}}`."""

    allowed: bool = True
    message: str = ""
    """Why the pod is refused (only when not allowed)."""
    changes: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    """One line each; returned to kubectl as admission warnings."""
    injected: bool = False


# -- native sidecar support ------------------------------------------------------------------------------------

_KUBELET_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+][0-9A-Za-z.+-]*)?")
NATIVE_SIDECAR_MIN: Final = (1, 29)
"""Init containers with `restartPolicy: Always` (beta, on by default) from 1.29; older kubelets never finish them."""


def native_sidecars_supported(kubelet_versions: Sequence[str]) -> bool:
    """True iff there is a node and every kubelet is ≥ 1.29; an unparseable version counts as too old."""
    if not kubelet_versions:
        return False
    for version in kubelet_versions:
        match = _KUBELET_VERSION.fullmatch(version.strip())
        if match is None or (int(match.group(1)), int(match.group(2))) < NATIVE_SIDECAR_MIN:
            return False
    return True


# -- the decision ----------------------------------------------------------------------------------------------


def inject(
    pod: Mapping[str, Any],
    namespace: str,
    group: ConsumerGroupSpec | None,
    group_name: str | None,
    cfg: InjectionConfig,
    *,
    native_supported: bool,
) -> Decision:
    """Decide what to do with a pod at admission (CREATE); see the module docstring for the rules' reasons."""
    if (skip := _not_candidate(pod, namespace, cfg)) is not None:
        return skip
    wanted = str(pod["metadata"]["annotations"][GROUP_ANNOTATION])
    if group is None:
        return _unknown_group(wanted, namespace, cfg)
    name = group_name or wanted
    if (problem := sidecar_refusal(group)) is not None:
        return Decision(warnings=[_line(f"vigil: not injected: ConsumerGroup {name}: {problem}")])
    if refused := tenancy.refusals(group, cfg.tenancy()):
        return Decision(warnings=[_line(f"vigil: not injected: ConsumerGroup {name}: {refused[0]}")])
    return _inject(pod, group, name, cfg, native_supported)


def _not_candidate(pod: Mapping[str, Any], namespace: str, cfg: InjectionConfig) -> Decision | None:
    """The answer for a pod that is not to be injected, or None for a candidate (opted in, not yet injected)."""
    meta = pod.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    if namespace in SYSTEM_NAMESPACES or namespace == cfg.operator_namespace:
        return Decision()
    if labels.get(INJECT_LABEL) != "true" or not annotations.get(GROUP_ANNOTATION):
        return Decision()
    if already_injected(pod):
        return Decision()
    if (pod.get("spec") or {}).get("hostNetwork"):
        return Decision(warnings=["vigil: hostNetwork pod not injected (the sidecar binds the pod IP, here shared)"])
    return None


def already_injected(pod: Mapping[str, Any]) -> bool:
    """A sidecar in containers or initContainers, or the stamp: reinvocation and re-applied pods change nothing."""
    return has_sidecar(pod) or INJECTED_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


def has_sidecar(pod: Mapping[str, Any]) -> bool:
    """The sidecar is among the pod's containers or initContainers (a native sidecar)."""
    spec = pod.get("spec") or {}
    return SIDECAR_NAME in {
        c.get("name") for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    }


WARNING_MAX: Final = 250
"""The apiserver may truncate warnings above 256 characters; ours are cut deterministically first."""


def _line(text: str) -> str:
    """One warning line, at most WARNING_MAX characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= WARNING_MAX else flat[: WARNING_MAX - 1] + "…"


def failed(policy: str, error: str) -> Decision:
    """The answer when deciding raised, as the webhook's failurePolicy says for an operator that cannot answer: Ignore
    admits the pod unchanged with a warning (an exception would otherwise be kopf's `allowed: false`, a deny the
    policy never asked for; the SidecarMissing condition then reports the pod), Fail refuses it so that its
    controller retries once the webhook works."""
    if policy == "Fail":
        return Decision(allowed=False, message=_line(f"vigil: sidecar injection failed ({error}); failurePolicy Fail"))
    return Decision(
        warnings=[_line(f"vigil: sidecar not injected: the webhook failed ({error}); failurePolicy Ignore")]
    )


def _unknown_group(wanted: str, namespace: str, cfg: InjectionConfig) -> Decision:
    message = f"vigil: ConsumerGroup {wanted!r} ({GROUP_ANNOTATION}) not found in namespace {namespace}"
    if cfg.reject_unknown_group:
        return Decision(allowed=False, message=message)
    return Decision(warnings=[f"{message}; pod not injected"])


def sidecar_refusal(group: ConsumerGroupSpec) -> str | None:
    """Why the sidecar would refuse to start with this group's timings (`vigil_sidecar.config.load` exits 2), or
    None. Injecting it anyway would only crash-loop it (and, with action restart, the app with it)."""
    timings = group.timings()
    if timings.protocol is rules.GroupProtocol.CONSUMER:
        timings = dataclasses.replace(timings, session_timeout_ms=None)  # the sidecar ignores it there
    errors = [f for f in rules.check_timings(timings, NO_BROKER_LIMITS) if f.severity is rules.Severity.ERROR]
    return errors[0].message if errors else None


def _inject(
    pod: Mapping[str, Any], group: ConsumerGroupSpec, name: str, cfg: InjectionConfig, native_supported: bool
) -> Decision:
    work = copy.deepcopy(dict(pod))
    spec, meta = work.setdefault("spec", {}), work.setdefault("metadata", {})
    warnings: list[str] = []
    apps: list[Obj] = list(spec.get("containers") or [])
    for app in apps:
        _append_env(app, _app_env(cfg))
    consumer = _consumer_index(apps, group)
    instance_env = _wire_instance_id(apps, consumer, group, warnings)
    action = _wire_restart(apps, consumer, group, cfg, warnings)
    warnings += _port_warnings(apps, cfg) + _budget_warnings(spec, group, name)
    native = _use_native(group, native_supported, warnings)
    volumes = _secret_volumes(group.kafka, {v.get("name", "") for v in spec.get("volumes") or []})
    sidecar = sidecar_container(group, cfg, action=action, instance_env=instance_env, volumes=volumes)
    new_spec: Obj = {}
    if native:
        new_spec["initContainers"] = [{**sidecar, "restartPolicy": "Always"}, *(spec.get("initContainers") or [])]
    else:
        apps = [*apps, sidecar]
    if apps != list((pod.get("spec") or {}).get("containers") or []):
        new_spec["containers"] = apps
    if volumes:
        new_spec["volumes"] = [*(spec.get("volumes") or []), *volumes.values()]
    if pull_secrets := _missing_pull_secrets(spec, cfg):
        new_spec["imagePullSecrets"] = [*(spec.get("imagePullSecrets") or []), *pull_secrets]
    annotations = {**(meta.get("annotations") or {}), INJECTED_ANNOTATION: sidecar["image"]}
    changes: Obj = {"metadata": {"annotations": annotations}, "spec": new_spec}
    return Decision(changes=changes, warnings=[_line(w) for w in warnings], injected=True)


def _missing_pull_secrets(spec: Mapping[str, Any], cfg: InjectionConfig) -> list[Obj]:
    """The operator's pull secrets the pod does not name yet, in their order (the pod's own stay first)."""
    have = {ref.get("name") for ref in spec.get("imagePullSecrets") or []}
    return [{"name": name} for name in dict.fromkeys(cfg.image_pull_secrets) if name not in have]


def _use_native(group: ConsumerGroupSpec, native_supported: bool, warnings: list[str]) -> bool:
    mode = group.sidecar.mode
    if mode is SidecarMode.NATIVE and not native_supported:
        warnings.append("vigil: sidecar.mode native, but a node's kubelet is older than 1.29: injected as a container")
    return mode is not SidecarMode.CONTAINER and native_supported


# -- app containers ----------------------------------------------------------------------------------------------


def _var(name: str, value: str) -> Obj:
    return {"name": name, "value": value}


def _field_ref(name: str, path: str) -> Obj:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _app_env(cfg: InjectionConfig) -> list[Obj]:
    """What every app container gets: where to beacon, and its client.id = the pod name (identity basis 3)."""
    addr = f"$({POD_IP_ENV}):{cfg.beacon_port}"
    return [
        _field_ref(POD_IP_ENV, "status.podIP"),
        _var(BEACON_ADDR_ENV, addr),
        _var(BEACON_URL_ENV, f"http://{addr}{BEACON_PATH}"),
        _field_ref(CLIENT_ID_ENV, "metadata.name"),
    ]


def _static_app_env() -> list[Obj]:
    """A static member's instance id, unique across namespaces (a StatefulSet's pod names repeat in each)."""
    return [
        _field_ref(NAMESPACE_ENV, "metadata.namespace"),
        _field_ref(POD_NAME_ENV, "metadata.name"),
        _var(INSTANCE_ID_ENV, f"$({NAMESPACE_ENV})-$({POD_NAME_ENV})"),
    ]


def _append_env(container: Obj, additions: list[Obj]) -> None:
    """Append the entries whose names the container does not set itself; never touch its own entries."""
    env: list[Obj] = list(container.get("env") or [])
    have = {e.get("name") for e in env}
    new = [a for a in additions if a["name"] not in have]
    if new:
        container["env"] = env + new


def _sets(container: Mapping[str, Any], name: str) -> bool:
    return any(e.get("name") == name for e in container.get("env") or [])


def _consumer_index(apps: Sequence[Mapping[str, Any]], group: ConsumerGroupSpec) -> int:
    """The container taken as the group's consumer: for a static group the first that sets its instance id, else
    the first app container (the one that gets the restart probe)."""
    if group.membership is Membership.STATIC:
        for index, app in enumerate(apps):
            if _sets(app, INSTANCE_ID_ENV):
                return index
    return 0


def _wire_instance_id(apps: list[Obj], consumer: int, group: ConsumerGroupSpec, warnings: list[str]) -> list[Obj]:
    """Give a static group's app an instance id (unless one sets it) and return the sidecar's matching entries."""
    if group.membership is not Membership.STATIC or not apps:
        return []
    if _sets(apps[consumer], INSTANCE_ID_ENV):
        return _copy_instance_id(apps[consumer], warnings)
    if len(apps) > 1:
        warnings.append(
            f"vigil: static group with {len(apps)} containers: several consumers per pod are not supported;"
            f" the sidecar watches the instance id of {apps[0].get('name')}"
        )
    for app in apps:
        _append_env(app, _static_app_env())
    return _copy_instance_id(apps[consumer], warnings)  # the app may define VIGIL_NAMESPACE its own way


def references(text: str) -> list[str]:
    """The `$(NAME)`s the kubelet would expand in a value, in order (`$$` escapes a `$`)."""
    names: list[str] = []
    i = 0
    while i < len(text) - 1:
        if text[i] != "$":
            i += 1
        elif text[i + 1] == "(" and (end := text.find(")", i + 2)) != -1:
            names.append(text[i + 2 : end])
            i = end + 1
        else:
            i += 2
    return names


def _last_before(env: Sequence[Mapping[str, Any]], name: str, position: int) -> int | None:
    """Where the value `$(name)` expands to at `position` is defined (the kubelet: the last earlier entry)."""
    found = None
    for index in range(position):
        if env[index].get("name") == name:
            found = index
    return found


def _copy_instance_id(app: Mapping[str, Any], warnings: list[str]) -> list[Obj]:
    """The app's own instance-id entry as the sidecar's VIGIL_INSTANCE_ID, with the app entries it expands
    (`$(POD_NAME)`), so both resolve to the same string. Entries the sidecar defines itself (the same way) are
    not copied; anything it cannot reproduce is named in a warning."""
    env: list[Mapping[str, Any]] = list(app.get("env") or [])
    position = max(i for i, e in enumerate(env) if e.get("name") == INSTANCE_ID_ENV)
    needed, undefined = _dependencies(env, position)
    # An undefined name stays verbatim (or is a Service link variable) in both containers alike, unless envFrom
    # may define it in the app, or it is one of the sidecar's own names.
    unresolved = [n for n in undefined if app.get("envFrom") or n.startswith(ENV_PREFIX)]
    own = {e["name"]: _normalized(e) for e in _sidecar_downward_env()}
    copies: list[Obj] = []
    for index in sorted(needed):
        entry_name = str(env[index].get("name"))
        if own.get(entry_name) == _normalized(env[index]):
            continue
        if entry_name.startswith(ENV_PREFIX):
            unresolved.append(entry_name)
        else:
            copies.append(copy.deepcopy(dict(env[index])))
    if unresolved:
        warnings.append(
            f"vigil: {INSTANCE_ID_ENV} of {app.get('name')} refers to {', '.join(sorted(set(unresolved)))}, which the"
            " sidecar cannot reproduce: its instance id may differ (set it by value or fieldRef)"
        )
    return [*copies, {**copy.deepcopy(dict(env[position])), "name": env_var("instance_id")}]


def _dependencies(env: Sequence[Mapping[str, Any]], position: int) -> tuple[set[int], list[str]]:
    """The positions of the entries the value at `position` expands, transitively, and the names it refers to that
    no earlier entry defines."""
    needed: set[int] = set()
    undefined: list[str] = []
    pending = [position]
    while pending:
        at = pending.pop()
        entry = env[at]
        for ref in [] if "valueFrom" in entry else references(str(entry.get("value", ""))):
            where = _last_before(env, ref, at)
            if where is None:
                undefined.append(ref)
            elif where not in needed:
                needed.add(where)
                pending.append(where)
    return needed, undefined


def _normalized(entry: Mapping[str, Any]) -> Obj:
    """An env entry without the defaults the apiserver fills in (`fieldRef.apiVersion: v1`), for comparing."""
    out = copy.deepcopy(dict(entry))
    field_ref = (out.get("valueFrom") or {}).get("fieldRef")
    if isinstance(field_ref, dict) and field_ref.get("apiVersion", "v1") == "v1":
        field_ref.pop("apiVersion", None)
    return out


def _wire_restart(
    apps: list[Obj], consumer: int, group: ConsumerGroupSpec, cfg: InjectionConfig, warnings: list[str]
) -> StallAction:
    """`restart` works through the consumer container's livenessProbe pointing at the sidecar. An existing probe is
    the app's own and is kept: then the sidecar can only alert."""
    action = group.liveness.effective_action
    if action is not StallAction.RESTART or not apps:
        return action
    target = apps[consumer]
    if target.get("livenessProbe"):
        warnings.append(
            f"vigil: action restart needs the livenessProbe of {target.get('name')}, which has its own:"
            " kept, the sidecar only alerts"
        )
        return StallAction.ALERT
    target["livenessProbe"] = app_probe(cfg)
    return action


def app_probe(cfg: InjectionConfig) -> Obj:
    """Fails only after the sidecar decided on a restart; tolerates the sidecar's own restart (threshold × period
    > `sidecar_restart_seconds`). A numeric port: a named one the app does not declare is never a failure."""
    threshold = int(cfg.sidecar_restart_seconds // APP_PROBE_PERIOD) + 1
    return {
        "httpGet": {"path": APP_PROBE_PATH, "port": cfg.health_port},
        "periodSeconds": APP_PROBE_PERIOD,
        "timeoutSeconds": 1,
        "failureThreshold": threshold,
    }


def _port_warnings(apps: Sequence[Mapping[str, Any]], cfg: InjectionConfig) -> list[str]:
    """Containers of a pod share its address: an app port equal to the sidecar's makes one of them fail to bind."""
    ours = {cfg.beacon_port, cfg.health_port}
    return [
        f"vigil: container {app.get('name')} declares port {port['containerPort']}, which the sidecar binds"
        for app in apps
        for port in app.get("ports") or []
        if port.get("containerPort") in ours
    ]


def _budget_warnings(spec: Mapping[str, Any], group: ConsumerGroupSpec, name: str) -> list[str]:
    """The eviction budget's Lease is granted to the workload's ServiceAccount; without it the sidecar only alerts."""
    account = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    if account != group.workload.service_account_name:
        return [
            f"vigil: the pod runs as ServiceAccount {account}, ConsumerGroup {name} grants its budget Lease to"
            f" {group.workload.service_account_name}: the sidecar will only alert"
        ]
    if spec.get("automountServiceAccountToken") is False:
        return ["vigil: automountServiceAccountToken is false: the sidecar cannot use its budget Lease, only alert"]
    return []


# -- the sidecar -------------------------------------------------------------------------------------------------


def sidecar_container(
    group: ConsumerGroupSpec,
    cfg: InjectionConfig,
    *,
    action: StallAction | None = None,
    instance_env: Sequence[Obj] = (),
    volumes: Mapping[str, Obj] | None = None,
) -> Obj:
    """The sidecar as a regular container (a native one adds `restartPolicy: Always`). `volumes`: Secret name →
    its volume (`_secret_volumes`), computed from the group when not given."""
    if volumes is None:
        volumes = _secret_volumes(group.kafka, set())
    root = cfg.secret_mount_root.rstrip("/")
    env = [
        *_sidecar_downward_env(),
        *_sidecar_settings_env(group, cfg, action or group.liveness.effective_action),
        *(copy.deepcopy(dict(e)) for e in instance_env),
        *_kafka_env(group.kafka, root),
    ]
    container: Obj = {
        "name": SIDECAR_NAME,
        "image": group.sidecar.image or cfg.sidecar_image,
        "env": env,
        "ports": [
            {"name": "vigil-beacon", "containerPort": cfg.beacon_port, "protocol": "TCP"},
            {"name": "vigil-beacon-u", "containerPort": cfg.beacon_port, "protocol": "UDP"},
            {"name": "vigil-health", "containerPort": cfg.health_port, "protocol": "TCP"},
        ],
        "resources": _resources(group, cfg),
        "livenessProbe": {
            "httpGet": {"path": LIVEZ_PATH, "port": cfg.health_port},
            "periodSeconds": 10,
            "timeoutSeconds": 1,
            "failureThreshold": 3,
        },
        "securityContext": copy.deepcopy(SIDECAR_SECURITY_CONTEXT),
    }
    if volumes:
        container["volumeMounts"] = [
            {"name": v["name"], "mountPath": f"{root}/{secret}", "readOnly": True} for secret, v in volumes.items()
        ]
    return container


def _resources(group: ConsumerGroupSpec, cfg: InjectionConfig) -> Obj:
    """The group's requests/limits when it states any, else the operator's."""
    own = group.sidecar.resources.model_dump(exclude_none=True) if group.sidecar.resources is not None else {}
    return own or {kind: dict(values) for kind, values in cfg.sidecar_resources.items()}


def _sidecar_downward_env() -> list[Obj]:
    return [
        _field_ref(POD_NAME_ENV, "metadata.name"),
        _field_ref(NAMESPACE_ENV, "metadata.namespace"),
        _field_ref(POD_IP_ENV, "status.podIP"),
    ]


def _sidecar_settings_env(group: ConsumerGroupSpec, cfg: InjectionConfig, action: StallAction) -> list[Obj]:
    """`VIGIL_<SidecarSettings field>` for what the group states; unset optional values keep the sidecar's
    defaults (derived from the stall timeout, or the client's own)."""
    live, client = group.liveness, group.client
    values: list[tuple[str, str | None]] = [
        ("group_id", group.group_id),
        ("beacon_bind", f"$({POD_IP_ENV})"),
        ("beacon_port", str(cfg.beacon_port)),
        ("health_bind", f"$({POD_IP_ENV})"),
        ("health_port", str(cfg.health_port)),
        ("signal", live.signal.value),
        ("action", action.value),
        ("stall_timeout_seconds", _number(live.stall_timeout_seconds)),
        ("cooldown_seconds", None if live.cooldown_seconds is None else _number(live.cooldown_seconds)),
        ("max_concurrent_evictions", str(live.max_concurrent_evictions)),
        ("systemic_stall_percent", _number(live.systemic_stall_percent)),
        ("group_protocol", client.group_protocol.value),
        ("session_timeout_seconds", _ms_as_seconds(client.session_timeout_ms)),
        ("heartbeat_interval_seconds", _ms_as_seconds(client.heartbeat_interval_ms)),
        ("max_poll_interval_seconds", _ms_as_seconds(client.max_poll_interval_ms)),
        ("budget_lease", lease_name(group.group_id)),
        ("events_topic", cfg.events_topic),
        ("cluster", group.kafka.cluster_name),
    ]
    bridge = live.bridge
    if bridge_applies(group):
        values += [
            ("bridge_enabled", "true"),
            ("max_bridge_seconds", _number(bridge.max_bridge_seconds)),
            ("on_foreign_rebalance", bridge.on_foreign_rebalance.value),
        ]
    return [_var(env_var(name), value) for name, value in values if value is not None]


def bridge_applies(group: ConsumerGroupSpec) -> bool:
    """Bridging keeps a static member alive while its app restarts, on the helper's proof that it ended: it needs
    static membership and the beacon (the helper); either protocol (the sidecar refuses the rest at start)."""
    return (
        group.liveness.bridge.enabled
        and group.membership is Membership.STATIC
        and group.liveness.signal is Signal.BEACON
    )


def _number(value: float) -> str:
    """A float as the sidecar parses it back exactly, without a trailing `.0` for whole numbers."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _ms_as_seconds(ms: int | None) -> str | None:
    """Exact decimal seconds (no float rounding): 1500 → "1.5"."""
    if ms is None:
        return None
    whole, frac = divmod(ms, 1000)
    return str(whole) if frac == 0 else f"{whole}.{frac:03d}".rstrip("0")


def _secret_files(kafka: Kafka) -> list[tuple[str, SecretKeyRef]]:
    """(`VIGIL_KAFKA_*_FILE` name, the Secret key it holds), in a fixed order."""
    refs: list[tuple[str, SecretKeyRef | None]] = []
    if kafka.sasl is not None:
        refs.append(("SASL_PASSWORD_FILE", kafka.sasl.password_secret_ref))
    if kafka.tls is not None:
        refs += [
            ("SSL_CA_FILE", kafka.tls.ca_secret_ref),
            ("SSL_CERT_FILE", kafka.tls.cert_secret_ref),
            ("SSL_KEY_FILE", kafka.tls.key_secret_ref),
        ]
    return [(f"{KAFKA_PREFIX}{name}", ref) for name, ref in refs if ref is not None]


def _free_names(taken: set[str]) -> Iterator[str]:
    n = 0
    while True:
        if (name := f"{SECRET_VOLUME_PREFIX}{n}") not in taken:
            yield name
        n += 1


def _secret_volumes(kafka: Kafka, taken: set[str]) -> dict[str, Obj]:
    """Secret name → one `secret` volume projecting only the keys used (names skip the pod's own volumes)."""
    keys: dict[str, list[str]] = {}
    for _, ref in _secret_files(kafka):
        keys.setdefault(ref.name, [])
        if ref.key not in keys[ref.name]:
            keys[ref.name].append(ref.key)
    names = _free_names(taken)
    return {
        secret: {
            "name": next(names),
            "secret": {"secretName": secret, "items": [{"key": k, "path": k} for k in sorted(used)]},
        }
        for secret, used in keys.items()
    }


def _kafka_env(kafka: Kafka, root: str) -> list[Obj]:
    """`VIGIL_KAFKA_<KafkaConnection field>`: secrets as files under `root/<secret>/<key>`, the username inline or
    from its Secret."""
    env = [
        _var(f"{KAFKA_PREFIX}BOOTSTRAP_SERVERS", kafka.bootstrap_servers),
        _var(f"{KAFKA_PREFIX}SECURITY_PROTOCOL", kafka.security_protocol.value),
    ]
    if kafka.sasl is not None:
        env.append(_var(f"{KAFKA_PREFIX}SASL_MECHANISM", kafka.sasl.mechanism.value))
        user = kafka.sasl.username_secret_ref
        if kafka.sasl.username is not None:
            env.append(_var(f"{KAFKA_PREFIX}SASL_USERNAME", kafka.sasl.username))
        elif user is not None:
            ref = {"secretKeyRef": {"name": user.name, "key": user.key}}
            env.append({"name": f"{KAFKA_PREFIX}SASL_USERNAME", "valueFrom": ref})
    env += [_var(name, f"{root}/{ref.name}/{ref.key}") for name, ref in _secret_files(kafka)]
    if kafka.security_protocol in (Protocol.SSL, Protocol.SASL_SSL):
        check = kafka.tls.check_hostname if kafka.tls is not None else True
        env.append(_var(f"{KAFKA_PREFIX}SSL_CHECK_HOSTNAME", "true" if check else "false"))
    return env
