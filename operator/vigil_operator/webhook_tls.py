"""The operator's own webhook certificates (`--webhook-secret`): the CA and the serving certificate kept in a Secret
of the operator's namespace (the chart creates it empty, so no render of the chart ever makes new ones), the CA
bundle in the webhook configurations, changed one step at a time as `domain.webhook_certs` plans (by the leading
replica), and reloaded in place by every replica: new TLS handshakes get the new certificate, the listening socket
never closes.

Secret keys: `ca.crt` (the trusted CAs, oldest first), `ca.key` (the newest CA's key), `tls.crt`, `tls.key`;
annotations: when the bundle was published, when the certificate was issued, the rotation request last honoured,
when the chart's certificate was taken over (until its CA leaves the bundle).
"""

import asyncio
import base64
import contextlib
import datetime
import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from vigil_operator import pki
from vigil_operator.domain import webhook_certs as certs
from vigil_operator.k8s.api import KubeApi, KubeError
from vigil_operator.resyncs import Leader
from vigil_operator.settings import OperatorSettings

log = logging.getLogger(__name__)

PUBLISHED_AT: Final = "vigil.dev/bundle-published-at"
ISSUED_AT: Final = "vigil.dev/leaf-issued-at"
ROTATED_FOR: Final = "vigil.dev/rotated-for"
ADOPTED_AT: Final = "vigil.dev/adopted-at"
CA_NAME: Final = "vigil webhook CA"
"""Followed by the time it was made: two CAs of a rotation are told apart by name too (`openssl x509 -subject`)."""
SELECTOR_LABELS: Final = ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component")
"""The chart's selector of the operator's Deployment (immutable: the same before and after an upgrade)."""
TEMPLATE_LABEL: Final = "pod-template-hash"
"""Set by the Deployment's ReplicaSet: the pods of one rollout share it."""


@dataclass(frozen=True)
class Stored:
    """The Secret as read: its PEMs, what the plan sees of them (None: nothing usable), its version."""

    pems: Mapping[str, bytes]
    annotations: Mapping[str, str]
    material: certs.Material | None
    resource_version: str


def parse(secret: Mapping[str, Any]) -> Stored:
    data = secret.get("data") or {}
    pems = {key: base64.b64decode(value) for key, value in data.items() if value}
    meta = secret.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    return Stored(pems, annotations, _material(pems, annotations), str(meta.get("resourceVersion") or ""))


def _material(pems: Mapping[str, bytes], annotations: Mapping[str, str]) -> certs.Material | None:
    try:
        bundle = tuple(x509.load_pem_x509_certificates(pems["ca.crt"]))
        leaf = x509.load_pem_x509_certificate(pems["tls.crt"])
        key = serialization.load_pem_private_key(pems["ca.key"], password=None)
    except (KeyError, ValueError):
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.public_key() != bundle[-1].public_key():
        return None  # the key is the newest CA's, or the Secret is not one this operator wrote
    facts = tuple(_cert(ca, ca) for ca in bundle)
    issuer = next((ca for ca in bundle if _signed_by(leaf, ca)), None)
    return certs.Material(
        bundle=facts,
        leaf=_cert(leaf, issuer),
        bundle_published_at=_time(annotations.get(PUBLISHED_AT)),
        leaf_issued_at=_time(annotations.get(ISSUED_AT)) or leaf.not_valid_before_utc,
        rotate_requested=annotations.get(certs.ROTATE_ANNOTATION, ""),
        rotated_for=annotations.get(ROTATED_FOR, ""),
        adopted_at=_time(annotations.get(ADOPTED_AT)),
    )


@dataclass(frozen=True)
class Predecessor:
    """The certificate served before (`--webhook-adopt-secret`), as the plan sees it and as PEMs to take over."""

    facts: certs.Predecessor
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes


def predecessor(secret: Mapping[str, Any] | None) -> Predecessor | None:
    """The chart's Secret's CA (its first certificate) and serving certificate; None when missing or unreadable."""
    data = (secret or {}).get("data") or {}
    try:
        pems = {key: base64.b64decode(data[key]) for key in ("ca.crt", "tls.crt", "tls.key")}
        ca = x509.load_pem_x509_certificates(pems["ca.crt"])[0]
        leaf = x509.load_pem_x509_certificate(pems["tls.crt"])
        serialization.load_pem_private_key(pems["tls.key"], password=None)
    except (KeyError, ValueError, TypeError, IndexError):
        return None
    facts = certs.Predecessor(_cert(ca, ca), _cert(leaf, ca if _signed_by(leaf, ca) else None))
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    return Predecessor(facts, ca_pem, pems["tls.crt"], pems["tls.key"])


def _cert(cert: x509.Certificate, issuer: x509.Certificate | None) -> certs.Cert:
    return certs.Cert(
        fingerprint=pki.fingerprint(cert),
        not_before=cert.not_valid_before_utc,
        not_after=cert.not_valid_after_utc,
        issuer=pki.fingerprint(issuer) if issuer is not None else "",
    )


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _time(text: str | None) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


def fingerprints(bundles: list[str] | None) -> frozenset[str] | None:
    """The CAs the webhook configurations trust: one set when every webhook's caBundle (base64) holds the same CAs,
    None when they differ or a configuration is missing (an empty caBundle: no CA)."""
    if bundles is None:
        return None
    sets = set()
    for bundle in bundles:
        try:
            found = x509.load_pem_x509_certificates(base64.b64decode(bundle)) if bundle else []
        except ValueError:
            found = []
        sets.add(frozenset(pki.fingerprint(c) for c in found))
    return next(iter(sets)) if len(sets) == 1 else None


def service_names(host: str) -> list[str]:
    """The names a Service host (`svc.ns.svc`) is called by: `svc`, `svc.ns`, `svc.ns.svc` and the cluster.local one;
    any other host as given."""
    if not host.endswith(".svc") or host.count(".") != len(("svc", "ns")):
        return [host]
    service, namespace, _ = host.split(".")
    return [service, f"{service}.{namespace}", host, f"{host}.cluster.local"]


COMMON_NAME_MAX: Final = 64
"""X.509's upper bound on a CN (the subjectAltName names have none)."""


def common_name(hosts: list[str]) -> str:
    """The longest of the names that fits a CN (clients check the subjectAltName; the CN is for people)."""
    fitting = [h for h in hosts if len(h) <= COMMON_NAME_MAX]
    return max(fitting, key=len) if fitting else hosts[0][:COMMON_NAME_MAX]


class WebhookTLS:
    def __init__(self, kube: KubeApi, settings: OperatorSettings, host: str, pod_name: str | None = None) -> None:
        if settings.webhook_secret is None or settings.webhook_configuration is None:
            raise ValueError("WebhookTLS needs --webhook-secret and --webhook-configuration")
        self.kube = kube
        self.namespace = settings.namespace
        self.secret = settings.webhook_secret
        self.adopt_secret = settings.webhook_adopt_secret
        self.configuration = settings.webhook_configuration
        self.hosts = service_names(host)
        self.policy = certs.Policy(
            ca_validity=datetime.timedelta(days=settings.webhook_ca_days),
            leaf_validity=datetime.timedelta(days=settings.webhook_cert_days),
            propagation=datetime.timedelta(seconds=settings.webhook_cert_propagation),
        )
        self.tick = max(1.0, settings.webhook_cert_propagation / 4)
        self.pod_name = pod_name
        self._rollout: tuple[str, str] | None = None
        """This replica's Deployment selector and pod template (`_old_replicas`): its own pod's, read once."""
        self.files = settings.state_dir / "webhook-tls"
        self.served = b""
        """The certificate (PEM) the context serves."""

    # -- every replica: what it serves ---------------------------------------------------------------------------

    async def context(self) -> ssl.SSLContext:
        """The server's TLS context with the Secret's certificate, made first if the Secret has none usable."""
        stored = await self._read()
        if stored.material is None:
            before = await self._predecessor()
            now = _now()
            first = certs.plan(None, None, now, self.policy, before.facts if before is not None else None)
            log.info("webhook TLS: Secret %s/%s holds no usable certificate: %s (%s)", self.namespace, self.secret,
                     type(first).__name__, first.why if not isinstance(first, certs.Wait) else "")  # fmt: skip
            await self._apply(stored, first, now, before)
            stored = await self._read()
            if stored.material is not None and not stored.material.bundle_published_at:
                try:
                    await self._apply(stored, certs.Publish("made just now"), _now())
                except KubeError as exc:  # another replica publishing at the same moment: the leader's loop does
                    log.warning("webhook TLS: %s", exc)
                stored = await self._read()
        context = ssl.create_default_context(purpose=ssl.Purpose.CLIENT_AUTH)
        self._load(context, stored)
        return context

    async def reload(self, context: ssl.SSLContext) -> None:
        """Every `tick`: the Secret's certificate into `context` when it changed (in place: new handshakes only)."""
        while True:
            await asyncio.sleep(self.tick)
            try:
                stored = await self._read()
                if stored.pems.get("tls.crt", self.served) != self.served:
                    self._load(context, stored)
            except KubeError as exc:
                log.warning("webhook TLS: %s", exc)
            except Exception:  # a bug must not end the reloads
                log.exception("webhook TLS: reloading the certificate failed")

    def _load(self, context: ssl.SSLContext, stored: Stored) -> None:
        cert, key = stored.pems.get("tls.crt"), stored.pems.get("tls.key")
        if not cert or not key:
            raise KubeError(f"Secret {self.namespace}/{self.secret}: no tls.crt and tls.key to serve")
        cert_path, key_path = self.files / "tls.crt", self.files / "tls.key"
        pki.write_secret(cert_path, cert)
        pki.write_secret(key_path, key)
        try:
            context.load_cert_chain(cert_path, key_path)
        except ssl.SSLError as exc:
            log.warning("webhook TLS: Secret %s/%s: its tls.crt and tls.key do not load (%s): serving the previous",
                        self.namespace, self.secret, exc)  # fmt: skip
            return
        if self.served:
            log.info("webhook TLS: serving the renewed certificate from Secret %s/%s", self.namespace, self.secret)
        self.served = cert

    # -- the leading replica: the plan's steps -------------------------------------------------------------------

    async def keep(self, leader: Leader) -> None:
        """While this replica leads, the plan's steps as they fall due."""
        while True:
            term = await leader.leading()
            while not term.is_set():
                try:
                    wait = await self.settle()
                    seconds = min(self.tick, max(0.0, (wait.until - _now()).total_seconds()))
                except KubeError as exc:
                    log.warning("webhook TLS: %s", exc)
                    seconds = self.tick
                except Exception:  # a bug must not end the loop that renews the certificates
                    log.exception("webhook TLS: planning or applying a step failed")
                    seconds = self.tick
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(term.wait(), timeout=seconds)

    async def settle(self) -> certs.Wait:
        """Steps until the plan says wait (at most a few: each is written before the next is planned)."""
        for _ in range(8):
            stored = await self._read()
            published = fingerprints(await self.kube.webhook_bundles(self.configuration))
            before = await self._predecessor() if stored.material is None else None
            taking_over = stored.material is not None and stored.material.adopted_at is not None
            old = await self._old_replicas() if taking_over else None
            now = _now()
            facts = before.facts if before else None
            step = certs.plan(stored.material, published, now, self.policy, facts, old_replicas=old)
            if isinstance(step, certs.Wait):
                return step
            log.info("webhook TLS: %s (%s)", type(step).__name__, step.why)
            if not await self._apply(stored, step, now, before):
                continue  # another writer changed the Secret since it was read: plan again on what it wrote
        return certs.Wait(_now() + datetime.timedelta(seconds=self.tick))

    async def _read(self) -> Stored:
        secret = await self.kube.secret(self.namespace, self.secret)
        if secret is None:
            raise KubeError(f"Secret {self.namespace}/{self.secret} does not exist (the chart creates it, empty)")
        return parse(secret)

    async def _old_replicas(self) -> bool | None:
        """Whether a pod of the release's earlier rollout is left (one that may serve the chart's certificate): a pod
        of this replica's Deployment (the chart's selector labels, read off this pod) with another pod template.
        None when this replica cannot tell (not in a pod of the chart, or the pods unreadable): the plan then keeps
        the chart's CA for the handover's time."""
        if not self.pod_name:
            return None
        try:
            if self._rollout is None:
                me = await self.kube.pod(self.namespace, self.pod_name)
                labels = ((me or {}).get("metadata") or {}).get("labels") or {}
                if TEMPLATE_LABEL not in labels or any(key not in labels for key in SELECTOR_LABELS):
                    return None
                self._rollout = ",".join(f"{key}={labels[key]}" for key in SELECTOR_LABELS), labels[TEMPLATE_LABEL]
            selector, template = self._rollout
            pods = await self.kube.pods(self.namespace, selector)
        except KubeError as exc:
            log.warning("webhook TLS: the release's replicas unknown (%s): the chart's CA is kept for the handover's"
                        " time", exc)  # fmt: skip
            return None
        return any(
            ((pod.get("metadata") or {}).get("labels") or {}).get(TEMPLATE_LABEL) != template
            and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            for pod in pods
        )

    async def _predecessor(self) -> Predecessor | None:
        """The chart's certificate to take over (`--webhook-adopt-secret`), if there is one and it reads."""
        if self.adopt_secret is None:
            return None
        found = predecessor(await self.kube.secret(self.namespace, self.adopt_secret))
        if found is None:
            log.info("webhook TLS: no certificate to take over in Secret %s/%s", self.namespace, self.adopt_secret)
        return found

    async def _apply(
        self, stored: Stored, step: certs.Step, now: datetime.datetime, before: Predecessor | None = None
    ) -> bool:
        """Write what `step` changes; False when the Secret changed since `stored` was read (nothing written)."""
        data: dict[str, bytes] = {}
        annotations: dict[str, str | None] = {}
        match step:
            case certs.Create():
                ca = pki.new_ca(f"{CA_NAME} {now:%Y-%m-%dT%H:%M:%SZ}", validity=self.policy.ca_validity)
                leaf = self._issue(ca)
                data = {"ca.crt": ca.cert_pem(), "ca.key": ca.key_pem(), "tls.crt": leaf.cert_pem(),
                        "tls.key": leaf.key_pem()}  # fmt: skip
                # a rotation asked before there was anything to rotate is done by this
                asked = stored.annotations.get(certs.ROTATE_ANNOTATION, "")
                annotations = {PUBLISHED_AT: None, ISSUED_AT: now.isoformat(), ROTATED_FOR: asked}
            case certs.Adopt():
                if before is None:
                    raise ValueError("Adopt planned without the certificate to take over")
                ca = pki.new_ca(f"{CA_NAME} {now:%Y-%m-%dT%H:%M:%SZ}", validity=self.policy.ca_validity)
                data = {"ca.crt": before.ca_pem + ca.cert_pem(), "ca.key": ca.key_pem(), "tls.crt": before.cert_pem,
                        "tls.key": before.key_pem}  # fmt: skip
                asked = stored.annotations.get(certs.ROTATE_ANNOTATION, "")
                annotations = {PUBLISHED_AT: None, ISSUED_AT: None, ROTATED_FOR: asked, ADOPTED_AT: now.isoformat()}
                log.info("webhook TLS: took over the certificate of Secret %s/%s; a new CA is trusted beside its CA "
                         "before it signs what is served", self.namespace, self.adopt_secret)  # fmt: skip
            case certs.Publish():
                await self.kube.set_webhook_bundles(
                    self.configuration, base64.b64encode(stored.pems["ca.crt"]).decode()
                )
                annotations = {PUBLISHED_AT: now.isoformat()}
            case certs.AddCA():
                ca = pki.new_ca(f"{CA_NAME} {now:%Y-%m-%dT%H:%M:%SZ}", validity=self.policy.ca_validity)
                data = {"ca.crt": stored.pems["ca.crt"] + ca.cert_pem(), "ca.key": ca.key_pem()}
                annotations = {PUBLISHED_AT: None, ROTATED_FOR: _rotate_requested(stored)}
            case certs.IssueLeaf():
                leaf = self._issue(self._signer(stored))
                data = {"tls.crt": leaf.cert_pem(), "tls.key": leaf.key_pem()}
                annotations = {ISSUED_AT: now.isoformat()}
            case certs.DropOldCAs():
                newest = x509.load_pem_x509_certificates(stored.pems["ca.crt"])[-1]
                data = {"ca.crt": newest.public_bytes(serialization.Encoding.PEM)}
                annotations = {PUBLISHED_AT: None, ADOPTED_AT: None}
            case certs.Wait():
                return True
        written = await self.kube.update_secret(
            self.namespace, self.secret,
            data={key: base64.b64encode(value).decode() for key, value in data.items()},
            annotations=annotations, resource_version=stored.resource_version,
        )  # fmt: skip
        return written is not None

    def _issue(self, ca: pki.Issued) -> pki.Issued:
        return pki.issue(ca, common_name(self.hosts), hosts=self.hosts, server=True, validity=self.policy.leaf_validity)

    def _signer(self, stored: Stored) -> pki.Issued:
        key = serialization.load_pem_private_key(stored.pems["ca.key"], password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):  # `parse` made the material only with one
            raise TypeError(f"Secret {self.namespace}/{self.secret}: ca.key is not an EC key")
        return pki.Issued(key, x509.load_pem_x509_certificates(stored.pems["ca.crt"])[-1])


def _rotate_requested(stored: Stored) -> str:
    return stored.material.rotate_requested if stored.material is not None else ""


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
