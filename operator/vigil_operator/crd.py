"""The ConsumerGroup CRD as the package ships it: `vigil crd` prints it (`vigil crd reference`: as Markdown), the
operator and tests install it.

The file is a copy of the canonical `crds/consumergroups.vigil.dev.yaml` (`make generate-crds`; a unit test and
`make verify-crds` fail when they differ), read as package data so an installed wheel has it too.
"""

import argparse
import json
import sys
import time
from collections.abc import Sequence
from importlib import resources
from typing import Any

import yaml  # type: ignore[import-untyped]

from vigil_core import markdown
from vigil_operator import crd_reference

RESOURCE = "crds/consumergroups.vigil.dev.yaml"
NAME = "consumergroups.vigil.dev"


def text() -> str:
    """The CRD exactly as shipped (comments included)."""
    return resources.files("vigil_operator").joinpath(RESOURCE).read_text(encoding="utf-8")


def load() -> dict[str, Any]:
    crd: dict[str, Any] = yaml.safe_load(text())
    return crd


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="vigil crd",
        description="Print the ConsumerGroup CRD (vigil.dev), apply it (Helm installs crds/, never upgrades them),"
        " or print its Markdown reference (docs/consumergroup.md).",
    )
    parser.add_argument(
        "action", nargs="?", choices=("print", "apply", "reference"), default="print", help="default: print"
    )
    parser.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml", help="print: default yaml")
    parser.add_argument("--kubeconfig", help="apply: out of a cluster (default: in-cluster, else KUBECONFIG)")
    parser.add_argument("--timeout", type=float, default=60.0, help="apply: seconds to wait for Established")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--write", metavar="FILE", help="reference: rewrite FILE below its marker line")
    target.add_argument("--check", metavar="FILE", help="reference: exit 1 when FILE below its marker is stale")
    args = parser.parse_args(argv)
    if args.action == "apply":
        return apply(args.kubeconfig, args.timeout)
    if args.action == "reference":
        return reference(args.write, args.check)
    if args.output == "json":
        sys.stdout.write(json.dumps(load(), indent=2) + "\n")
    else:
        sys.stdout.write(text())
    return 0


def reference(write: str | None, check: str | None) -> int:
    """Print the Markdown reference, or bring FILE up to date below its marker (`--write`), or say it is stale."""
    rendered = crd_reference.render(load())
    return markdown.reference(
        rendered, crd_reference.MARKER, write=write, check=check, prog="vigil crd reference", how="make generate-crds"
    )


def apply(kubeconfig: str | None, timeout: float) -> int:
    """Server-side apply of the shipped CRD (field manager `vigil`, conflicts forced: the CRD is ours), then wait
    until it is Established. Existing ConsumerGroups and their status are untouched: the schema is additive."""
    import urllib3  # noqa: PLC0415
    from kubernetes import client, config  # noqa: PLC0415 - only `apply` talks to a cluster
    from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

    loader: Any = config
    try:
        try:
            loader.load_incluster_config()
            api: Any = client.ApiClient()
        except loader.ConfigException:
            api = loader.new_client_from_config(config_file=kubeconfig)
    except (loader.ConfigException, OSError) as exc:
        print(f"vigil crd apply: no cluster to talk to: {exc}", file=sys.stderr)
        return 1
    ext = client.ApiextensionsV1Api(api)
    try:
        ext.patch_custom_resource_definition(NAME, load(), field_manager="vigil", force=True,
                                             _content_type="application/apply-patch+yaml")  # fmt: skip
        deadline = time.monotonic() + timeout
        while not _established(ext.read_custom_resource_definition(NAME).to_dict()):
            if time.monotonic() >= deadline:
                print(f"vigil crd apply: {NAME} not Established within {timeout:g}s", file=sys.stderr)
                return 1
            time.sleep(0.5)
    except ApiException as exc:
        hint = " (needs get and patch on customresourcedefinitions)" if exc.status == 403 else ""
        print(f"vigil crd apply: {NAME}: {exc.status} {exc.reason}{hint}", file=sys.stderr)
        return 1
    except (OSError, urllib3.exceptions.HTTPError) as exc:
        host = api.configuration.host
        print(f"vigil crd apply: the API server at {host} is unreachable ({type(exc).__name__})", file=sys.stderr)
        return 1
    finally:
        api.close()
    print(f"vigil crd apply: {NAME} applied and Established")
    return 0


def _established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


if __name__ == "__main__":
    sys.exit(main())
