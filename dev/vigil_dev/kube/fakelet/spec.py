"""The admitted pod (as the apiserver returns it) → what the fakelet runs: command lines, environment, probes.

Pure: everything the pod refers to outside itself (its IP, the node, ConfigMaps, Secrets) comes in a
`Context`, so webhook-injected containers and env vars, and downward-API values, are resolved here and
unit-tested. Kubernetes' rules are followed where the fakelet supports a field: `$(VAR)` expansion, env
order, `envFrom` prefixes, the command/args/ENTRYPOINT/CMD rule, named probe ports. What it does not
support makes the container wait with `CreateContainerConfigError`, as a kubelet does for a bad reference.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from vigil_dev.kube.fakelet import images

Obj = Mapping[str, Any]


class Kind(StrEnum):
    INIT = "init"  # an init container: runs to completion before the next one
    SIDECAR = "sidecar"  # an init container with restartPolicy Always: starts first, stops last
    APP = "app"


@dataclass(frozen=True)
class HttpGet:
    host: str
    port: int | None  # None: a named port the container does not declare → the probe result is Unknown
    path: str = "/"
    scheme: str = "HTTP"
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class TcpSocket:
    host: str
    port: int | None


@dataclass(frozen=True)
class Exec:
    command: tuple[str, ...]


@dataclass(frozen=True)
class Unsupported:
    """grpc probes: not run; the fakelet counts them as successful (logged)."""

    what: str


@dataclass(frozen=True)
class Probe:
    action: HttpGet | TcpSocket | Exec | Unsupported
    initial_delay: float = 0.0
    period: float = 10.0
    timeout: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3
    grace: float | None = None  # the probe's own terminationGracePeriodSeconds (liveness/startup kills)


@dataclass(frozen=True)
class Container:
    name: str
    kind: Kind
    image: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    working_dir: str | None = None
    problem: tuple[str, str] | None = None  # (waiting reason, message): the container cannot start
    liveness: Probe | None = None
    readiness: Probe | None = None
    startup: Probe | None = None


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    uid: str
    restart_policy: str  # Always | OnFailure | Never
    grace: float  # terminationGracePeriodSeconds
    init: tuple[Container, ...]  # initContainers in order (plain init containers and native sidecars)
    apps: tuple[Container, ...]
    readiness_gates: tuple[str, ...] = ()

    @property
    def containers(self) -> tuple[Container, ...]:
        return (*self.init, *self.apps)

    def container(self, name: str) -> Container:
        return next(c for c in self.containers if c.name == name)


@dataclass(frozen=True)
class Context:
    """Everything outside the pod object that its containers' settings may refer to."""

    pod_ip: str
    host_ip: str
    node: str
    python: str  # the interpreter that runs `python` commands (images.localize)
    base_env: Mapping[str, str] = field(default_factory=dict)  # PATH, HOME, VIGIL_POD_IP, ...: before the pod's
    config_maps: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # name → data; absent = not found
    secrets: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # name → decoded data


class ConfigError(Exception):
    """A reference the fakelet cannot resolve: the container waits with CreateContainerConfigError."""


def parse_pod(obj: Obj, ctx: Context) -> Pod:
    meta, spec = obj["metadata"], obj["spec"]
    init = tuple(
        _container(c, Kind.SIDECAR if c.get("restartPolicy") == "Always" else Kind.INIT, obj, ctx)
        for c in spec.get("initContainers") or []
    )
    return Pod(
        namespace=meta["namespace"],
        name=meta["name"],
        uid=meta["uid"],
        restart_policy=spec.get("restartPolicy", "Always"),
        grace=float(spec.get("terminationGracePeriodSeconds", 30)),
        init=init,
        apps=tuple(_container(c, Kind.APP, obj, ctx) for c in spec.get("containers") or []),
        readiness_gates=tuple(g["conditionType"] for g in spec.get("readinessGates") or []),
    )


def referenced(obj: Obj) -> tuple[set[str], set[str]]:
    """Names of the ConfigMaps and Secrets the pod's env and envFrom read (for the caller to fetch)."""
    config_maps: set[str] = set()
    secrets: set[str] = set()
    spec = obj["spec"]
    for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for source in c.get("envFrom") or []:
            if "configMapRef" in source:
                config_maps.add(source["configMapRef"]["name"])
            if "secretRef" in source:
                secrets.add(source["secretRef"]["name"])
        for var in c.get("env") or []:
            ref = var.get("valueFrom") or {}
            if "configMapKeyRef" in ref:
                config_maps.add(ref["configMapKeyRef"]["name"])
            if "secretKeyRef" in ref:
                secrets.add(ref["secretKeyRef"]["name"])
    return config_maps, secrets


def _container(c: Obj, kind: Kind, pod: Obj, ctx: Context) -> Container:
    name, image_ref = c["name"], c.get("image", "")
    problem: tuple[str, str] | None = None
    env: dict[str, str] = {}
    argv: list[str] = []
    try:
        env = resolve_env(c, pod, ctx)
    except ConfigError as exc:
        problem = ("CreateContainerConfigError", str(exc))
    image = images.lookup(image_ref)
    if image is None:
        problem = problem or ("ErrImagePull", f"fakelet: no local command for image {image_ref!r} (see images.TABLE)")
    else:
        line = images.command_line(image, c.get("command") or [], c.get("args") or [])
        argv = images.localize([expand(part, env) for part in line], ctx.python)
        if not argv:
            problem = problem or ("CreateContainerConfigError", f"fakelet: image {image_ref!r} has no command")
    ports = {p["name"]: int(p["containerPort"]) for p in c.get("ports") or [] if p.get("name")}
    return Container(
        name=name,
        kind=kind,
        image=image_ref,
        argv=tuple(argv),
        env=tuple(env.items()),
        working_dir=c.get("workingDir"),
        problem=problem,
        liveness=_probe(c.get("livenessProbe"), ports, ctx),
        readiness=_probe(c.get("readinessProbe"), ports, ctx),
        startup=_probe(c.get("startupProbe"), ports, ctx),
    )


def _probe(p: Obj | None, ports: Mapping[str, int], ctx: Context) -> Probe | None:
    if not p:
        return None
    action: HttpGet | TcpSocket | Exec | Unsupported
    if "httpGet" in p:
        h = p["httpGet"]
        headers = tuple((x["name"], x["value"]) for x in h.get("httpHeaders") or [])
        action = HttpGet(
            h.get("host") or ctx.pod_ip,
            _port(h.get("port"), ports),
            h.get("path", "/"),
            h.get("scheme", "HTTP"),
            headers,
        )
    elif "tcpSocket" in p:
        action = TcpSocket(p["tcpSocket"].get("host") or ctx.pod_ip, _port(p["tcpSocket"].get("port"), ports))
    elif "exec" in p:
        action = Exec(tuple(images.localize(p["exec"].get("command") or [], ctx.python)))
    else:
        action = Unsupported(next(iter(k for k in p if k in ("grpc",)), "unknown handler"))
    grace = p.get("terminationGracePeriodSeconds")
    return Probe(
        action=action,
        initial_delay=float(p.get("initialDelaySeconds", 0)),
        period=float(p.get("periodSeconds", 10)),
        timeout=float(p.get("timeoutSeconds", 1)),
        success_threshold=int(p.get("successThreshold", 1)),
        failure_threshold=int(p.get("failureThreshold", 3)),
        grace=float(grace) if grace is not None else None,
    )


def _port(value: int | str | None, ports: Mapping[str, int]) -> int | None:
    """An int-or-string port: a number (also as a string, as the kubelet accepts) or a declared port name."""
    if isinstance(value, int):
        return value
    if value is None:
        return None
    return int(value) if value.isdigit() else ports.get(value)


# -- environment ----------------------------------------------------------------------------------------

_FIELD_WITH_KEY = re.compile(r"metadata\.(labels|annotations)\['(.+)'\]")
_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")


def resolve_env(c: Obj, pod: Obj, ctx: Context) -> dict[str, str]:
    """The container's environment in the kubelet's order: base, envFrom, then env (each value may expand
    `$(NAME)` of the variables defined before it). Raises ConfigError for what cannot be resolved."""
    env = dict(ctx.base_env)
    for source in c.get("envFrom") or []:
        prefix = source.get("prefix", "")
        ref, data = _source_data(source, ctx)
        if data is None:
            if ref.get("optional"):
                continue
            kind = "configmap" if "configMapRef" in source else "secret"
            raise ConfigError(f'{kind} "{ref["name"]}" not found')
        for key, value in data.items():
            if _ENV_NAME.fullmatch(prefix + key):
                env[prefix + key] = value
    for var in c.get("env") or []:
        name = var["name"]
        if "valueFrom" in var:
            resolved = _value_from(var["valueFrom"], pod, ctx)
            if resolved is None:  # an optional reference that is absent: the variable is not set
                continue
            env[name] = resolved
        else:
            env[name] = expand(var.get("value", ""), env)
    return env


def _source_data(source: Obj, ctx: Context) -> tuple[Obj, Mapping[str, str] | None]:
    if "configMapRef" in source:
        ref = source["configMapRef"]
        return ref, ctx.config_maps.get(ref["name"])
    ref = source["secretRef"]
    return ref, ctx.secrets.get(ref["name"])


def _value_from(ref: Obj, pod: Obj, ctx: Context) -> str | None:
    if "fieldRef" in ref:
        return field_value(ref["fieldRef"]["fieldPath"], pod, ctx)
    for key, store, kind in (
        ("configMapKeyRef", ctx.config_maps, "configmap"),
        ("secretKeyRef", ctx.secrets, "secret"),
    ):
        if key in ref:
            sel = ref[key]
            data = store.get(sel["name"])
            if data is not None and sel["key"] in data:
                return data[sel["key"]]
            if sel.get("optional"):
                return None
            if data is None:
                raise ConfigError(f'{kind} "{sel["name"]}" not found')
            raise ConfigError(
                f"couldn't find key {sel['key']} in {kind.capitalize()} {pod['metadata']['namespace']}/{sel['name']}"
            )
    raise ConfigError(f"fakelet: unsupported env source {sorted(ref)} (resourceFieldRef is not supported)")


def field_value(path: str, pod: Obj, ctx: Context) -> str:
    """The downward API's `fieldRef` values the kubelet resolves."""
    meta, spec = pod["metadata"], pod["spec"]
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName") or ctx.node,
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": ctx.pod_ip,
        "status.podIPs": ctx.pod_ip,
        "status.hostIP": ctx.host_ip,
        "status.hostIPs": ctx.host_ip,
    }
    if path in simple:
        return str(simple[path])
    if match := _FIELD_WITH_KEY.fullmatch(path):
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    raise ConfigError(f"fakelet: unsupported fieldRef {path!r}")


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion: known names are replaced, unknown ones kept verbatim, `$$` is `$`."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] != "$" or i + 1 == len(text):
            out.append(text[i])
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(" and (end := text.find(")", i + 2)) != -1:
            name = text[i + 2 : end]
            out.append(env[name] if name in env else text[i : end + 1])
            i = end + 1
        else:
            out.append(text[i : i + 2])
            i += 2
    return "".join(out)
