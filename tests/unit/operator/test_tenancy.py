"""A ConsumerGroup's writer cannot make the operator run an image or read a Secret the platform did not allow."""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vigil_operator.domain.injection import InjectionConfig, inject
from vigil_operator.domain.spec import ConsumerGroupSpec, parse_spec
from vigil_operator.domain.tenancy import Tenancy, refusals, secret_refs

OWN = "registry.example/vigil-sidecar:0.3.0"


def spec(image: str | None = None, **kafka: Any) -> ConsumerGroupSpec:
    raw: dict[str, Any] = {
        "groupId": "orders",
        "kafka": {"bootstrapServers": "kafka:9092", **kafka},
        "workload": {"kind": "StatefulSet", "name": "orders"},
    }
    if image is not None:
        raw["sidecar"] = {"image": image}
    return parse_spec(raw)


SASL = {"securityProtocol": "SASL_SSL",
        "sasl": {"mechanism": "SCRAM-SHA-512", "usernameSecretRef": {"name": "kafka-user", "key": "user"},
                 "passwordSecretRef": {"name": "kafka-user", "key": "password"}},
        "tls": {"caSecretRef": {"name": "kafka-ca", "key": "ca.crt"}}}  # fmt: skip


@pytest.mark.parametrize(
    ("image", "patterns", "refused"),
    [
        (None, (), False),  # the operator's own image
        (OWN, (), False),  # named explicitly
        ("evil.example/miner:latest", (), True),
        ("registry.example/vigil-sidecar:0.3.1", (), True),  # another tag is another image
        ("registry.example/vigil-sidecar:0.3.1", ("registry.example/vigil-sidecar:*",), False),
        ("registry.example/vigil-sidecar@sha256:ab", ("registry.example/vigil-sidecar@sha256:*",), False),
        ("Registry.example/vigil-sidecar:0.3.1", ("registry.example/vigil-sidecar:*",), True),  # case counts
        ("registry.example/other:1", ("registry.example/vigil-sidecar:*",), True),
    ],
)
def test_the_sidecar_image_is_the_operators_own_or_allowed_by_a_pattern(
    image: str | None, patterns: tuple[str, ...], refused: bool
) -> None:
    found = refusals(spec(image), Tenancy(OWN, allowed_images=patterns))
    assert bool(found) is refused
    if refused:
        (line,) = found
        assert line.startswith("spec.sidecar.image: ")
        assert repr(image) in line
        assert OWN in line


def test_any_secret_of_the_namespace_without_patterns_only_matching_ones_with_them() -> None:
    assert refusals(spec(**SASL), Tenancy(OWN)) == []
    found = refusals(spec(**SASL), Tenancy(OWN, allowed_secrets=("kafka-ca", "app-*")))
    assert [line.split(":")[0] for line in found] == [
        "spec.kafka.sasl.usernameSecretRef.name",
        "spec.kafka.sasl.passwordSecretRef.name",
    ]
    assert all("'kafka-user'" in line for line in found)
    assert refusals(spec(**SASL), Tenancy(OWN, allowed_secrets=("kafka-*",))) == []


def kafka_at(servers: str) -> ConsumerGroupSpec:
    raw = spec(**SASL).model_dump(by_alias=True, exclude_none=True)
    raw["kafka"]["bootstrapServers"] = servers
    return parse_spec(raw)


# (bootstrapServers, patterns, the servers refused)
BROKERS = [
    ("evil.example:9092", (), []),  # no patterns: any broker
    ("kafka-0.kafka.svc:9093", ("kafka-*.kafka.svc:9093",), []),
    ("kafka-0.kafka.svc:9093,kafka-1.kafka.svc:9093", ("kafka-*.kafka.svc:9093",), []),
    (" kafka-0.kafka.svc:9093 , kafka-1.kafka.svc:9093 ", ("kafka-*.kafka.svc:9093",), []),  # blanks as clients
    ("KAFKA-0.Kafka.svc:9093", ("kafka-*.kafka.svc:9093",), []),  # host names in any case, as DNS
    ("kafka-0.kafka.svc:9092", ("kafka-*.kafka.svc:9093",), ["kafka-0.kafka.svc:9092"]),  # another port
    ("kafka-0.kafka.svc:9093,evil.example:9093", ("kafka-*.kafka.svc:9093",), ["evil.example:9093"]),  # one of two
    ("kafka-0.kafka.svc.evil.example:9093", ("kafka-*.kafka.svc:9093",), ["kafka-0.kafka.svc.evil.example:9093"]),
    ("b1:9093,b2:9093", ("b1:*", "b2:*"), []),
]


@pytest.mark.parametrize(("servers", "patterns", "refused"), BROKERS)
def test_every_broker_a_cr_names_matches_an_allowed_pattern(
    servers: str, patterns: tuple[str, ...], refused: list[str]
) -> None:
    found = refusals(kafka_at(servers), Tenancy(OWN, allowed_bootstrap_servers=patterns))
    if not refused:
        assert found == []
        return
    (line,) = found
    assert line.startswith("spec.kafka.bootstrapServers: ")
    assert all(repr(s) in line for s in refused)
    assert "--allowed-bootstrap-server" in line
    assert "\n" not in line


def test_every_secret_reference_is_seen() -> None:
    mtls = {"securityProtocol": "SSL", "tls": {"caSecretRef": {"name": "a", "key": "k"},
                                              "certSecretRef": {"name": "b", "key": "k"},
                                              "keySecretRef": {"name": "c", "key": "k"}}}  # fmt: skip
    assert [(f, r.name) for f, r in secret_refs(spec(**mtls))] == [
        ("spec.kafka.tls.caSecretRef", "a"),
        ("spec.kafka.tls.certSecretRef", "b"),
        ("spec.kafka.tls.keySecretRef", "c"),
    ]
    assert [f for f, _ in secret_refs(spec(**SASL))] == [
        "spec.kafka.sasl.usernameSecretRef",
        "spec.kafka.sasl.passwordSecretRef",
        "spec.kafka.tls.caSecretRef",
    ]


@given(st.text(min_size=1, max_size=40))
def test_with_no_pattern_only_the_operators_own_image_passes(image: str) -> None:
    assert (refusals(spec(image), Tenancy(OWN)) == []) is (image == OWN)


def pod() -> dict[str, Any]:
    return {"metadata": {"name": "orders-0", "labels": {"vigil.dev/inject": "true"},
                         "annotations": {"vigil.dev/consumer-group": "orders"}},
            "spec": {"containers": [{"name": "app", "image": "app:1"}]}}  # fmt: skip


def test_the_webhook_does_not_inject_what_the_allow_lists_refuse_and_says_why() -> None:
    cfg = InjectionConfig(operator_namespace="vigil-system", sidecar_image=OWN, allowed_secrets=("kafka-ca",))
    decision = inject(pod(), "shop", spec("evil.example/miner:latest"), "orders", cfg, native_supported=True)
    assert (decision.allowed, decision.changes, decision.injected) == (True, {}, False)
    (warning,) = decision.warnings
    assert "not injected" in warning
    assert "spec.sidecar.image" in warning
    decision = inject(pod(), "shop", spec(**SASL), "orders", cfg, native_supported=True)
    assert decision.changes == {}
    assert "spec.kafka.sasl.usernameSecretRef.name" in decision.warnings[0]
    allowed = InjectionConfig(operator_namespace="vigil-system", sidecar_image=OWN)
    assert inject(pod(), "shop", spec(**SASL), "orders", allowed, native_supported=True).injected


def test_the_webhook_injects_no_sidecar_that_would_take_a_secret_to_a_broker_not_allowed() -> None:
    cfg = InjectionConfig(
        operator_namespace="vigil-system", sidecar_image=OWN, allowed_bootstrap_servers=("kafka-*.kafka.svc:9093",)
    )
    decision = inject(pod(), "shop", kafka_at("evil.example:9093"), "orders", cfg, native_supported=True)
    assert (decision.allowed, decision.changes, decision.injected) == (True, {}, False)
    (warning,) = decision.warnings
    assert "spec.kafka.bootstrapServers" in warning
    assert "'evil.example:9093'" in warning
    assert inject(pod(), "shop", kafka_at("kafka-0.kafka.svc:9093"), "orders", cfg, native_supported=True).injected
