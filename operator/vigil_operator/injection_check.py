"""`vigil check-injection`: prove that the injection webhook answers the apiserver, as `helm test` runs it.

A server-side dry-run creates a pod labelled for injection in a namespace the webhook serves: nothing is stored or
scheduled, but the apiserver calls every admission webhook as for a real pod. vigil's webhook either injects the
sidecar (the named ConsumerGroup exists) or answers with a `vigil:` warning (it does not): both prove the whole path
— Service, TLS, caBundle, namespaceSelector, the apiserver reaching the operator. A pod admitted unchanged with no
such warning means the webhook was not called, or failed under `failurePolicy: Ignore`.
"""

import argparse
import asyncio
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from vigil_operator.domain.injection import GROUP_ANNOTATION, INJECT_LABEL, SIDECAR_NAME, SIDECAR_SECURITY_CONTEXT

PROBE_GROUP = "vigil-injection-check"
"""The ConsumerGroup the probe pod names when none is given: usually absent, so the webhook's answer is its
"not found" warning."""


def probe_pod(group: str) -> dict[str, Any]:
    """A one-container pod opted in for injection; restricted, so a namespace enforcing Pod Security admits it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "vigil-injection-check-",
            "labels": {INJECT_LABEL: "true"},
            "annotations": {GROUP_ANNOTATION: group},
        },
        "spec": {
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "app",
                    "image": "vigil-injection-check:dry-run",
                    "securityContext": dict(SIDECAR_SECURITY_CONTEXT),
                }
            ],
        },
    }


def verdict(admitted: Mapping[str, Any], warnings: Sequence[str]) -> tuple[bool, str]:
    """(the webhook answered, one line saying how) from the dry-run's admitted pod and the apiserver's warnings."""
    spec = admitted.get("spec") or {}
    names = {c.get("name") for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]}
    if SIDECAR_NAME in names:
        return True, "the injection webhook answered: the sidecar was injected"
    ours = [w for w in warnings if "vigil:" in w]
    if ours:
        return True, f"the injection webhook answered: {ours[0]}"
    return False, (
        "the injection webhook did not answer: the pod was admitted unchanged with no vigil warning (is the namespace"
        " excluded by the webhook's namespaceSelector, or did the call fail under failurePolicy Ignore? see the"
        " operator's log and vigil_operator_webhook_errors_total)"
    )


def warning_texts(header: str | None) -> list[str]:
    """The texts of an HTTP `Warning` header (RFC 7234: `299 - "text"`, comma-separated), unquoted."""
    if not header:
        return []
    out: list[str] = []
    for part in header.split('299 - "')[1:]:
        text = part.rsplit('"', 1)[0]
        out.append(text.replace('\\"', '"'))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vigil check-injection", description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", required=True, help="a namespace the webhook serves (not excluded)")
    parser.add_argument(
        "--group", default=PROBE_GROUP, help=f"the ConsumerGroup the probe names (default {PROBE_GROUP})"
    )
    parser.add_argument("--kubeconfig", help="out of a cluster (default: in-cluster, else KUBECONFIG)")
    args = parser.parse_args(argv)
    from vigil_core.errors import first_line  # noqa: PLC0415 - the operator extra, loaded only to run
    from vigil_operator.k8s.api import KubeApi, KubeError  # noqa: PLC0415

    try:
        kube = KubeApi.connect(args.kubeconfig)
    except Exception as exc:  # noqa: BLE001 - whatever the config loader raises is one line for the user
        print(f"vigil check-injection: no Kubernetes cluster to talk to: {first_line(exc)}", file=sys.stderr)
        return 2
    try:
        admitted, warning = asyncio.run(kube.dry_run_pod(args.namespace, probe_pod(args.group)))
    except KubeError as exc:
        print(f"vigil check-injection: {exc}", file=sys.stderr)
        return 1
    finally:
        kube.close()
    ok, line = verdict(admitted, warning_texts(warning))
    print(f"vigil check-injection: {line}", file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1
