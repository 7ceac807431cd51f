"""A small asyncio client for the few apiserver calls the fakelet makes: get, create, patch, delete, list+watch.

Raw JSON over aiohttp keeps pods as the dicts the pure modules read; the kubeconfig is parsed by the
`kubernetes` package (any kubeconfig kubectl accepts: embedded or file certificates, tokens).
"""

import asyncio
import json
import logging
import ssl
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp

log = logging.getLogger("fakelet.api")
Obj = dict[str, Any]


class ApiError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status


class Api:
    def __init__(self, server: str, ssl_context: ssl.SSLContext, headers: Mapping[str, str]) -> None:
        self.server = server.rstrip("/")
        self._ssl = ssl_context
        self._headers = dict(headers)
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    def from_kubeconfig(cls, path: Path) -> "Api":
        from kubernetes import client, config  # noqa: PLC0415 - only its kubeconfig loader

        cfg = client.Configuration()
        loader: Any = config  # untyped package
        loader.load_kube_config(config_file=str(path), client_configuration=cfg)
        ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert) if cfg.ssl_ca_cert else ssl.create_default_context()
        if cfg.cert_file:
            ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
        headers = {"Authorization": cfg.api_key["authorization"]} if "authorization" in cfg.api_key else {}
        return cls(cfg.host, ctx, headers)

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(ssl=self._ssl, limit=20)
            self._session = aiohttp.ClientSession(connector=connector, headers=self._headers, read_bufsize=2**20)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Obj | None = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Obj:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        timeout = aiohttp.ClientTimeout(total=30)
        async with self.session.request(
            method, self.server + path, data=data, params=params, headers=headers, timeout=timeout
        ) as resp:
            text = await resp.text()
            if resp.status >= 300:
                raise ApiError(resp.status, text)
            return json.loads(text) if text else {}

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> Obj:
        return await self.request("GET", path, params=params)

    async def create(self, path: str, body: Obj) -> Obj:
        return await self.request("POST", path, body=body)

    async def patch(self, path: str, body: Obj, *, strategic: bool = True) -> Obj:
        kind = "strategic-merge-patch" if strategic else "merge-patch"
        return await self.request("PATCH", path, body=body, content_type=f"application/{kind}+json")

    async def delete(self, path: str, body: Obj | None = None) -> Obj:
        return await self.request("DELETE", path, body=body)

    async def list_watch(self, path: str, params: Mapping[str, str]) -> AsyncIterator[tuple[str, Obj]]:
        """("SYNC", list) after every (re)list, then ("ADDED"|"MODIFIED"|"DELETED", object) events.

        Relists when the watch expires (410 Gone) or the connection drops, as an informer does.
        """
        while True:
            try:
                listed = await self.get(path, params)
                version = listed["metadata"]["resourceVersion"]
                yield "SYNC", listed
                async for kind, obj in self._watch(path, params, version):
                    yield kind, obj
            except (aiohttp.ClientError, TimeoutError, ApiError) as exc:
                log.warning("watch %s: %s; relisting", path, exc)
                await asyncio.sleep(1)

    async def _watch(self, path: str, params: Mapping[str, str], version: str) -> AsyncIterator[tuple[str, Obj]]:
        while True:
            query = {**params, "watch": "1", "resourceVersion": version, "allowWatchBookmarks": "true"}
            query["timeoutSeconds"] = "300"
            timeout = aiohttp.ClientTimeout(total=None, sock_read=400)
            async with self.session.get(self.server + path, params=query, timeout=timeout) as resp:
                if resp.status != 200:
                    raise ApiError(resp.status, await resp.text())
                async for line in resp.content:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    kind, obj = event["type"], event["object"]
                    if kind == "ERROR":
                        if obj.get("code") == 410:  # too old: relist
                            return
                        raise ApiError(int(obj.get("code", 500)), str(obj.get("message")))
                    version = obj["metadata"]["resourceVersion"]
                    if kind != "BOOKMARK":
                        yield kind, obj
