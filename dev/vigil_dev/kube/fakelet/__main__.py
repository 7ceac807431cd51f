"""`python -m vigil_dev.kube.fakelet --kubeconfig K --node N --state-dir D` (started by `vigil dev up`)."""

import argparse
import asyncio
import logging
import sys
from pathlib import Path

import aiohttp

from vigil_dev.errors import DevError
from vigil_dev.kube import build
from vigil_dev.kube.fakelet import agent, lifecycle
from vigil_dev.kube.fakelet.api import ApiError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vigil_dev.kube.fakelet", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--node", required=True, help="the Node to register and run pods for")
    parser.add_argument("--state-dir", type=Path, required=True, help="the stack's state directory")
    parser.add_argument("--backoff-base", type=float, default=1.0, help="restart back-off after the 2nd exit (s)")
    parser.add_argument("--backoff-max", type=float, default=10.0, help="restart back-off cap (s)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = agent.Settings(
        node=args.node,
        state_dir=args.state_dir,
        python=sys.executable,
        backoff=lifecycle.Backoff(args.backoff_base, args.backoff_max),
        version=f"{build.K8S_VERSION}-fakelet",
    )
    if not args.kubeconfig.is_file():
        print(f"fakelet: no kubeconfig at {args.kubeconfig}", file=sys.stderr)
        return 1
    try:
        return asyncio.run(agent.main(args.kubeconfig, settings))
    except (DevError, ApiError, aiohttp.ClientError, OSError) as exc:
        print(f"fakelet {args.node}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
