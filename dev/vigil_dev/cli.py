"""`vigil dev ...`: argument parsing and output only; the work is in stack.py. `main` is the entry point
`vigil.commands: dev` (dev/pyproject.toml) that the `vigil` command runs."""

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from vigil_dev import paths, stack
from vigil_dev.errors import DevError
from vigil_dev.kafka import install as kafka_install
from vigil_dev.kafka.config import Security
from vigil_dev.testing import images


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="vigil dev", description="the real local stack: up, down, status")
    add_arguments(parser)
    return run(parser.parse_args(list(argv)))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="dev_command", required=True, metavar="{up,down,status}")
    for name, text in (
        ("up", "start Kafka and Kubernetes (control plane + a real node holding vigil's images, `make images`)"),
        ("down", "stop what `up` started; logs are kept"),
        ("status", "name each part and whether it runs; exit 1 if any is down"),
    ):
        cmd = sub.add_parser(name, help=text, description=text)
        cmd.add_argument(
            "--state-dir", type=Path, default=paths.default_state_dir(),
            help="where the stack keeps data, logs, pids and its env file (default: %(default)s)",
        )  # fmt: skip
        if name == "up":
            cmd.add_argument("--brokers", type=int, choices=(1, 3), default=1, help="Kafka nodes (default 1)")
            cmd.add_argument(
                "--security", choices=[s.value for s in Security], default=Security.PLAINTEXT.value,
                help="client listener security (default plaintext)",
            )  # fmt: skip
            cmd.add_argument(
                "--kafka-version", choices=kafka_install.SUPPORTED_VERSIONS, default=kafka_install.pinned_version(),
                help="the broker's Apache Kafka release (default %(default)s; docs/kafka-versions.md)",
            )  # fmt: skip
            cmd.add_argument("--no-kafka", action="store_true", help="leave Kafka out")
            cmd.add_argument("--no-kube", action="store_true", help="leave Kubernetes out")
            cmd.add_argument(
                "--report-image", action="store_true",
                help="also import vigil-report (1 GB: ~18 s more) for the chart's report CronJob",
            )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    state_dir: Path = args.state_dir.expanduser().resolve()
    try:
        if args.dev_command == "up":
            names = [*images.NODE_IMAGES, *(["report"] if args.report_image else [])]
            archives = [] if args.no_kube else images.archives(progress=print, names=names)
            path = stack.up(
                state_dir, brokers=args.brokers, security=Security(args.security), kafka_version=args.kafka_version,
                kafka=not args.no_kafka, kube=not args.no_kube, archives=archives,
            )  # fmt: skip
            print(f"env file: {path}  (use: set -a; . {path}; set +a)")
            return 0
        if args.dev_command == "down":
            stopped = stack.down(state_dir)
            print(f"stopped: {', '.join(stopped)}" if stopped else f"nothing running at {state_dir}")
            return 0
        parts = stack.status(state_dir)
        if not parts:
            print(f"no stack at {state_dir}")
            return 1
        width = max(12, *(len(p.name) for p in parts))
        for part in parts:
            print(f"{part.name:{width}} {'running' if part.running else 'DOWN':8} {part.detail}")
        return 0 if all(p.running for p in parts) else 1
    except DevError as exc:
        print(f"vigil dev {args.dev_command}: {exc}", file=sys.stderr)
        return 1
