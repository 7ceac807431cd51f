"""`vigil rollout status NAME`: wait for a ConsumerGroup's coordinated restart to finish, for CI pipelines.

`helm upgrade --wait` does not wait for OnDelete StatefulSets (their pods are not replaced by the controller), so
a pipeline waits here: one line per change of progress, exit 0 when the StatefulSet's current revision is rolled
out, 1 when the rollout paused, the configuration refuses it or the timeout passed (one line saying which).
"""

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from vigil_core.crd import API_GROUP, PLURAL, VERSION
from vigil_operator.domain.rollout import RESTART_ANNOTATION

POLL_SECONDS = 2.0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vigil rollout", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    status = sub.add_parser("status", help="wait for the coordinated restart of a ConsumerGroup's StatefulSet")
    status.add_argument("name", help="the ConsumerGroup")
    status.add_argument("-n", "--namespace", default="default")
    status.add_argument("--timeout", type=float, default=600.0, help="seconds to wait (default 600)")
    status.add_argument("--kubeconfig", help="default: KUBECONFIG or ~/.kube/config (in-cluster when there)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    where = f"ConsumerGroup {args.namespace}/{args.name}"
    try:
        api = _connect(args.kubeconfig)
    except (config.ConfigException, OSError) as exc:
        print(f"vigil rollout: no Kubernetes configuration ({exc})", file=sys.stderr)
        return 1
    custom, apps = client.CustomObjectsApi(api), client.AppsV1Api(api)

    def read() -> tuple[dict[str, Any], dict[str, Any] | None]:
        cr = cast(dict[str, Any], custom.get_namespaced_custom_object(API_GROUP, VERSION, args.namespace, PLURAL,
                                                                      args.name))  # fmt: skip
        workload = (cr.get("spec") or {}).get("workload") or {}
        found = None
        if workload.get("kind") == "StatefulSet" and workload.get("name"):
            found = apps.read_namespaced_stateful_set(workload["name"], args.namespace).to_dict()
        return cr, found

    try:
        return wait(read, where, args.timeout, clock=time.monotonic, sleep=time.sleep)
    except ApiException as exc:
        what = "not found" if exc.status == 404 else f"{exc.status} {exc.reason}"
        print(f"vigil rollout: {where}: {what}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"vigil rollout: the API server is unreachable ({exc})", file=sys.stderr)
        return 1


def wait(
    read: Callable[[], tuple[dict[str, Any], dict[str, Any] | None]], where: str, timeout: float, *,
    clock: Callable[[], float], sleep: Callable[[float], None],
) -> int:  # fmt: skip
    deadline = clock() + timeout
    said = ""
    while True:
        cr, workload = read()
        verdict, line = progress(cr, workload)
        if line != said:
            print(f"{where}: {line}", flush=True)
            said = line
        if verdict is not None:
            return verdict
        if clock() >= deadline:
            print(f"vigil rollout: {where}: not rolled out within {timeout:g}s ({line})", file=sys.stderr)
            return 1
        sleep(POLL_SECONDS)


def progress(cr: dict[str, Any], workload: dict[str, Any] | None) -> tuple[int | None, str]:  # noqa: PLR0911
    """(exit code when finished else None, one line) from the ConsumerGroup and its StatefulSet (pure)."""
    spec, status = cr.get("spec") or {}, cr.get("status") or {}
    if (spec.get("restart") or {}).get("strategy") != "Coordinated":
        return 1, "restart.strategy is not Coordinated: vigil does not restart its pods"
    valid: dict[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "ConfigValid"), {})
    if valid.get("status") == "False":
        return 1, f"ConfigValid=False {valid.get('reason')}: {valid.get('message')}"
    if workload is None:
        return None, "waiting for the StatefulSet"
    revision = str((workload.get("status") or {}).get("update_revision") or "")
    requested = ((workload.get("metadata") or {}).get("annotations") or {}).get(RESTART_ANNOTATION)
    rollout = status.get("rollout") or {}
    target = str(rollout.get("targetRevision") or "")
    current = target.split("+restart@", 1)[0] == revision and (not requested or "+restart@" in target)
    phase = rollout.get("phase")
    if not rollout or not current:
        return None, f"waiting for the operator to take up revision {revision or '(none yet)'}"
    counts = f"{rollout.get('done', 0)}/{rollout.get('total', 0)}"
    if phase == "Complete":
        return 0, f"rolled out {target}: {counts} pod(s) restarted"
    if phase == "Paused":
        return 1, f"paused at {counts}: {rollout.get('message')}"
    return None, f"{counts} restarted; {rollout.get('message') or 'rolling'}"


def _connect(kubeconfig: str | None) -> Any:
    loader: Any = config
    if kubeconfig is None:
        try:
            loader.load_incluster_config()
            return client.ApiClient()
        except loader.ConfigException:
            pass
    return loader.new_client_from_config(config_file=kubeconfig)
