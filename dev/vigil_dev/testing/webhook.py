"""A tiny mutating admission webhook for tests: adds an env var to every container of the pods it admits.

`python -m vigil_dev.testing.webhook --port P --cert C --key K --env NAME=VALUE --calls FILE` serves
`POST /mutate` over HTTPS on 127.0.0.1 (the apiserver calls it by URL, checking `C` against the webhook's
`caBundle`) and appends one JSON line per AdmissionReview to FILE, so a test sees it was really called.
"""

import argparse
import base64
import json
import ssl
import sys
from pathlib import Path
from typing import Any

from aiohttp import web


def patch_for(pod: dict[str, Any], name: str, value: str) -> list[dict[str, Any]]:
    """A JSONPatch adding `name=value` to every container (and init container) that lacks it."""
    ops: list[dict[str, Any]] = []
    for field in ("initContainers", "containers"):
        for i, c in enumerate(pod.get("spec", {}).get(field) or []):
            env = c.get("env")
            if env is None:
                ops.append({"op": "add", "path": f"/spec/{field}/{i}/env", "value": [{"name": name, "value": value}]})
            elif not any(e.get("name") == name for e in env):
                ops.append({"op": "add", "path": f"/spec/{field}/{i}/env/-", "value": {"name": name, "value": value}})
    return ops


def app(env_name: str, env_value: str, calls: Path) -> web.Application:
    async def mutate(request: web.Request) -> web.Response:
        review = await request.json()
        req = review["request"]
        pod = req.get("object") or {}
        ops = patch_for(pod, env_name, env_value)
        record = {
            "uid": req["uid"],
            "operation": req.get("operation"),
            "namespace": req.get("namespace"),
            "name": pod.get("metadata", {}).get("name") or pod.get("metadata", {}).get("generateName"),
            "dryRun": req.get("dryRun", False),
            "tls": request.transport is not None and request.transport.get_extra_info("sslcontext") is not None,
        }
        with calls.open("a") as f:
            f.write(json.dumps(record) + "\n")
        response: dict[str, Any] = {"uid": req["uid"], "allowed": True}
        if ops:
            response |= {"patchType": "JSONPatch", "patch": base64.b64encode(json.dumps(ops).encode()).decode()}
        return web.json_response({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})

    application = web.Application()
    application.router.add_post("/mutate", mutate)
    return application


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", type=Path, required=True)
    parser.add_argument("--key", type=Path, required=True)
    parser.add_argument("--env", required=True, help="NAME=VALUE to add to every container")
    parser.add_argument("--calls", type=Path, required=True, help="one JSON line per AdmissionReview received")
    args = parser.parse_args(argv)
    name, _, value = args.env.partition("=")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(args.cert, args.key)
    web.run_app(app(name, value, args.calls), host="127.0.0.1", port=args.port, ssl_context=ctx, print=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
