"""Which pods belong to a ConsumerGroup, and the identity each one's member can be proven by (pure)."""

import re
from collections.abc import Mapping
from typing import Any

from vigil_operator.domain.injection import SIDECAR_NAME
from vigil_operator.domain.reconcile import PodFacts

_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def pod_facts(pod: Mapping[str, Any]) -> PodFacts:
    """The pod's name and the instance id its sidecar was given (static groups), `$(VAR)`s resolved from the
    pod's own name and namespace; an instance id from a Secret or ConfigMap stays unknown (the client.id
    basis still matches the member)."""
    meta = pod.get("metadata") or {}
    name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
    known = {"VIGIL_POD_NAME": name, "VIGIL_NAMESPACE": namespace}
    spec = pod.get("spec") or {}
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        if container.get("name") != SIDECAR_NAME:
            continue
        for var in container.get("env") or []:
            if var.get("name") == "VIGIL_INSTANCE_ID" and "value" in var:
                value = _REF.sub(lambda m: known.get(m.group(1), m.group(0)), str(var["value"]))
                return PodFacts(name, None if "$(" in value else value)
    return PodFacts(name)
