"""One connection model for every vigil component, mapped to both Kafka libraries.

Secrets are read from files (mounted Secrets) at the moment a client is configured, never stored in the
model's repr and never logged.
"""

import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from vigil_core import settings
from vigil_core.errors import ConfigError
from vigil_core.settings import Unset

ENV_PREFIX = "VIGIL_KAFKA_"

#: librdkafka configuration as confluent-kafka's type hints spell it.
ClientConfig = dict[str, str | int | float | bool]


class Protocol(StrEnum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


class Mechanism(StrEnum):
    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"


#: host:port[,host:port...]: the one definition of a bootstrap list (the CRD's pattern is this string).
BOOTSTRAP_SERVERS_PATTERN: Final = r"^\s*[^,\s][^,]*:[0-9]+\s*(,\s*[^,\s][^,]*:[0-9]+\s*)*$"


def bootstrap_servers(value: str) -> str:
    """`value` if it is host:port[,host:port...] (a ConsumerGroup's spec and the connection settings both check it
    here); ValueError naming what is expected otherwise."""
    if not re.fullmatch(BOOTSTRAP_SERVERS_PATTERN, value):
        shown = value if len(value) <= 200 else value[:200] + "..."
        raise ValueError(f"expected host:port[,host:port...], got {shown!r}")
    return value


class KafkaConnection(BaseModel):
    """How to reach and authenticate to the cluster (env: `VIGIL_KAFKA_<FIELD>` upper-cased)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    bootstrap_servers: str
    """host:port[,host:port...] of any brokers of the cluster."""
    security_protocol: Protocol = Protocol.PLAINTEXT
    """How to talk to the brokers: TLS (SSL), SASL authentication, both or neither."""
    sasl_mechanism: Mechanism | None = None
    """The SASL mechanism (needed with SASL)."""
    sasl_username: str | None = None
    """The SASL user (needed with SASL)."""
    sasl_password_file: Path | None = None
    """File holding the SASL password (a mounted Secret; needed with SASL); read when a client is built, never
    logged."""
    ssl_ca_file: Annotated[Path | None, Unset("the system store")] = None
    """CA bundle to verify the brokers with."""
    ssl_cert_file: Path | None = None
    """Client certificate for mutual TLS (with the key)."""
    ssl_key_file: Path | None = None
    """Client key for mutual TLS (with the certificate)."""
    ssl_check_hostname: bool = True
    """Verify the broker's certificate names the host we dialled."""

    @field_validator("bootstrap_servers")
    @classmethod
    def _hosts_with_ports(cls, value: str) -> str:
        return bootstrap_servers(value)

    @model_validator(mode="after")
    def _consistent(self) -> "KafkaConnection":
        sasl = self.security_protocol in (Protocol.SASL_PLAINTEXT, Protocol.SASL_SSL)
        if sasl and (self.sasl_mechanism is None or not self.sasl_username or not self.sasl_password_file):
            raise ValueError(
                f"security_protocol {self.security_protocol} needs sasl_mechanism, sasl_username and sasl_password_file"
            )
        if (self.ssl_cert_file is None) != (self.ssl_key_file is None):
            raise ValueError("ssl_cert_file and ssl_key_file go together (mutual TLS)")
        return self

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol in (Protocol.SSL, Protocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in (Protocol.SASL_PLAINTEXT, Protocol.SASL_SSL)

    def _password(self) -> str:
        assert self.sasl_password_file is not None
        try:
            return self.sasl_password_file.read_text().strip()
        except OSError as exc:
            raise ConfigError(
                f"{ENV_PREFIX}SASL_PASSWORD_FILE: cannot read {self.sasl_password_file}: {exc.strerror}"
            ) from exc

    def confluent_config(self) -> ClientConfig:
        """librdkafka properties (confluent-kafka Consumer, Producer, AdminClient)."""
        conf: ClientConfig = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol.value,
        }
        if self.uses_sasl:
            assert self.sasl_mechanism is not None
            assert self.sasl_username is not None
            conf |= {
                "sasl.mechanism": self.sasl_mechanism.value,
                "sasl.username": self.sasl_username,
                "sasl.password": self._password(),
            }
        if self.uses_ssl:
            conf["ssl.endpoint.identification.algorithm"] = "https" if self.ssl_check_hostname else "none"
            if self.ssl_ca_file is not None:
                conf["ssl.ca.location"] = str(self.ssl_ca_file)
            if self.ssl_cert_file is not None and self.ssl_key_file is not None:
                conf["ssl.certificate.location"] = str(self.ssl_cert_file)
                conf["ssl.key.location"] = str(self.ssl_key_file)
        return conf

    def kafka_python_config(self) -> dict[str, Any]:
        """kafka-python keyword arguments (KafkaAdminClient and its connections)."""
        conf: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap_servers.split(","),
            "security_protocol": self.security_protocol.value,
        }
        if self.uses_sasl:
            assert self.sasl_mechanism is not None
            conf |= {
                "sasl_mechanism": self.sasl_mechanism.value,
                "sasl_plain_username": self.sasl_username,
                "sasl_plain_password": self._password(),
            }
        if self.uses_ssl:
            conf["ssl_check_hostname"] = self.ssl_check_hostname
            if self.ssl_ca_file is not None:
                conf["ssl_cafile"] = str(self.ssl_ca_file)
            if self.ssl_cert_file is not None:
                conf["ssl_certfile"] = str(self.ssl_cert_file)
                conf["ssl_keyfile"] = str(self.ssl_key_file)
        return conf

    def to_env(self) -> dict[str, str]:
        """The `VIGIL_KAFKA_*` variables that `from_env` reads back into an equal model."""
        values = self.model_dump(mode="json", exclude_none=True)
        return {
            f"{ENV_PREFIX}{name.upper()}": str(value).lower() if isinstance(value, bool) else str(value)
            for name, value in values.items()
        }

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "KafkaConnection":
        """Read `VIGIL_KAFKA_*` (an empty one is unset); a bad or missing value raises ConfigError naming the
        variable."""
        return settings.load(cls, prefix=ENV_PREFIX, env=env)
