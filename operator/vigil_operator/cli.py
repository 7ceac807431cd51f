"""`vigil operator`: run the ConsumerGroup operator and its admission webhook (kopf, in one process).

Flags are validated before anything connects (a bad one is one line and exit 2), then handed to the handlers
module before it is imported (kopf registers handlers at import time).
"""

import argparse
import importlib
import logging
import os
import socket
import sys
from collections.abc import Sequence
from typing import Any

from vigil_core import settings as settings_loader
from vigil_core.errors import ConfigError
from vigil_operator import settings as operator_settings
from vigil_operator.priority import POD_NAME_ENV, priority_from_pod_name
from vigil_operator.settings import OperatorSettings


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vigil operator", description=__doc__.splitlines()[0] if __doc__ else None)
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="watch every namespace (default)")
    scope.add_argument("-n", "--watch-namespace", action="append", default=[], metavar="NS", help="watch only NS")
    p.add_argument("--standalone", action="store_true", help="no peering: act even if other replicas run")
    p.add_argument(
        "--peering", default="vigil", help="the ClusterKopfPeering (with -n: KopfPeering) replicas coordinate through"
    )
    p.add_argument("--priority", type=int, help="the replica with the highest priority acts (default 0)")
    p.add_argument(
        "--priority-from-pod-name",
        action="store_true",
        help=f"the priority is a hash of the pod name in ${POD_NAME_ENV} (replicas of one Deployment)",
    )
    p.add_argument("--liveness", default="http://0.0.0.0:8080/healthz", help="kopf's liveness endpoint URL")
    p.add_argument("--kubeconfig", help="out of a cluster: the kubeconfig (default: KUBECONFIG or ~/.kube/config)")
    p.add_argument("-v", "--verbose", action="store_true")
    settings_loader.add_flags(p, OperatorSettings, switches=True)
    return p


def peering_priority(args: argparse.Namespace) -> int | str:
    """The kopf priority these flags ask for, or the one-line reason they are refused."""
    if not args.priority_from_pod_name:
        return 0 if args.priority is None else int(args.priority)
    for flag, given in (("--priority", args.priority is not None), ("--standalone", args.standalone)):
        if given:
            return f"--priority-from-pod-name and {flag} exclude each other"
    pod_name = os.environ.get(POD_NAME_ENV, "")
    if not pod_name:
        return f"--priority-from-pod-name needs ${POD_NAME_ENV} (downward API: fieldRef metadata.name)"
    return priority_from_pod_name(pod_name)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    priority = peering_priority(args)
    if isinstance(priority, str):
        print(f"vigil operator: {priority}", file=sys.stderr)
        return 2
    try:
        settings = operator_settings.from_flags(vars(args))
    except ConfigError as exc:
        print(f"vigil operator: {exc}", file=sys.stderr)
        return 2
    operator_settings.use(settings)
    if args.kubeconfig:
        os.environ["KUBECONFIG"] = args.kubeconfig
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("kafka").setLevel(logging.CRITICAL)  # kafka-python is chatty; vigil reports failures itself
    if not args.verbose:  # one "Timer 'resync' succeeded" per group per resync is noise at scale; failures still show
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    if args.priority_from_pod_name:
        pod = os.environ[POD_NAME_ENV]
        logging.getLogger(__name__).info("peering %r with priority %d (from pod %s)", args.peering, priority, pod)
    import kopf  # noqa: PLC0415 - the operator extra, loaded only to run

    importlib.import_module("vigil_operator.handlers")
    if settings.webhook:
        importlib.import_module("vigil_operator.admission")
    # kopf's own default names us by the process owner's login (getpwuid), which fails in an image whose user
    # (65532) has no passwd entry: the pod name, else host and pid, is as unique and needs no user database.
    identity: Any = os.environ.get(POD_NAME_ENV) or f"{socket.gethostname()}/{os.getpid()}"  # kopf's Identity
    kopf.run(
        identity=identity,
        standalone=args.standalone,
        priority=priority,
        peering_name=None if args.standalone else args.peering,
        liveness_endpoint=args.liveness or None,
        clusterwide=not args.watch_namespace,
        namespaces=args.watch_namespace,
    )
    return 0
