"""The admission webhook's HTTPS server: kopf's, with certificates made by `cryptography` when none are given
(kopf's self-signed mode needs oscrypto, which fails on OpenSSL 3), and the request's namespace filled into the
object (a pod created from a template may reach admission without `metadata.namespace`), and every failed request
counted by webhook (`vigil_operator_webhook_errors_total`).

It stops gently (a replica replaced by a rollout, `failurePolicy: Fail`): kopf closes its listener and connections
the moment the operator stops, and the apiservers keep connections to it alive and reuse them, so a request sent as
a connection closed came back as `EOF` and the pod it admitted was refused (seen in CI while a release's two
replicas were replaced). Instead it serves on for `DRAIN_SECONDS` while the pod leaves the Service's endpoints,
answering each request with `Connection: close`, so every kept connection is closed by an answer the apiserver
reads, not under a request it is sending; then it stops."""

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import aiohttp.web
import kopf

from vigil_operator import pki
from vigil_operator.metrics import INJECT_SIDECAR, ONE_CR_PER_GROUP, OTHER_WEBHOOK, OperatorMetrics
from vigil_operator.settings import OperatorSettings

DRAIN_SECONDS: Final = 5.0
"""How long the webhook serves on once the operator stops: the Service's endpoints (and kube-proxy's rules on every
node) drop the pod meanwhile, and the apiservers' kept connections to it are closed by the answers."""


class NamespacedWebhookServer(kopf.WebhookServer):
    def __init__(self, *args: Any, metrics: OperatorMetrics, drain: float = DRAIN_SECONDS, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.metrics = metrics
        self.drain = drain
        self.draining = False

    def _build_ssl(self) -> tuple[bytes | None, ssl.SSLContext | None]:
        if self.context is not None and self.certfile is None:
            # the operator's own certificates (`webhook_tls`): the context as given, reloaded in place; kopf would
            # otherwise make a self-signed certificate into it, and restart the listener when its files change
            return None, self.context
        return super()._build_ssl()

    async def __call__(self, fn: Any) -> AsyncIterator[Any]:
        """kopf's server in a task of its own, so that stopping (this generator cancelled) drains it first."""
        configs: asyncio.Queue[Any] = asyncio.Queue()

        async def serve() -> None:
            async for client_config in super(NamespacedWebhookServer, self).__call__(served(fn, self.metrics)):
                await configs.put(client_config)

        server = asyncio.create_task(serve())
        try:
            while True:
                getting = asyncio.ensure_future(configs.get())
                await asyncio.wait({getting, server}, return_when=asyncio.FIRST_COMPLETED)
                if not getting.done():
                    getting.cancel()
                    server.result()  # the server ended: its error, as kopf's own would raise it
                    return
                yield getting.result()
        finally:
            self.draining = True
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(self.drain)
            server.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await server

    async def _serve(self, fn: Any, request: aiohttp.web.Request) -> aiohttp.web.Response:  # type: ignore[override]
        """kopf's answer; while draining, with `Connection: close` (the apiserver opens a new connection, to a
        replica that stays)."""
        response: aiohttp.web.Response = await super()._serve(fn, request)
        if self.draining:
            response.force_close()
        return response


def served(fn: Any, metrics: OperatorMetrics) -> Any:
    """kopf's `fn` for one admission request, with the request's namespace filled into the object, and its errors
    counted (`vigil_operator_webhook_errors_total`, by webhook)."""

    async def with_namespace(request: Any, **kwargs: Any) -> Any:
        payload = request.get("request") or {}
        obj = payload.get("object")
        if isinstance(obj, dict) and payload.get("namespace"):
            meta = obj.setdefault("metadata", {})
            meta.setdefault("namespace", payload["namespace"])
        webhook = kwargs.get("webhook")
        label = webhook if webhook in (INJECT_SIDECAR, ONE_CR_PER_GROUP) else OTHER_WEBHOOK
        try:
            response = await fn(request, **kwargs)
        except Exception:
            metrics.webhook_errors.labels(label).inc()  # kopf answers the apiserver 4xx (a request it cannot serve)
            raise
        if failed(response):
            metrics.webhook_errors.labels(label).inc()
        return response

    return with_namespace


def failed(response: Any) -> bool:
    """A response that reports a handler's error: kopf answers an exception with `allowed: false` and code 500 (a
    refusal, `kopf.AdmissionError`, carries its own 4xx code and is a decision, not an error)."""
    status = ((response or {}).get("response") or {}).get("status") or {}
    return int(status.get("code") or 0) >= 500


def host(settings: OperatorSettings) -> str:
    """The name the apiserver calls the webhook by (what its certificate is for)."""
    return settings.webhook_host or _default_host(settings.webhook_bind)


def server(
    settings: OperatorSettings, metrics: OperatorMetrics, *, context: ssl.SSLContext | None = None
) -> kopf.WebhookServer:
    """kopf's server with the certificate files given, a throwaway CA's, or `context` (`webhook_tls`)."""
    if context is not None:
        bind, port = settings.webhook_bind, settings.webhook_port
        return NamespacedWebhookServer(addr=bind, port=port, host=host(settings), context=context, metrics=metrics)
    cert, key, ca = settings.webhook_cert, settings.webhook_key, settings.webhook_ca
    if cert is None or key is None:
        cert, key, ca = _throwaway(settings.state_dir / "webhook", host(settings))
    return NamespacedWebhookServer(
        addr=settings.webhook_bind,
        port=settings.webhook_port,
        host=host(settings),
        certfile=cert,
        pkeyfile=key,
        cafile=ca,
        metrics=metrics,
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
