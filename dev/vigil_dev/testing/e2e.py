"""What the e2e suites share: the manifests they apply (a ConsumerGroup, the consumers' StatefulSet) and how
they read back what the operator wrote (status, conditions, Events). Fixtures are in tests/e2e/conftest.py."""

import copy
from typing import Any

from vigil_dev.testing.kube_fixtures import Kube
from vigil_dev.testing.waiting import wait_for

CG = ("vigil.dev", "v1alpha1", "consumergroups")
APP = ["python", "-m", "vigil_dev.testing.consumerapp"]


def consumer_group(name: str, group: str, bootstrap: str, *, spec: dict[str, Any] | None = None,
                   **liveness: Any) -> dict[str, Any]:  # fmt: skip
    """A ConsumerGroup for `group` on the StatefulSet `name`; `liveness` fields and other `spec` fields added."""
    return {
        "apiVersion": "vigil.dev/v1alpha1",
        "kind": "ConsumerGroup",
        "metadata": {"name": name},
        "spec": {
            "groupId": group,
            "kafka": {"bootstrapServers": bootstrap},
            "workload": {"kind": "StatefulSet", "name": name},
            "liveness": {"stallTimeoutSeconds": 6, "action": "alert", **liveness},
            **(spec or {}),
        },
    }


def statefulset(
    name: str, group: str, topic: str, bootstrap: str, replicas: int = 3, *, env: dict[str, str] | None = None,
    parallel: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """The consumers: `replicas` pods labelled for injection, each running `consumerapp` on `topic`; `env` goes
    to the app container (e.g. KAFKA_SESSION_TIMEOUT_MS); `parallel` starts and deletes pods all at once."""
    app_env = [{"name": "VIGIL_KAFKA_BOOTSTRAP_SERVERS", "value": bootstrap}]
    app_env += [{"name": k, "value": v} for k, v in (env or {}).items()]
    manifest: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {
                    "labels": {"app": name, "vigil.dev/inject": "true"},
                    "annotations": {"vigil.dev/consumer-group": name},
                },
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "containers": [
                        {
                            "name": "app",
                            "image": "vigil-test/consumerapp:1",
                            "command": APP,
                            "args": ["--group", group, "--topic", topic],
                            "env": app_env,
                        }
                    ],
                },
            },
        },
    }
    if parallel:
        manifest["spec"]["podManagementPolicy"] = "Parallel"
    return manifest


def wait_injecting(kube: Kube, namespace: str, workload: dict[str, Any]) -> None:
    """Until the webhook injects a dry-run pod of `workload`: it knows the CR once it is in the operator's index."""
    template = copy.deepcopy(workload["spec"]["template"])
    template["metadata"]["name"] = "probe"
    wait_for(
        lambda: kube.core.create_namespaced_pod(namespace, template, dry_run="All").to_dict(),
        lambda pod: any(c["name"] == "vigil-sidecar" for c in (pod["spec"].get("init_containers") or [])),
        timeout=30,
        what="the webhook injecting a dry-run pod",
    )


def status_of(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    obj = kube.custom.get_namespaced_custom_object(*CG[:2], namespace, CG[2], name)
    return dict(obj.get("status") or {})


def cond(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), {})


def events_for(kube: Kube, namespace: str, name: str) -> list[dict[str, Any]]:
    listed = kube.core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}")
    return [{"reason": e.reason, "type": e.type, "message": e.message} for e in listed.items]
