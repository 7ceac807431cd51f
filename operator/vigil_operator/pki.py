"""Certificate authorities made with `cryptography`: the operator's own webhook certificates (kopf's self-signed
mode needs oscrypto, broken on OpenSSL 3) and the dev stack's (Kafka TLS, the Kubernetes control plane).

One module so every part signs the same way: EC P-256 keys, SHA-256, valid from 5 minutes ago for 30 days
(a dev stack lives hours; the operator makes new material at each start — a long-lived production webhook
gets its certificate from the chart or cert-manager instead).

Every certificate names its key (SubjectKeyIdentifier) and every leaf its issuer's key (AuthorityKeyIdentifier):
during a rotation the trust bundle holds an old and a new CA of one name, and OpenSSL, choosing an issuer by name
alone, would check the new leaf against the old CA's key and fail it.
"""

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=30)


@dataclass(frozen=True)
class Issued:
    """A private key and its certificate (for a CA: self-signed)."""

    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    def key_pem(self) -> bytes:
        return key_pem(self.key)

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def write(self, cert_path: Path, key_path: Path) -> tuple[Path, Path]:
        """Write both PEM files (the key readable by the owner only); returns (cert, key)."""
        cert_path.parent.mkdir(parents=True, exist_ok=True)
        cert_path.write_bytes(self.cert_pem())
        write_secret(key_path, self.key_pem())
        return cert_path, key_path


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def public_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def write_secret(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o600)


def new_ca(common_name: str, *, validity: datetime.timedelta = VALIDITY) -> Issued:
    """A self-signed CA that may sign leaf certificates only (path length 0)."""
    key = new_key()
    builder = _builder(_name(common_name), _name(common_name), key, validity).add_extension(
        x509.BasicConstraints(ca=True, path_length=0), critical=True
    )
    return Issued(key, builder.sign(key, hashes.SHA256()))


def issue(
    ca: Issued,
    common_name: str,
    *,
    organizations: Sequence[str] = (),
    hosts: Sequence[str] = (),
    server: bool = False,
    client: bool = False,
    validity: datetime.timedelta = VALIDITY,
) -> Issued:
    """A leaf certificate signed by `ca`.

    `hosts` (IP addresses or DNS names) become the subjectAltName; `server`/`client` add the matching
    extendedKeyUsage (none if neither: then any use is allowed, which Kafka's broker-as-client relies on).
    Kubernetes reads the user from CN and the groups from O (`system:masters` = cluster admin).
    """
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    subject = x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    key = new_key()
    validity = min(validity, ca.cert.not_valid_after_utc - datetime.datetime.now(datetime.UTC))  # never past its CA
    builder = (
        _builder(subject, ca.cert.subject, key, validity)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
    )
    if hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName([_general_name(h) for h in hosts]), critical=False)
    usages = [
        oid
        for wanted, oid in ((server, ExtendedKeyUsageOID.SERVER_AUTH), (client, ExtendedKeyUsageOID.CLIENT_AUTH))
        if wanted
    ]
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    return Issued(key, builder.sign(ca.key, hashes.SHA256()))


def load(cert_path: Path, key_path: Path) -> Issued:
    """Read back what `Issued.write` wrote (e.g. a CA, to sign a webhook's serving certificate later)."""
    key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{key_path}: not an EC private key")
    return Issued(key, x509.load_pem_x509_certificate(cert_path.read_bytes()))


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def fingerprint(cert: x509.Certificate) -> str:
    """SHA-256 of the DER certificate, hex: what tells two certificates apart."""
    return cert.fingerprint(hashes.SHA256()).hex()


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey, validity: datetime.timedelta
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + validity)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)
