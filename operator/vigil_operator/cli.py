"""`vigil operator`: run the ConsumerGroup operator and its admission webhook (kopf, in one process).

Flags are validated before anything connects (a bad one is one line and exit 2), then handed to the handlers
module before it is imported (kopf registers handlers at import time).
"""

import argparse
import asyncio
import gc
import importlib
import logging
import os
import ssl
import tempfile
from collections.abc import Sequence
from typing import Any

from vigil_core import names
from vigil_core import settings as settings_loader
from vigil_core.errors import ConfigError, first_line
from vigil_operator import settings as operator_settings
from vigil_operator.settings import OperatorSettings

GC_THRESHOLDS = (700, 10, 1000)
"""Python's cyclic GC thresholds for the operator. With the default third one (10), a full collection ran whenever the
objects promoted since the last reached a quarter of the heap: at 10,000 ConsumerGroups (a million tracked objects,
nearly all long-lived: the catalog, kopf's state) a round's short-lived tasks made that every ~8 s at 1.15 s each,
about 45 % of the operator's CPU (bench/RESULTS.md). 1000 spaces full collections ~100 times further apart; the young
generations, which collect what a resync leaves, are collected as before."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vigil operator", description=__doc__.splitlines()[0] if __doc__ else None)
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="watch every namespace (default)")
    scope.add_argument("-n", "--watch-namespace", action="append", default=[], metavar="NS", help="watch only NS")
    p.add_argument("--liveness", default="http://0.0.0.0:8080/healthz", help="kopf's liveness endpoint URL")
    p.add_argument("--kubeconfig", help="out of a cluster: the kubeconfig (default: KUBECONFIG or ~/.kube/config)")
    p.add_argument("-v", "--verbose", action="store_true")
    settings_loader.add_flags(p, OperatorSettings, switches=True)
    return p


def preflight(settings: OperatorSettings) -> str | None:
    """The files the settings name, tried before kopf starts: a state dir the operator cannot write, or a certificate
    it cannot load, would otherwise fail inside kopf's startup, which retries it forever with a traceback."""
    try:
        settings.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.TemporaryFile(dir=settings.state_dir):
            pass
    except OSError as exc:
        return f"--state-dir: cannot write {settings.state_dir}: {exc.strerror or exc}"
    if settings.webhook and settings.webhook_cert is not None:
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                settings.webhook_cert, settings.webhook_key
            )
        except (OSError, ssl.SSLError) as exc:
            return (f"--webhook-cert/--webhook-key: cannot load {settings.webhook_cert} with "
                    f"{settings.webhook_key or 'the key in it'}: {first_line(exc)}")  # fmt: skip
    if settings.webhook and settings.webhook_ca is not None:
        try:
            ssl.create_default_context(cafile=settings.webhook_ca)
        except (OSError, ssl.SSLError) as exc:
            return f"--webhook-ca: cannot load {settings.webhook_ca} as PEM certificates: {first_line(exc)}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = operator_settings.from_flags(vars(args))
    except ConfigError as exc:
        return operator_settings.refused(str(exc))
    for namespace in args.watch_namespace:
        try:
            names.namespace_name(namespace)
        except ValueError as exc:
            return operator_settings.refused(f"--watch-namespace: {exc}")
    if (problem := preflight(settings)) is not None:
        return operator_settings.refused(problem)
    operator_settings.use(settings)
    if args.kubeconfig:
        os.environ["KUBECONFIG"] = args.kubeconfig
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("kafka").setLevel(logging.CRITICAL)  # kafka-python is chatty; vigil reports failures itself
    if not args.verbose:  # a line per object per handler run is noise at scale; failures still show
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    refusal = asyncio.run(crd_refusal(os.environ.get("KUBECONFIG")))
    if refusal is not None:
        return operator_settings.refused(refusal, code=1)
    gc.set_threshold(*GC_THRESHOLDS)
    import kopf  # noqa: PLC0415 - the operator extra, loaded only to run

    importlib.import_module("vigil_operator.handlers")
    if settings.webhook:
        importlib.import_module("vigil_operator.admission")
    # kopf's own default names us by the process owner's login (getpwuid), which fails in an image whose user
    # (65532) has no passwd entry: the pod name, else host and pid, is as unique and needs no user database
    identity: Any = operator_settings.identity(os.environ)  # kopf's Identity
    kopf.run(  # no kopf peering: the loops run on the Lease holder only (vigil_operator.resyncs), kopf everywhere
        identity=identity,
        standalone=True,
        liveness_endpoint=args.liveness or None,
        clusterwide=not args.watch_namespace,
        namespaces=args.watch_namespace,
        memo=kopf.Memo(watched=tuple(args.watch_namespace)),  # the catalog's startup list: the same namespaces
    )
    return 0


async def crd_refusal(kubeconfig: str | None) -> str | None:
    """Why the operator must not start: no cluster config, or the cluster's ConsumerGroup CRD is older than this
    operator's (`domain.crd_revision`); None when it may. An API server that does not answer is not a refusal:
    kopf then reports and retries it as it always does."""
    from vigil_operator import crd  # noqa: PLC0415 - the operator extra (yaml), as the handlers
    from vigil_operator.domain import crd_revision  # noqa: PLC0415
    from vigil_operator.k8s.api import KubeApi, KubeError  # noqa: PLC0415

    try:
        kube = KubeApi.connect(kubeconfig)
    except Exception as exc:  # noqa: BLE001 - whatever the config loader raises, it is one line for the user
        return f"no Kubernetes cluster to talk to (not in a pod, and no usable kubeconfig): {first_line(exc)}"
    try:
        return crd_revision.problem(await kube.crd(crd.NAME), crd.load())
    except KubeError as exc:
        logging.getLogger(__name__).warning("the CRD's revision not checked: %s", exc)
        return None
    finally:
        kube.close()
