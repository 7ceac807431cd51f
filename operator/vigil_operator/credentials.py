"""The operator's own Kafka connection for a ConsumerGroup: its spec plus the referenced Secrets, written to
private files (KafkaConnection reads credentials from files, as the sidecar does from its mounted Secrets)."""

import hashlib
from pathlib import Path

from vigil_core.kafka.security import KafkaConnection
from vigil_operator.domain.spec import Kafka, SecretKeyRef
from vigil_operator.k8s.api import KubeApi


async def connection_for(kafka: Kafka, namespace: str, api: KubeApi, secrets_dir: Path) -> KafkaConnection:
    """KubeError (one line naming the Secret and key) when a referenced Secret or key is missing."""

    async def file_of(ref: SecretKeyRef | None) -> Path | None:
        if ref is None:
            return None
        data = await api.secret_value(namespace, ref.name, ref.key)
        digest = hashlib.sha256(f"{namespace}/{ref.name}/{ref.key}".encode()).hexdigest()[:16]
        path = secrets_dir / digest
        if not path.exists() or path.read_bytes() != data:
            secrets_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = path.with_suffix(".tmp")
            tmp.touch(mode=0o600)
            tmp.write_bytes(data)
            tmp.replace(path)
        return path

    sasl, tls = kafka.sasl, kafka.tls
    username: str | None = None
    if sasl is not None:
        ref = sasl.username_secret_ref
        if ref is None:
            username = sasl.username
        else:
            data = await api.secret_value(namespace, ref.name, ref.key)
            username = _username(data, f"Secret {namespace}/{ref.name} key {ref.key}")
    return KafkaConnection(
        bootstrap_servers=kafka.bootstrap_servers,
        security_protocol=kafka.security_protocol,
        sasl_mechanism=sasl.mechanism if sasl else None,
        sasl_username=username,
        sasl_password_file=await file_of(sasl.password_secret_ref if sasl else None),
        ssl_ca_file=await file_of(tls.ca_secret_ref if tls else None),
        ssl_cert_file=await file_of(tls.cert_secret_ref if tls else None),
        ssl_key_file=await file_of(tls.key_secret_ref if tls else None),
        ssl_check_hostname=tls.check_hostname if tls else True,
    )


def _username(data: bytes, source: str) -> str:
    """A SASL user name from a Secret; ValueError naming the field and the Secret when it cannot be one."""
    try:
        name = data.decode()
    except UnicodeDecodeError:
        raise ValueError(f"spec.kafka.sasl.usernameSecretRef: {source} is not UTF-8 text") from None
    if not name.strip():
        raise ValueError(f"spec.kafka.sasl.usernameSecretRef: {source} is empty")
    return name
