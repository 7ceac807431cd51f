"""A container's environment as the kubelet resolves it, from the admitted pod: downward-API `fieldRef`s,
ConfigMap and Secret keys, `envFrom` prefixes and `$(VAR)` expansion, in the kubelet's order.

Pure: everything the pod refers to outside itself (its IP, the node, ConfigMaps, Secrets) comes in a `Context`, so
unit tests read exactly what the webhook's injected sidecar and app would start with (the real node then runs
them in e2e). A reference that cannot be resolved raises ConfigError, where a kubelet would hold the container in
`CreateContainerConfigError`.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Context:
    """Everything outside the pod object that its containers' settings may refer to."""

    pod_ip: str
    host_ip: str
    node: str
    base_env: Mapping[str, str] = field(default_factory=dict)  # what the image sets, before the pod's own
    config_maps: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # name → data; absent = not found
    secrets: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # name → decoded data


class ConfigError(Exception):
    """A reference the kubelet could not resolve: the container would wait with CreateContainerConfigError."""


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
    raise ConfigError(f"unsupported env source {sorted(ref)} (resourceFieldRef is not modelled here)")


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
    raise ConfigError(f"unsupported fieldRef {path!r}")


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
