"""The ConsumerGroup CRD as the package ships it: `vigil crd` prints it, the operator and tests install it.

The file is a copy of the canonical `crds/consumergroups.vigil.dev.yaml` (`make generate-crds`; a unit test and
`make verify-crds` fail when they differ), read as package data so an installed wheel has it too.
"""

import argparse
import json
import sys
from collections.abc import Sequence
from importlib import resources
from typing import Any

import yaml  # type: ignore[import-untyped]

RESOURCE = "crds/consumergroups.vigil.dev.yaml"
NAME = "consumergroups.vigil.dev"


def text() -> str:
    """The CRD exactly as shipped (comments included)."""
    return resources.files("vigil_operator").joinpath(RESOURCE).read_text(encoding="utf-8")


def load() -> dict[str, Any]:
    crd: dict[str, Any] = yaml.safe_load(text())
    return crd


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vigil crd", description="Print the ConsumerGroup CRD (vigil.dev).")
    parser.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml", help="default: yaml")
    args = parser.parse_args(argv)
    if args.output == "json":
        sys.stdout.write(json.dumps(load(), indent=2) + "\n")
    else:
        sys.stdout.write(text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
