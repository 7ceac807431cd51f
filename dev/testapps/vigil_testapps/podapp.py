"""A tiny app for test pods: health endpoints a test can break, and its own view of itself.

`python -m vigil_testapps.podapp --port 8080` listens on `$VIGIL_POD_IP` (the pod's own loopback
address) and serves:

- `GET /healthz` → 200 `ok`, or 500 after `POST /fail` (liveness probes)
- `GET /readyz` → 200, or 503 after `POST /unready` until `POST /ready` (readiness probes)
- `GET /whoami` → JSON `{"pid", "argv", "env"}`

SIGTERM makes it exit 0 at once, unless `--ignore-sigterm` (then only SIGKILL stops it: grace-period tests).
Stdlib only and quick to start: it runs in every test pod.
"""

import argparse
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType


class _State:
    healthy = True
    ready = True


class QuietHandler(BaseHTTPRequestHandler):
    """Plain-text replies, no access log (probes would fill the container log): the test apps' HTTP base."""

    def _reply(self, code: int, body: str) -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Handler(QuietHandler):
    def do_GET(self) -> None:
        if self.path == "/healthz":
            self._reply(200 if _State.healthy else 500, "ok" if _State.healthy else "failing")
        elif self.path == "/readyz":
            self._reply(200 if _State.ready else 503, "ready" if _State.ready else "not ready")
        elif self.path == "/whoami":
            self._reply(200, json.dumps({"pid": os.getpid(), "argv": sys.argv, "env": dict(os.environ)}))
        else:
            self._reply(404, "not found")

    def do_POST(self) -> None:
        actions = {"/fail": ("healthy", False), "/unready": ("ready", False), "/ready": ("ready", True)}
        if self.path not in actions:
            self._reply(404, "not found")
            return
        attr, value = actions[self.path]
        setattr(_State, attr, value)
        print(f"podapp: {attr} = {value}", flush=True)
        self._reply(200, "ok")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8080)
    # every address of the pod's own network namespace (the node probes the pod IP)
    parser.add_argument("--host", default=os.environ.get("VIGIL_POD_IP", "0.0.0.0"))  # noqa: S104
    parser.add_argument("--ignore-sigterm", action="store_true")
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer((args.host, args.port), _Handler)

    def on_term(signum: int, _frame: FrameType | None) -> None:
        if args.ignore_sigterm:
            print("podapp: SIGTERM ignored", flush=True)
            return
        print("podapp: SIGTERM, exiting", flush=True)
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    print(f"podapp: pid {os.getpid()} serving on {args.host}:{args.port}", flush=True)
    server.serve_forever(poll_interval=0.1)
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
