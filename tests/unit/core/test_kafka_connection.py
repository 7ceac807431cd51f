"""The connection model: env in, both libraries' settings out, one clear line for every bad variable."""

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vigil_core.errors import ConfigError
from vigil_core.kafka.security import KafkaConnection, Mechanism, Protocol


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "VIGIL_KAFKA_BOOTSTRAP_SERVERS: required, not set"),
        ({"VIGIL_KAFKA_BOOTSTRAP_SERVERS": "localhost"}, "VIGIL_KAFKA_BOOTSTRAP_SERVERS: expected host:port"),
        (
            {"VIGIL_KAFKA_BOOTSTRAP_SERVERS": "a:1", "VIGIL_KAFKA_SECURITY_PROTOCOL": "TLS"},
            "VIGIL_KAFKA_SECURITY_PROTOCOL: Input should be 'PLAINTEXT', 'SSL', 'SASL_PLAINTEXT' or 'SASL_SSL'",
        ),
        (
            {"VIGIL_KAFKA_BOOTSTRAP_SERVERS": "a:1", "VIGIL_KAFKA_SECURITY_PROTOCOL": "SASL_SSL"},
            "needs sasl_mechanism, sasl_username and sasl_password_file",
        ),
        (
            {"VIGIL_KAFKA_BOOTSTRAP_SERVERS": "a:1", "VIGIL_KAFKA_SSL_CERT_FILE": "/c.pem"},
            "ssl_cert_file and ssl_key_file go together",
        ),
        (
            {"VIGIL_KAFKA_BOOTSTRAP_SERVERS": "a:1", "VIGIL_KAFKA_SSL_CHECK_HOSTNAME": "maybe"},
            "VIGIL_KAFKA_SSL_CHECK_HOSTNAME: Input should be a valid boolean",
        ),
    ],
)
def test_bad_env_is_one_line_naming_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        KafkaConnection.from_env(env)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_sasl_password_comes_from_the_file_and_never_from_repr(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("s3cret\n")
    conn = KafkaConnection(
        bootstrap_servers="b1:9092,b2:9092",
        security_protocol=Protocol.SASL_SSL,
        sasl_mechanism=Mechanism.SCRAM_SHA_512,
        sasl_username="vigil",
        sasl_password_file=secret,
        ssl_ca_file=tmp_path / "ca.pem",
    )
    assert "s3cret" not in repr(conn)
    confluent = conn.confluent_config()
    assert confluent["sasl.password"] == "s3cret"
    assert confluent["sasl.mechanism"] == "SCRAM-SHA-512"
    assert confluent["ssl.ca.location"] == str(tmp_path / "ca.pem")
    assert confluent["ssl.endpoint.identification.algorithm"] == "https"
    python = conn.kafka_python_config()
    assert python["bootstrap_servers"] == ["b1:9092", "b2:9092"]
    assert python["sasl_plain_password"] == "s3cret"
    assert python["ssl_cafile"] == str(tmp_path / "ca.pem")
    assert python["ssl_check_hostname"] is True


def test_unreadable_password_file_names_the_variable(tmp_path: Path) -> None:
    conn = KafkaConnection(
        bootstrap_servers="b:1",
        security_protocol=Protocol.SASL_PLAINTEXT,
        sasl_mechanism=Mechanism.PLAIN,
        sasl_username="u",
        sasl_password_file=tmp_path / "missing",
    )
    with pytest.raises(ConfigError, match="VIGIL_KAFKA_SASL_PASSWORD_FILE: cannot read"):
        conn.confluent_config()


def test_plaintext_sets_no_security_keys() -> None:
    conf = KafkaConnection(bootstrap_servers="b:1").confluent_config()
    assert conf == {"bootstrap.servers": "b:1", "security.protocol": "PLAINTEXT"}


def test_hostname_verification_can_be_turned_off_for_both_libraries() -> None:
    conn = KafkaConnection(bootstrap_servers="b:1", security_protocol=Protocol.SSL, ssl_check_hostname=False)
    assert conn.confluent_config()["ssl.endpoint.identification.algorithm"] == "none"
    assert conn.kafka_python_config()["ssl_check_hostname"] is False


hosts = st.from_regex(r"[a-z][a-z0-9.-]{0,20}", fullmatch=True)
servers = st.lists(st.tuples(hosts, st.integers(1, 65535)), min_size=1, max_size=4).map(
    lambda pairs: ",".join(f"{h}:{p}" for h, p in pairs)
)


@given(
    bootstrap=servers,
    protocol=st.sampled_from(list(Protocol)),
    mechanism=st.sampled_from(list(Mechanism)),
    check_hostname=st.booleans(),
)
def test_env_round_trip(bootstrap: str, protocol: Protocol, mechanism: Mechanism, check_hostname: bool) -> None:
    sasl = protocol in (Protocol.SASL_PLAINTEXT, Protocol.SASL_SSL)
    conn = KafkaConnection(
        bootstrap_servers=bootstrap,
        security_protocol=protocol,
        sasl_mechanism=mechanism if sasl else None,
        sasl_username="user" if sasl else None,
        sasl_password_file=Path("/secrets/pw") if sasl else None,
        ssl_check_hostname=check_hostname,
    )
    assert KafkaConnection.from_env(conn.to_env()) == conn
