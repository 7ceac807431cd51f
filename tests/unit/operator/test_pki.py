"""Certificates for Kafka TLS, the control plane and webhooks: the chains and names servers check."""

import contextlib
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from vigil_dev.kafka import tls
from vigil_dev.kube import certs
from vigil_operator import pki


def sans(cert: x509.Certificate) -> list[str]:
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return [str(n.value) for n in ext]


def usages(cert: x509.Certificate) -> list[x509.ObjectIdentifier]:
    try:
        return list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    except x509.ExtensionNotFound:
        return []


def signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    key = ca.public_key()
    assert isinstance(key, ec.EllipticCurvePublicKey)
    assert cert.signature_hash_algorithm is not None
    key.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
    return cert.issuer == ca.subject


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_control_plane_pki(tmp_path: Path) -> None:
    files = certs.write_control_plane_pki(tmp_path, "10.77.64.1", "10.77.0.1")
    ca = load(files.ca_cert)
    apiserver = load(files.cert("apiserver")[0])
    assert signed_by(apiserver, ca)
    assert sans(apiserver) == [*certs.APISERVER_NAMES, "10.77.64.1", "10.77.0.1"]
    assert usages(apiserver) == [ExtendedKeyUsageOID.SERVER_AUTH]
    admin = load(files.cert("admin")[0])
    assert admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:masters"
    assert usages(admin) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    kcm = load(files.cert("controller-manager")[0])
    assert kcm.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "system:kube-controller-manager"
    assert signed_by(kcm, ca)
    # the names the apiserver's RBAC bootstrap and Node authorizer expect of the node's agents
    kubelet = load(files.cert("kubelet")[0])
    assert kubelet.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "system:node:node-real"
    assert kubelet.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:nodes"
    proxy = load(files.cert("kube-proxy")[0])
    assert proxy.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "system:kube-proxy"
    serving = load(files.cert("kubelet-serving")[0])
    assert sans(serving) == ["10.77.0.1", "node-real"]
    assert usages(serving) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert files.ca_key.stat().st_mode & 0o777 == 0o600
    assert files.sa_key.stat().st_mode & 0o777 == 0o600
    assert b"PUBLIC KEY" in files.sa_pub.read_bytes()


def test_webhook_serving_cert_passes_tls_verification(tmp_path: Path) -> None:
    files = certs.write_control_plane_pki(tmp_path / "pki", "10.77.64.1", "10.77.0.1")
    cert, key = certs.issue_serving_cert(files.ca(), tmp_path, ["127.0.0.1", "hook.svc"])
    leaf = load(cert)
    assert sans(leaf) == ["127.0.0.1", "hook.svc"]
    assert signed_by(leaf, load(files.ca_cert))
    # Python's own TLS stack accepts the pair as a server identity and the CA as a trust anchor.
    ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    ssl.create_default_context(cafile=str(files.ca_cert))


def test_kafka_tls_files_unchanged_in_shape(tmp_path: Path) -> None:
    files = tls.write_tls_files(tmp_path)
    ca = load(files.ca)
    assert ca.subject.rfc4514_string() == "CN=vigil-dev-ca"
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    broker = x509.load_pem_x509_certificates(files.broker_bundle.read_bytes())[0]
    assert sans(broker) == ["localhost", "127.0.0.1"]
    assert usages(broker) == []  # no EKU: the broker's certificate also serves inter-broker client use
    assert b"PRIVATE KEY" in files.broker_bundle.read_bytes()
    assert signed_by(load(files.client_cert), ca)
    assert files.client_key.stat().st_mode & 0o777 == 0o600
    assert tls.write_tls_files(tmp_path) == files  # created once
    assert load(files.ca) == ca


def test_load_round_trip(tmp_path: Path) -> None:
    ca = pki.new_ca("x")
    ca.write(tmp_path / "ca.crt", tmp_path / "ca.key")
    again = pki.load(tmp_path / "ca.crt", tmp_path / "ca.key")
    assert again.cert == ca.cert
    assert again.key_pem() == ca.key_pem()


def handshake(bundle: bytes, leaf: pki.Issued, host: str, tmp_path: Path) -> None:
    """One TLS handshake in memory: OpenSSL's own chain building, as an OpenSSL-based client runs it."""
    client = ssl.create_default_context(cadata=bundle.decode())
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(*leaf.write(tmp_path / "tls.crt", tmp_path / "tls.key"))
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    theirs = server.wrap_bio(to_server, to_client, server_side=True)
    ours = client.wrap_bio(to_client, to_server, server_hostname=host)
    for _ in range(4):  # a TLS 1.3 handshake takes two flights each way
        for side in (ours, theirs):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
    ours.do_handshake()  # raises SSLCertVerificationError if the chain does not verify


def test_a_rotation_bundle_of_two_cas_of_one_name_verifies_either_leaf(tmp_path: Path) -> None:
    # A rotation publishes the old and the new CA together; both carry the webhook CA's name. Without key
    # identifiers OpenSSL picks the issuer by name alone and fails the new leaf on the old CA's key.
    old, new = pki.new_ca("vigil-webhook-ca"), pki.new_ca("vigil-webhook-ca")
    for bundle in (old.cert_pem() + new.cert_pem(), new.cert_pem() + old.cert_pem()):
        for ca in (old, new):
            handshake(bundle, pki.issue(ca, "svc", hosts=["svc.ns.svc"], server=True), "svc.ns.svc", tmp_path)
