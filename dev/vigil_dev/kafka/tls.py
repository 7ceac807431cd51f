"""TLS material for the dev stack: a throwaway CA, a broker certificate for the addresses clients use, a client one."""

from collections.abc import Sequence
from pathlib import Path

from vigil_dev.kafka.config import TlsFiles
from vigil_operator import pki


def write_tls_files(directory: Path, hosts: Sequence[str] = ("localhost", "127.0.0.1")) -> TlsFiles:
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
    ca = pki.new_ca("vigil-dev-ca")
    broker = pki.issue(ca, "broker", hosts=tuple(dict.fromkeys(hosts)))
    client = pki.issue(ca, "vigil-client")
    files.ca.write_bytes(ca.cert_pem())
    pki.write_secret(files.broker_bundle, broker.key_pem() + broker.cert_pem())
    files.client_cert.write_bytes(client.cert_pem())
    pki.write_secret(files.client_key, client.key_pem())
    return files
