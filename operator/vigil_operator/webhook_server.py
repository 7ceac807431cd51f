"""The admission webhook's HTTPS server: kopf's, with certificates made by `cryptography` when none are given
(kopf's self-signed mode needs oscrypto, which fails on OpenSSL 3), and the request's namespace filled into the
object (a pod created from a template may reach admission without `metadata.namespace`)."""

import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import kopf

from vigil_operator import pki
from vigil_operator.settings import OperatorSettings


class NamespacedWebhookServer(kopf.WebhookServer):
    async def __call__(self, fn: Any) -> AsyncIterator[Any]:
        async def with_namespace(request: Any, **kwargs: Any) -> Any:
            payload = request.get("request") or {}
            obj = payload.get("object")
            if isinstance(obj, dict) and payload.get("namespace"):
                meta = obj.setdefault("metadata", {})
                meta.setdefault("namespace", payload["namespace"])
            return await fn(request, **kwargs)

        wrapped: Any = with_namespace
        async for client_config in super().__call__(wrapped):
            yield client_config


def server(settings: OperatorSettings) -> kopf.WebhookServer:
    host = settings.webhook_host or _default_host(settings.webhook_bind)
    cert, key, ca = settings.webhook_cert, settings.webhook_key, settings.webhook_ca
    if cert is None or key is None:
        cert, key, ca = _throwaway(settings.state_dir / "webhook", host)
    return NamespacedWebhookServer(
        addr=settings.webhook_bind, port=settings.webhook_port, host=host, certfile=cert, pkeyfile=key, cafile=ca
    )


def _throwaway(directory: Path, host: str) -> tuple[Path, Path, Path]:
    """A fresh CA and serving certificate for `host` (and this machine's name), written with mode 0600 keys."""
    ca = pki.new_ca("vigil-operator webhook CA")
    hosts = sorted({host, socket.gethostname(), "localhost", "127.0.0.1"})
    leaf = pki.issue(ca, host, hosts=hosts, server=True)
    ca_cert, _ = ca.write(directory / "ca.crt", directory / "ca.key")
    cert, key = leaf.write(directory / "tls.crt", directory / "tls.key")
    return cert, key, ca_cert


def _default_host(bind: str) -> str:
    return "127.0.0.1" if bind in ("0.0.0.0", "", "127.0.0.1") else bind  # noqa: S104 - comparing, not binding
