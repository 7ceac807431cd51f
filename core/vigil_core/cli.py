"""The `vigil` command: one entry point, a subcommand per component.

Subcommands import their component lazily, so `vigil --help` stays fast and a missing extra says which
one to install instead of failing with an ImportError.
"""

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

#: Subcommands whose issue has not landed yet: name -> (what it will do, the issue that delivers it).
PENDING: dict[str, tuple[str, str]] = {}

#: Subcommands of an extra: name -> (module with `main(argv) -> int`, the extra it needs, help). Imported by name
#: so vigil_core never imports the operator statically (import-linter contract `sidecar-stays-small`).
EXTRAS: dict[str, tuple[str, str, str]] = {
    "crd": ("vigil_operator.crd", "operator", "print the ConsumerGroup CRD (-o yaml|json)"),
    "operator": ("vigil_operator.cli", "operator", "run the ConsumerGroup operator and its webhooks (kopf)"),
    "rollout": (
        "vigil_operator.rollout_cli",
        "operator",
        "wait for a coordinated restart (status NAME)",
    ),
    "report": ("vigil_spark.cli", "report", "ingest __consumer_offsets and vigil's events, build the rebalance report"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vigil", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # the stack's code is imported only when `dev` runs: it needs the operator's extras, the sidecar image has none
    sub.add_parser("dev", help="the real local stack: up, down, status", add_help=False)
    sub.add_parser("sidecar", help="run the liveness sidecar next to a consumer (flags: vigil sidecar --help)",
                   add_help=False)  # fmt: skip
    sub.add_parser("demo", help="the whole story on the real local stack: injection, a stall, a rollout, the report")
    for name, (_, _, text) in EXTRAS.items():
        sub.add_parser(name, help=text, add_help=False)
    for name, (text, issue) in PENDING.items():
        sub.add_parser(name, help=f"{text} (not yet: {issue})", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command == "sidecar":
        from vigil_sidecar.__main__ import main as sidecar_main  # noqa: PLC0415 - imports the sidecar only when run

        return sidecar_main(rest)
    if args.command in EXTRAS:
        return _run_extra(args.command, rest)
    if args.command in PENDING:
        text, issue = PENDING[args.command]
        print(f"vigil {args.command}: not implemented yet — lands with issue {issue} ({text})", file=sys.stderr)
        return 2
    if args.command == "dev":
        return _run_dev(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    demo = _dev_module("demo", "demo")
    return 2 if demo is None else int(demo.run())


def _run_dev(argv: Sequence[str]) -> int:
    dev_cli = _dev_module("dev", "cli")
    if dev_cli is None:
        return 2
    dev_parser = argparse.ArgumentParser(prog="vigil dev", description="the real local stack: up, down, status")
    dev_cli.add_arguments(dev_parser)
    return int(dev_cli.run(dev_parser.parse_args(list(argv))))


def _dev_module(command: str, module: str) -> ModuleType | None:
    """`vigil_dev.<module>`, imported by name: vigil_dev is a development checkout's distribution (`dev/`), never
    shipped, so no shipped package may import it statically (import-linter `shipped-never-imports-dev`). Absent
    (an image, a plain `pip install kafka-vigil`): one line on stderr and None."""
    try:
        return importlib.import_module(f"vigil_dev.{module}")
    except ModuleNotFoundError as exc:
        if exc.name not in ("vigil_dev", f"vigil_dev.{module}"):
            raise
    print(f"vigil {command}: needs a development checkout of vigil (make setup installs vigil_dev); "
          "this installation has only the shipped packages", file=sys.stderr)  # fmt: skip
    return None


def _run_extra(command: str, argv: Sequence[str]) -> int:
    module_name, extra, _ = EXTRAS[command]
    try:  # the component may import its extra's libraries at start as well as at import (kopf does both)
        result: int = importlib.import_module(module_name).main(list(argv))
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("vigil_"):
            raise
        print(f"vigil {command}: needs the {extra} extra: pip install 'kafka-vigil[{extra}]' (no module {exc.name})",
              file=sys.stderr)  # fmt: skip
        return 2
    return result


if __name__ == "__main__":
    sys.exit(main())
