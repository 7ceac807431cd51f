"""The `vigil` command: one entry point, a subcommand per component.

Subcommands import their component lazily, so `vigil --help` stays fast and a missing extra says which
one to install instead of failing with an ImportError.
"""

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points

#: Subcommands of an extra: name -> (module with `main(argv) -> int`, the extra it needs, help). Imported when run,
#: so `vigil sidecar` (the sidecar image: no extra) never imports the operator's or the report's libraries.
EXTRAS: dict[str, tuple[str, str, str]] = {
    "crd": ("vigil_operator.crd", "operator", "print the ConsumerGroup CRD (-o yaml|json)"),
    "operator": ("vigil_operator.cli", "operator", "run the ConsumerGroup operator and its webhooks (kopf)"),
    "rollout": (
        "vigil_operator.rollout_cli",
        "operator",
        "wait for a coordinated restart (status NAME)",
    ),
    "check-injection": (
        "vigil_operator.injection_check",
        "operator",
        "prove the injection webhook answers: a server-side dry-run of a labelled pod (helm test runs it)",
    ),
    "report": ("vigil_spark.cli", "report", "ingest __consumer_offsets and vigil's events, build the rebalance report"),
}


#: Subcommands a development checkout adds: name -> help. Their code is another distribution's (vigil_dev, in no
#: image), registered as the entry point of that name in PLUGIN_GROUP (`main(argv) -> int`, dev/pyproject.toml):
#: no shipped package names its modules. Loaded only when run (it needs the operator's extras).
PLUGINS: dict[str, str] = {
    "dev": "the real local stack: up, down, status",
    "demo": "the whole story on the real local stack: injection, a stall, a rollout, the report",
}
PLUGIN_GROUP = "vigil.commands"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vigil", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("sidecar", help="run the liveness sidecar next to a consumer (flags: vigil sidecar --help)",
                   add_help=False)  # fmt: skip
    for name, text in PLUGINS.items():
        sub.add_parser(name, help=text, add_help=False)
    for name, (_, _, text) in EXTRAS.items():
        sub.add_parser(name, help=text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command == "sidecar":
        from vigil_sidecar.__main__ import main as sidecar_main  # noqa: PLC0415 - imports the sidecar only when run

        return sidecar_main(rest)
    if args.command in EXTRAS:
        return _run_extra(args.command, rest)
    run = _plugin(args.command)
    if run is None:
        print(f"vigil {args.command}: needs a development checkout of vigil (make setup installs vigil_dev); "
              "this installation has only the shipped packages", file=sys.stderr)  # fmt: skip
        return 2
    return int(run(list(rest)))


def _plugin(command: str) -> Callable[[list[str]], int] | None:
    """The `main` registered for `command` in PLUGIN_GROUP; None when no installed distribution registers it (an
    image, a plain `pip install kafka-vigil`), or its module is not importable."""
    for point in entry_points(group=PLUGIN_GROUP, name=command):
        try:
            run: Callable[[list[str]], int] = point.load()
        except ModuleNotFoundError as exc:
            if not exc.name or not (point.module == exc.name or point.module.startswith(f"{exc.name}.")):
                raise  # the plugin is there but something it needs is not: not ours to hide
            return None
        return run
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
