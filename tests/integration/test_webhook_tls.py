"""The operator's own webhook certificates (`--webhook-secret`, `webhook_tls`) on a real kube-apiserver: made into
the chart's empty Secret, the CA bundle written into both webhook configurations; a forced rotation then adds a CA,
moves the served certificate to it once published, and drops the old CA once nothing it signed is served — while a
TLS client that trusts exactly what a configuration holds at that moment (what the apiserver does) handshakes with the
server, reloading in place, every 0.1 s, once per configuration that differs: every handshake succeeds. (The two
configurations are two objects patched one after the other: between the patches they may differ, and each must
still trust what is served.)

`propagation` is 2 s here (the chart's default is 120 s)."""

import asyncio
import base64
import datetime
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from kubernetes import client, config

from vigil_dev.testing.chart import Tools, find
from vigil_dev.testing.clients import unique
from vigil_dev.testing.kube_fixtures import Kube
from vigil_dev.testing.waiting import bound
from vigil_operator import pki
from vigil_operator.domain.webhook_certs import ROTATE_ANNOTATION
from vigil_operator.k8s.api import KubeApi
from vigil_operator.resyncs import Always
from vigil_operator.settings import OperatorSettings
from vigil_operator.webhook_tls import ROTATED_FOR, WebhookTLS

pytestmark = [pytest.mark.kube, pytest.mark.integration]

PROPAGATION = 2.0
SERVICE = "vigil-webhook"


def hooks(name: str, namespace: str) -> list[dict[str, Any]]:
    """One webhook that never matches a real object (an object label nobody sets), called through a Service."""
    return [
        {
            "name": f"{name}.vigil.test",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Ignore",
            "objectSelector": {"matchLabels": {"vigil.test/never": "true"}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"]}],
            "clientConfig": {"service": {"name": SERVICE, "namespace": namespace, "path": "/x"}},
        }
    ]


@pytest.fixture
def configuration(kube: Kube, namespace: str) -> Iterator[str]:
    """A Mutating- and a ValidatingWebhookConfiguration of one name, without a caBundle, as the chart renders them."""
    name = unique("vigil-tls")
    admission = client.AdmissionregistrationV1Api(kube.api)
    body: Any = {"metadata": {"name": name}, "webhooks": hooks(name, namespace)}  # the client takes a dict too
    admission.create_mutating_webhook_configuration(body)
    admission.create_validating_webhook_configuration(body)
    try:
        yield name
    finally:
        admission.delete_mutating_webhook_configuration(name)
        admission.delete_validating_webhook_configuration(name)


def set_bundles(kube: Kube, name: str, pem: bytes) -> None:
    """Both configurations' caBundle, as the chart renders it."""
    admission = client.AdmissionregistrationV1Api(kube.api)
    bundle = base64.b64encode(pem).decode()
    for read, replace in (
        (admission.read_mutating_webhook_configuration, admission.replace_mutating_webhook_configuration),
        (admission.read_validating_webhook_configuration, admission.replace_validating_webhook_configuration),
    ):
        found: Any = read(name)
        for hook in found.webhooks:
            hook.client_config.ca_bundle = bundle
        replace(name, found)


def bundles(kube: Kube, name: str) -> list[bytes]:
    admission = client.AdmissionregistrationV1Api(kube.api)
    found: list[Any] = [
        admission.read_mutating_webhook_configuration(name),
        admission.read_validating_webhook_configuration(name),
    ]
    return [base64.b64decode(w.client_config.ca_bundle or "") for c in found for w in c.webhooks or []]


def fingerprints(pem: bytes) -> list[str]:
    return [pki.fingerprint(c) for c in x509.load_pem_x509_certificates(pem)] if pem else []


def secret_state(kube: Kube, namespace: str, name: str) -> tuple[dict[str, bytes], dict[str, str]]:
    secret = kube.core.read_namespaced_secret(name, namespace)
    data = {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}
    return data, dict((secret.metadata.annotations if secret.metadata else None) or {})


def signer_of(served: bytes, trusted: bytes) -> str:
    """The fingerprint of the trusted CA that signed the served certificate (DER)."""
    cert = x509.load_der_x509_certificate(served)
    for ca in x509.load_pem_x509_certificates(trusted):
        try:
            cert.verify_directly_issued_by(ca)
        except (ValueError, TypeError, InvalidSignature):
            continue
        return pki.fingerprint(ca)
    raise AssertionError("no trusted CA signed the served certificate")


async def handshake(port: int, host: str, trusted: bytes) -> bytes:
    """One TLS handshake trusting exactly `trusted` (PEM); the server's certificate (DER)."""
    context = ssl.create_default_context(cadata=trusted.decode())
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname=host)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        await reader.read(2)
    finally:
        writer.close()
    return bytes(der)


State = tuple[list[str], str]
"""(the CAs a configuration trusts, the one that signed what is served), fingerprints."""


async def watch_handshakes(
    kube: Kube,
    tls: WebhookTLS,
    context: ssl.SSLContext,
    *,
    names: tuple[str, str, str],
    done: Callable[[dict[str, str], list[State]], bool],
) -> list[State]:
    """Serve with `context` (reloaded in place) while the plan's steps run, and handshake every 0.1 s trusting
    exactly what each configuration holds: each state seen, until `done` (the Secret's annotations, the states).
    `names`: the namespace, the operator's Secret, the configurations."""
    namespace, secret, configuration = names
    host = f"{SERVICE}.{namespace}.svc"

    async def answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"ok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    tasks = [asyncio.create_task(tls.reload(context)), asyncio.create_task(tls.keep(Always()))]
    seen: list[State] = []
    try:
        deadline = asyncio.get_running_loop().time() + bound(10 * PROPAGATION + 20)
        while asyncio.get_running_loop().time() < deadline:
            trusted = await asyncio.to_thread(bundles, kube, configuration)
            for bundle in dict.fromkeys(trusted):  # an apiserver calls through either: each must trust it
                served = await handshake(port, host, bundle)  # fails if this configuration does not trust it
            if len(set(trusted)) == 1:  # not between the two configurations' patches (two objects, two writes)
                state = (fingerprints(trusted[0]), signer_of(served, trusted[0]))
                if not seen or seen[-1] != state:
                    seen.append(state)
            _, annotations = await asyncio.to_thread(secret_state, kube, namespace, secret)
            if seen and done(annotations, seen):
                return seen
            await asyncio.sleep(0.1)
        raise AssertionError(f"the rotation did not finish: {seen}")
    finally:
        for task in tasks:
            task.cancel()
        server.close()


def operator_tls(
    kube: Kube, namespace: str, configuration: str, tmp_path: Path, adopt: str | None = None
) -> tuple[WebhookTLS, KubeApi, str]:
    """The chart's empty Secret, and the operator's WebhookTLS on it (taking over `adopt`, if given)."""
    secret = unique("vigil-webhook-certs")
    kube.core.create_namespaced_secret(namespace, {"metadata": {"name": secret}, "type": "Opaque"})
    host = f"{SERVICE}.{namespace}.svc"
    settings = OperatorSettings(
        namespace=namespace, webhook_secret=secret, webhook_configuration=configuration, webhook_adopt_secret=adopt,
        webhook_cert_propagation=PROPAGATION, state_dir=tmp_path, webhook_host=host,
    )  # fmt: skip
    loader: Any = config
    api = KubeApi(loader.new_client_from_config(config_file=str(kube.kubeconfig)))
    return WebhookTLS(api, settings, host), api, secret


def test_a_forced_rotation_never_serves_a_certificate_the_configurations_do_not_trust(
    kube: Kube, namespace: str, configuration: str, tmp_path: Path
) -> None:
    tls, api, secret = operator_tls(kube, namespace, configuration, tmp_path)
    host = f"{SERVICE}.{namespace}.svc"

    async def scenario() -> list[State]:
        context = await tls.context()
        data, _ = secret_state(kube, namespace, secret)
        assert set(data) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
        assert bundles(kube, configuration) == [data["ca.crt"]] * 2  # published at once: nothing to rotate from
        leaf = x509.load_pem_x509_certificate(data["tls.crt"])
        names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert set(names.get_values_for_type(x509.DNSName)) >= {SERVICE, host, f"{host}.cluster.local"}
        patch = {"metadata": {"annotations": {ROTATE_ANNOTATION: "now"}}}
        await asyncio.to_thread(kube.core.patch_namespaced_secret, secret, namespace, patch)
        return await watch_handshakes(
            kube, tls, context, names=(namespace, secret, configuration),
            done=lambda annotations, seen: annotations.get(ROTATED_FOR) == "now" and len(seen[-1][0]) == 1
            and len(seen) > 1,
        )  # fmt: skip

    started = datetime.datetime.now(datetime.UTC)
    try:
        seen = asyncio.run(scenario())
    finally:
        api.close()
    old, new = seen[0][0][0], seen[-1][0][0]
    # trusted {old} serving old → {old, new} serving old → {old, new} serving new → {new} serving new
    assert seen == [([old], old), ([old, new], old), ([old, new], new), ([new], new)], seen
    print(f"rotation from {old[:12]} to {new[:12]} in {(datetime.datetime.now(datetime.UTC) - started).seconds} s")


def test_taking_over_the_chart_s_certificate_never_serves_one_the_configurations_do_not_trust(
    kube: Kube, namespace: str, configuration: str, tmp_path: Path
) -> None:
    """A release switching from the chart's certificate (the chart's own render of it: RSA, from Helm's genCA) to
    the operator's: the configurations trust the chart's CA, the operator's Secret is empty. The operator serves the
    chart's certificate on, with a CA of its own beside the chart's, then moves to its own."""
    tools = Tools.from_binaries(kube.cluster.binaries, kube.kubeconfig, tmp_path / "helm")
    release = SERVICE.removesuffix("-webhook")  # the chart's Service is then SERVICE, as the hooks call
    rendered = tools.template(release, namespace, {"webhook": {"operatorCertificates": {"enabled": False}}}, "chart")
    (chart_secret,) = find(rendered, "Secret", f"{release}-webhook-tls")
    body = {"metadata": {"name": f"{release}-webhook-tls"}, "type": "kubernetes.io/tls", "data": chart_secret["data"]}
    kube.core.create_namespaced_secret(namespace, body)
    chart_ca = base64.b64decode(chart_secret["data"]["ca.crt"])
    set_bundles(kube, configuration, chart_ca)
    tls, api, secret = operator_tls(kube, namespace, configuration, tmp_path, adopt=f"{release}-webhook-tls")

    async def scenario() -> list[State]:
        context = await tls.context()
        return await watch_handshakes(
            kube, tls, context, names=(namespace, secret, configuration),
            done=lambda _, seen: len(seen[-1][0]) == 1 and seen[-1][0][0] != fingerprints(chart_ca)[0],
        )  # fmt: skip

    try:
        seen = asyncio.run(scenario())
    finally:
        api.close()
    (chart,), own = fingerprints(chart_ca), seen[-1][0][0]
    # the chart's certificate served on beside a new CA → the new CA's certificate → the chart's CA dropped
    assert seen == [([chart, own], chart), ([chart, own], own), ([own], own)], seen
    data, _ = secret_state(kube, namespace, secret)
    assert x509.load_pem_x509_certificate(data["tls.crt"]) != x509.load_pem_x509_certificate(
        base64.b64decode(chart_secret["data"]["tls.crt"])
    )


def test_a_replica_of_the_earlier_rollout_is_seen_until_it_is_gone(kube: Kube, namespace: str, tmp_path: Path) -> None:
    """`_old_replicas` on the real apiserver: pods of the operator's Deployment (the chart's selector labels) with
    another `pod-template-hash` than this replica's are the earlier rollout's, until deleted or ended; another
    release's pods do not count; without a pod of its own the replica cannot tell (None)."""
    selector = {"app.kubernetes.io/name": "vigil", "app.kubernetes.io/instance": "rel",
                "app.kubernetes.io/component": "operator"}  # fmt: skip

    def pod(name: str, template: str, **labels: str) -> None:
        spec = {"nodeName": "nowhere", "containers": [{"name": "c", "image": "vigil-operator:0"}]}
        body = {"metadata": {"name": name, "labels": {**selector, "pod-template-hash": template, **labels}},
                "spec": spec}  # fmt: skip
        kube.core.create_namespaced_pod(namespace, body)

    pod("me", "new")
    pod("sibling", "new")
    pod("other-release", "old", **{"app.kubernetes.io/instance": "another"})
    settings = OperatorSettings(namespace=namespace, webhook_secret="s", webhook_configuration="c", state_dir=tmp_path)
    loader: Any = config
    api = KubeApi(loader.new_client_from_config(config_file=str(kube.kubeconfig)))

    async def seen() -> tuple[bool | None, bool | None]:
        mine, unplaced = WebhookTLS(api, settings, "h", "me"), WebhookTLS(api, settings, "h")
        return await mine._old_replicas(), await unplaced._old_replicas()  # noqa: SLF001

    try:
        assert asyncio.run(seen()) == (False, None)
        pod("earlier", "old")
        assert asyncio.run(seen()) == (True, None)
        kube.core.patch_namespaced_pod_status("earlier", namespace, {"status": {"phase": "Failed"}})  # serves nothing
        assert asyncio.run(seen()) == (False, None)
        kube.core.delete_namespaced_pod("earlier", namespace)
        pod("earlier-2", "old")
        assert asyncio.run(seen()) == (True, None)
    finally:
        api.close()
