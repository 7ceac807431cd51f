"""TLS material for the dev stack: a throwaway CA, a broker certificate for 127.0.0.1/localhost, a client one."""

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from vigil_dev.kafka.config import TlsFiles

_VALIDITY = datetime.timedelta(days=30)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _issue(
    subject: str, ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate | None, *, server: bool
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1()) if ca_cert is not None else ca_key
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(ca_cert.subject if ca_cert is not None else _name(subject))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
    )
    if ca_cert is None:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
    else:
        builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
    return key, builder.sign(ca_key, hashes.SHA256())


def write_tls_files(directory: Path) -> TlsFiles:
    """Create (once) the CA, broker bundle and client cert/key under `directory`."""
    files = TlsFiles(
        ca=directory / "ca.pem",
        broker_bundle=directory / "broker-bundle.pem",
        client_cert=directory / "client.pem",
        client_key=directory / "client-key.pem",
    )
    if all(p.exists() for p in (files.ca, files.broker_bundle, files.client_cert, files.client_key)):
        return files
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    _, ca_cert = _issue("vigil-dev-ca", ca_key, None, server=False)
    broker_key, broker_cert = _issue("broker", ca_key, ca_cert, server=True)
    client_key, client_cert = _issue("vigil-client", ca_key, ca_cert, server=False)
    pem = serialization.Encoding.PEM
    files.ca.write_bytes(ca_cert.public_bytes(pem))
    files.broker_bundle.write_bytes(_key_pem(broker_key) + broker_cert.public_bytes(pem))
    files.client_cert.write_bytes(client_cert.public_bytes(pem))
    files.client_key.write_bytes(_key_pem(client_key))
    for secret in (files.broker_bundle, files.client_key):
        secret.chmod(0o600)
    return files
