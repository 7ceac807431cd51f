"""The webhook's injection decision: which pods, where the sidecar goes, and what it and the app are given.

The strongest check here runs the injected pod through the fakelet's kubelet rules (`resolve_env`: downward API,
`$(VAR)` expansion, Secret references) and then through the sidecar's own `config.load`: the sidecar would start
with exactly the settings the ConsumerGroup states, and the app would beacon to where the sidecar listens.
"""

import copy
import json
from typing import Any

import pytest

from vigil_core.budget.ledger import lease_name
from vigil_core.kafka.security import KafkaConnection, Mechanism, Protocol
from vigil_core.liveness import StallAction
from vigil_core.version import VERSION
from vigil_dev.testing import pod_env as kubelet
from vigil_dev.testing.pod_env import Context
from vigil_operator.domain import injection
from vigil_operator.domain.injection import Decision, InjectionConfig, inject, native_sidecars_supported
from vigil_operator.domain.spec import ConsumerGroupSpec, parse_spec
from vigil_sidecar import config
from vigil_sidecar.config import SidecarSettings

CFG = InjectionConfig(operator_namespace="vigil-system", allowed_sidecar_images=("*",))
"""Any `spec.sidecar.image` allowed: the allow-lists have their own tests (test_tenancy.py)."""
NS = "shop"
POD_IP = "127.20.0.7"
SECRETS = {"kafka-user": {"username": "svc-orders"}, "kafka-pass": {"password": "pw"}, "kafka-tls": {}}


# -- builders -----------------------------------------------------------------------------------------------------


def group(**fields: Any) -> ConsumerGroupSpec:
    body: dict[str, Any] = {
        "groupId": "orders",
        "kafka": {"bootstrapServers": "kafka-0.kafka:9092"},
        "workload": {"kind": "Deployment", "name": "orders"},
    }
    return parse_spec(_merge(body, fields))


def static_group(**fields: Any) -> ConsumerGroupSpec:
    return group(membership="static", workload={"kind": "StatefulSet", "name": "orders"}, **fields)


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def container(name: str = "app", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": "vigil-test/consumer", "command": ["python", "-m", "consumer"], **fields}


def pod(
    *containers: dict[str, Any],
    name: str | None = "orders-0",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **spec_fields: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "namespace": NS,
        "labels": {"app": "orders", "vigil.dev/inject": "true"} if labels is None else labels,
        "annotations": {"vigil.dev/consumer-group": "orders"} if annotations is None else annotations,
    }
    if name is None:
        meta["generateName"] = "orders-7d9f8c-"
    else:
        meta["name"] = name
    return {"metadata": meta, "spec": {"containers": list(containers) or [container()], **spec_fields}}


def run(
    p: dict[str, Any], g: ConsumerGroupSpec | None = None, *, native: bool = True, cfg: InjectionConfig = CFG
) -> Decision:
    return inject(p, NS, g if g is not None else group(), "orders", cfg, native_supported=native)


def apply(p: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """What the kopf adapter's JSON patch does: replace each changed top-level value whole."""
    out = copy.deepcopy(p)
    for section, values in changes.items():
        out.setdefault(section, {}).update(copy.deepcopy(values))
    return out


def injected(p: dict[str, Any], g: ConsumerGroupSpec | None = None, **kw: Any) -> dict[str, Any]:
    decision = run(p, g, **kw)
    assert decision.allowed, decision
    assert decision.injected, decision
    return apply(p, decision.changes)


def sidecar_of(p: dict[str, Any]) -> dict[str, Any]:
    every = [*(p["spec"].get("initContainers") or []), *p["spec"]["containers"]]
    found = [c for c in every if c["name"] == "vigil-sidecar"]
    assert len(found) == 1
    return found[0]


def app_of(p: dict[str, Any], name: str = "app") -> dict[str, Any]:
    return next(c for c in p["spec"]["containers"] if c["name"] == name)


def names(c: dict[str, Any]) -> list[str]:
    return [e["name"] for e in c.get("env") or []]


def admitted(p: dict[str, Any], name: str = "orders-0", namespace: str = NS) -> dict[str, Any]:
    """The pod as the kubelet sees it: named (generateName resolved), with a uid and the defaulted fieldRefs."""
    out = copy.deepcopy(p)
    out["metadata"] |= {"name": name, "namespace": namespace, "uid": "u-1"}
    return out


def kubelet_env(p: dict[str, Any], c: dict[str, Any]) -> dict[str, str]:
    ctx = Context(pod_ip=POD_IP, host_ip="10.77.0.1", node="node-real", secrets=SECRETS)
    return kubelet.resolve_env(c, p, ctx)


def started(p: dict[str, Any]) -> tuple[SidecarSettings, KafkaConnection]:
    """The sidecar's settings as it would load them in this (admitted) pod."""
    settings, connection, _ = config.load(kubelet_env(p, sidecar_of(p)))
    return settings, connection


# -- which pods ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "p", "namespace"),
    [
        ("unlabelled", pod(labels={"app": "orders"}), NS),
        ("label not true", pod(labels={"vigil.dev/inject": "True"}), NS),
        ("no group annotation", pod(annotations={}), NS),
        ("kube-system", pod(), "kube-system"),
        ("operator namespace", pod(), "vigil-system"),
        ("sidecar container", pod(container(), container("vigil-sidecar")), NS),
        ("sidecar init container", pod(initContainers=[container("vigil-sidecar", restartPolicy="Always")]), NS),
        (
            "stamped",
            pod(annotations={"vigil.dev/consumer-group": "orders", "vigil.dev/injected": "vigil-sidecar:0.0.9"}),
            NS,
        ),
    ],
)
def test_pods_left_alone_get_no_changes_and_no_warning(case: str, p: dict[str, Any], namespace: str) -> None:
    decision = inject(p, namespace, group(), "orders", CFG, native_supported=True)
    assert decision == Decision(), case


def test_host_network_pods_are_allowed_unchanged_with_a_warning() -> None:
    decision = run(pod(hostNetwork=True))
    assert (decision.allowed, decision.changes, decision.injected) == (True, {}, False)
    assert len(decision.warnings) == 1
    assert "hostNetwork" in decision.warnings[0]


def test_an_unknown_group_is_allowed_with_a_warning_naming_it_and_the_namespace() -> None:
    decision = inject(pod(), NS, None, None, CFG, native_supported=True)
    assert (decision.allowed, decision.changes, decision.injected) == (True, {}, False)
    assert len(decision.warnings) == 1
    assert "'orders'" in decision.warnings[0]
    assert NS in decision.warnings[0]


def test_an_unknown_group_is_refused_when_configured() -> None:
    cfg = InjectionConfig(operator_namespace="vigil-system", reject_unknown_group=True)
    decision = inject(pod(), NS, None, None, cfg, native_supported=True)
    assert (decision.allowed, decision.changes, decision.warnings) == (False, {}, [])
    assert "'orders'" in decision.message
    assert NS in decision.message


def test_timings_the_sidecar_refuses_are_not_injected() -> None:
    bad = group(client={"groupProtocol": "consumer", "heartbeatIntervalMs": 1000})
    decision = run(pod(), bad)
    assert (decision.allowed, decision.changes, decision.injected) == (True, {}, False)
    assert "heartbeat.interval.ms" in decision.warnings[0]
    # the sidecar agrees: with those settings it would exit at start
    env = {"VIGIL_GROUP_ID": "orders", "VIGIL_POD_NAME": "p", "VIGIL_KAFKA_BOOTSTRAP_SERVERS": "k:9092"}
    env |= {"VIGIL_GROUP_PROTOCOL": "consumer", "VIGIL_HEARTBEAT_INTERVAL_SECONDS": "1"}
    with pytest.raises(config.ConfigError):
        config.load(env)


# -- the plain case -----------------------------------------------------------------------------------------------


def test_a_plain_pod_gets_a_native_sidecar_first_and_its_app_wired_to_it() -> None:
    init = container("migrate", command=["python", "-c", "pass"])
    p = pod(initContainers=[init])
    decision = run(p)
    assert decision.allowed
    assert decision.injected
    assert decision.warnings == []
    assert set(decision.changes) == {"metadata", "spec"}
    assert set(decision.changes["spec"]) == {"initContainers", "containers"}
    assert decision.changes["metadata"] == {
        "annotations": {"vigil.dev/consumer-group": "orders", "vigil.dev/injected": f"vigil-sidecar:{VERSION}"}
    }
    out = apply(p, decision.changes)
    sidecar, rest = out["spec"]["initContainers"][0], out["spec"]["initContainers"][1:]
    assert (sidecar["name"], sidecar["restartPolicy"], rest) == ("vigil-sidecar", "Always", [init])
    assert sidecar["image"] == f"vigil-sidecar:{VERSION}"
    assert sidecar["resources"] == {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}
    assert "readinessProbe" not in sidecar
    assert "startupProbe" not in sidecar  # the app must not wait on vigil to start
    # the Pod Security `restricted` standard, and a read-only root (the sidecar writes no file)
    assert sidecar["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert sidecar["livenessProbe"]["httpGet"] == {"path": "/livez", "port": 7391}
    assert {(port["containerPort"], port["protocol"]) for port in sidecar["ports"]} == {
        (7390, "TCP"),
        (7390, "UDP"),
        (7391, "TCP"),
    }
    assert names(sidecar)[:3] == ["VIGIL_POD_NAME", "VIGIL_NAMESPACE", "VIGIL_POD_IP"]
    assert "volumeMounts" not in sidecar
    assert "volumes" not in decision.changes["spec"]
    app = app_of(out)
    assert names(app) == ["VIGIL_POD_IP", "VIGIL_BEACON_ADDR", "VIGIL_BEACON_URL", "KAFKA_CLIENT_ID"]
    assert "livenessProbe" not in app  # leave-group is the default action
    assert [c["name"] for c in out["spec"]["containers"]] == ["app"]


def test_the_sidecar_would_start_with_exactly_the_groups_settings() -> None:
    g = group(
        kafka={"clusterName": "main"},
        liveness={"stallTimeoutSeconds": 12.5, "cooldownSeconds": 40, "maxConcurrentEvictions": 2},
        client={"sessionTimeoutMs": 10000, "heartbeatIntervalMs": 1500, "maxPollIntervalMs": 60000},
    )
    p = admitted(injected(pod(), g))
    settings, connection = started(p)
    assert (settings.group_id, settings.pod_name, settings.namespace) == ("orders", "orders-0", NS)
    assert settings.instance_id is None
    assert settings.stall_action is StallAction.LEAVE_GROUP
    assert (settings.stall_timeout_seconds, settings.cooldown, settings.max_concurrent_evictions) == (12.5, 40, 2)
    assert (settings.session_timeout_seconds, settings.heartbeat_interval_seconds) == (10, 1.5)
    assert settings.max_poll_interval_seconds == 60
    assert settings.timings() == g.timings()
    assert (settings.beacon_bind, settings.health_bind) == (POD_IP, POD_IP)
    assert (settings.beacon_port, settings.health_port) == (7390, 7391)
    assert settings.budget_lease == lease_name("orders")
    assert (settings.events_topic, settings.cluster) == ("vigil.events", "main")
    assert connection == KafkaConnection(bootstrap_servers="kafka-0.kafka:9092")
    app = kubelet_env(p, app_of(p))
    assert app["VIGIL_BEACON_ADDR"] == f"{settings.beacon_bind}:{settings.beacon_port}"
    assert app["VIGIL_BEACON_URL"] == f"http://{POD_IP}:7390/v1/beacon"
    assert app["KAFKA_CLIENT_ID"] == settings.pod_name  # identity basis 3: client.id = pod name


def test_defaults_are_left_to_the_sidecar_and_optional_values_not_emitted() -> None:
    sidecar = sidecar_of(injected(pod()))
    assert "VIGIL_COOLDOWN_SECONDS" not in names(sidecar)
    assert "VIGIL_SESSION_TIMEOUT_SECONDS" not in names(sidecar)
    assert "VIGIL_CLUSTER" not in names(sidecar)
    settings, _ = started(admitted(injected(pod())))
    assert (settings.cooldown, settings.session_timeout_seconds, settings.cluster) == (120, 45, "kafka")


def test_a_deployment_pod_named_only_by_generate_name_gets_its_name_from_the_downward_api() -> None:
    p = pod(name=None)
    out = injected(p)
    assert "orders-7d9f8c-" not in json.dumps(run(p).changes)  # nothing taken from the admission-time object
    named = admitted(out, name="orders-7d9f8c-x2kq")
    settings, _ = started(named)
    assert settings.pod_name == "orders-7d9f8c-x2kq"
    assert kubelet_env(named, app_of(named))["KAFKA_CLIENT_ID"] == "orders-7d9f8c-x2kq"


def test_sidecar_image_and_resources_come_from_the_group_when_given() -> None:
    resources = {"limits": {"memory": "256Mi"}}
    sidecar = sidecar_of(
        injected(pod(), group(sidecar={"image": "reg.example/vigil-sidecar:1.2", "resources": resources}))
    )
    assert (sidecar["image"], sidecar["resources"]) == ("reg.example/vigil-sidecar:1.2", resources)
    stamp = run(pod(), group(sidecar={"image": "x/vigil-sidecar:1.2"})).changes["metadata"]["annotations"]
    assert stamp["vigil.dev/injected"] == "x/vigil-sidecar:1.2"
    # an empty resources block states nothing: the operator's default applies
    assert sidecar_of(injected(pod(), group(sidecar={"resources": {}})))["resources"] == CFG.sidecar_resources


def test_env_names_the_app_sets_itself_are_kept_not_duplicated() -> None:
    own = [{"name": "KAFKA_CLIENT_ID", "value": "mine"}, {"name": "VIGIL_BEACON_ADDR", "value": "10.0.0.1:1"}]
    out = injected(pod(container(env=own)))
    app = app_of(out)
    assert app["env"][:2] == own
    assert names(app) == ["KAFKA_CLIENT_ID", "VIGIL_BEACON_ADDR", "VIGIL_POD_IP", "VIGIL_BEACON_URL"]


def test_every_app_container_is_wired_but_not_init_containers() -> None:
    init = container("migrate")
    out = injected(pod(container("a"), container("b"), initContainers=[init]), native=False)
    assert [c["name"] for c in out["spec"]["containers"]] == ["a", "b", "vigil-sidecar"]
    assert "KAFKA_CLIENT_ID" in names(app_of(out, "a"))
    assert "KAFKA_CLIENT_ID" in names(app_of(out, "b"))
    assert out["spec"]["initContainers"] == [init]


# -- native, container, fallback ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "supported", "native", "warned"),
    [
        ("auto", True, True, False),
        ("auto", False, False, False),
        ("native", True, True, False),
        ("native", False, False, True),
        ("container", True, False, False),
        ("container", False, False, False),
    ],
)
def test_where_the_sidecar_goes(mode: str, supported: bool, native: bool, warned: bool) -> None:
    decision = run(pod(), group(sidecar={"mode": mode}), native=supported)
    out = apply(pod(), decision.changes)
    in_init = [c["name"] for c in out["spec"].get("initContainers") or []]
    in_main = [c["name"] for c in out["spec"]["containers"]]
    if native:
        assert (in_init, in_main) == (["vigil-sidecar"], ["app"])
        assert sidecar_of(out)["restartPolicy"] == "Always"
    else:
        assert (in_init, in_main) == ([], ["app", "vigil-sidecar"])
        assert "restartPolicy" not in sidecar_of(out)
        assert "initContainers" not in decision.changes["spec"]
    assert any("native" in w for w in decision.warnings) == warned


@pytest.mark.parametrize(
    ("versions", "supported"),
    [
        (["v1.35.8"], True),
        (["v1.29.0-eks-123", "v1.30.1+k3s1"], True),
        (["v1.35.8", "v1.28.9"], False),
        (["v2.0.0"], True),
        (["v1.29"], True),
        ([], False),
        (["garbage"], False),
        (["v1.35.8", ""], False),
    ],
)
def test_native_sidecars_need_every_kubelet_at_1_29(versions: list[str], supported: bool) -> None:
    assert native_sidecars_supported(versions) is supported


# -- static membership --------------------------------------------------------------------------------------------


def test_a_static_group_gets_a_namespaced_instance_id_in_app_and_sidecar() -> None:
    out = injected(pod(), static_group())
    app = app_of(out)
    assert names(app)[-3:] == ["VIGIL_NAMESPACE", "VIGIL_POD_NAME", "KAFKA_GROUP_INSTANCE_ID"]
    for namespace in ("shop", "shop-staging"):
        p = admitted(out, namespace=namespace)
        settings, _ = started(p)
        assert settings.instance_id == f"{namespace}-orders-0"
        assert kubelet_env(p, app_of(p))["KAFKA_GROUP_INSTANCE_ID"] == settings.instance_id


@pytest.mark.parametrize(
    ("own", "expected"),
    [
        ([{"name": "KAFKA_GROUP_INSTANCE_ID", "value": "fixed-1"}], "fixed-1"),
        (
            [
                {
                    "name": "KAFKA_GROUP_INSTANCE_ID",
                    "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
                }
            ],
            "orders-0",
        ),
        (
            [
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "ZONE", "value": "a"},
                {"name": "KAFKA_GROUP_INSTANCE_ID", "value": "$(ZONE)-$(POD)"},
            ],
            "a-orders-0",
        ),
        (
            [
                {
                    "name": "VIGIL_POD_NAME",
                    "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
                },
                {"name": "KAFKA_GROUP_INSTANCE_ID", "value": "id-$(VIGIL_POD_NAME)"},
            ],
            "id-orders-0",
        ),
        (
            [
                {"name": "USER", "valueFrom": {"secretKeyRef": {"name": "kafka-user", "key": "username"}}},
                {"name": "KAFKA_GROUP_INSTANCE_ID", "value": "$(USER)-$$(x)"},
            ],
            "svc-orders-$(x)",
        ),
    ],
)
def test_an_app_set_instance_id_is_kept_and_the_sidecar_resolves_the_same(
    own: list[dict[str, Any]], expected: str
) -> None:
    decision = run(pod(container(env=own)), static_group())
    assert decision.warnings == []
    out = admitted(apply(pod(container(env=own)), decision.changes))
    app = app_of(out)
    assert app["env"][: len(own)] == own
    assert names(app).count("KAFKA_GROUP_INSTANCE_ID") == 1
    assert "VIGIL_NAMESPACE" not in names(app)
    settings, _ = started(out)
    assert settings.instance_id == expected
    assert kubelet_env(out, app)["KAFKA_GROUP_INSTANCE_ID"] == expected


def test_an_instance_id_the_sidecar_cannot_reproduce_is_warned_about() -> None:
    own = [{"name": "KAFKA_GROUP_INSTANCE_ID", "value": "$(FROM_CONFIGMAP)-1"}]
    decision = run(pod(container(env=own, envFrom=[{"configMapRef": {"name": "ids"}}])), static_group())
    assert decision.injected
    assert any("FROM_CONFIGMAP" in w for w in decision.warnings)


def test_an_app_defining_vigil_namespace_its_own_way_is_warned_about() -> None:
    own = [{"name": "VIGIL_NAMESPACE", "value": "custom"}]
    decision = run(pod(container(env=own)), static_group())
    assert any("VIGIL_NAMESPACE" in w and "cannot reproduce" in w for w in decision.warnings)
    out = admitted(apply(pod(container(env=own)), decision.changes))
    assert kubelet_env(out, app_of(out))["KAFKA_GROUP_INSTANCE_ID"] == "custom-orders-0"  # the app's choice stands


def test_static_the_first_container_that_sets_the_instance_id_is_the_consumer() -> None:
    own = [{"name": "KAFKA_GROUP_INSTANCE_ID", "value": "worker-id"}]
    g = static_group(liveness={"action": "restart"})
    out = admitted(injected(pod(container("proxy"), container("worker", env=own)), g))
    settings, _ = started(out)
    assert settings.instance_id == "worker-id"
    assert "KAFKA_GROUP_INSTANCE_ID" not in names(app_of(out, "proxy"))
    assert "livenessProbe" in app_of(out, "worker")  # the restart probe goes to the consumer
    assert "livenessProbe" not in app_of(out, "proxy")


def test_static_with_several_containers_and_no_instance_id_injects_all_and_warns() -> None:
    decision = run(pod(container("a"), container("b")), static_group())
    assert any("several consumers" in w for w in decision.warnings)
    out = apply(pod(container("a"), container("b")), decision.changes)
    assert "KAFKA_GROUP_INSTANCE_ID" in names(app_of(out, "a"))
    assert "KAFKA_GROUP_INSTANCE_ID" in names(app_of(out, "b"))


# -- Kafka security -----------------------------------------------------------------------------------------------


def test_sasl_ssl_secrets_are_mounted_as_files_in_the_sidecar_only() -> None:
    g = group(
        kafka={
            "securityProtocol": "SASL_SSL",
            "sasl": {
                "mechanism": "SCRAM-SHA-512",
                "usernameSecretRef": {"name": "kafka-user", "key": "username"},
                "passwordSecretRef": {"name": "kafka-pass", "key": "password"},
            },
            "tls": {
                "caSecretRef": {"name": "kafka-tls", "key": "ca.crt"},
                "certSecretRef": {"name": "kafka-tls", "key": "tls.crt"},
                "keySecretRef": {"name": "kafka-tls", "key": "tls.key"},
                "checkHostname": False,
            },
        }
    )
    p = pod(volumes=[{"name": "vigil-kafka-0", "emptyDir": {}}])
    decision = run(p, g)
    volumes = decision.changes["spec"]["volumes"]
    assert volumes == [
        {"name": "vigil-kafka-0", "emptyDir": {}},
        {
            "name": "vigil-kafka-1",
            "secret": {"secretName": "kafka-pass", "items": [{"key": "password", "path": "password"}]},
        },
        {
            "name": "vigil-kafka-2",
            "secret": {
                "secretName": "kafka-tls",
                "items": [{"key": k, "path": k} for k in ("ca.crt", "tls.crt", "tls.key")],
            },
        },
    ]
    out = admitted(apply(p, decision.changes))
    assert sidecar_of(out)["volumeMounts"] == [
        {"name": "vigil-kafka-1", "mountPath": "/etc/vigil/kafka/kafka-pass", "readOnly": True},
        {"name": "vigil-kafka-2", "mountPath": "/etc/vigil/kafka/kafka-tls", "readOnly": True},
    ]
    assert "volumeMounts" not in app_of(out)
    _, connection = started(out)
    assert connection == KafkaConnection(
        bootstrap_servers="kafka-0.kafka:9092",
        security_protocol=Protocol.SASL_SSL,
        sasl_mechanism=Mechanism.SCRAM_SHA_512,
        sasl_username="svc-orders",
        sasl_password_file="/etc/vigil/kafka/kafka-pass/password",
        ssl_ca_file="/etc/vigil/kafka/kafka-tls/ca.crt",
        ssl_cert_file="/etc/vigil/kafka/kafka-tls/tls.crt",
        ssl_key_file="/etc/vigil/kafka/kafka-tls/tls.key",
        ssl_check_hostname=False,
    )
    username = next(e for e in sidecar_of(out)["env"] if e["name"] == "VIGIL_KAFKA_SASL_USERNAME")
    assert username["valueFrom"] == {"secretKeyRef": {"name": "kafka-user", "key": "username"}}


def test_an_inline_sasl_username_is_a_plain_value() -> None:
    g = group(
        kafka={
            "securityProtocol": "SASL_PLAINTEXT",
            "sasl": {
                "mechanism": "PLAIN",
                "username": "u",
                "passwordSecretRef": {"name": "kafka-pass", "key": "password"},
            },
        }
    )
    _, connection = started(admitted(injected(pod(), g)))
    assert (connection.sasl_username, str(connection.sasl_password_file)) == (
        "u",
        "/etc/vigil/kafka/kafka-pass/password",
    )
    assert "VIGIL_KAFKA_SSL_CHECK_HOSTNAME" not in names(sidecar_of(injected(pod(), g)))


# -- action restart -----------------------------------------------------------------------------------------------


def test_restart_gives_the_app_a_probe_on_the_sidecar_that_outlasts_its_restart() -> None:
    out = admitted(injected(pod(container("app"), container("other")), group(liveness={"action": "restart"})))
    probe = app_of(out)["livenessProbe"]
    assert probe["httpGet"] == {"path": "/v1/probe/app", "port": 7391}
    assert probe["periodSeconds"] * probe["failureThreshold"] > CFG.sidecar_restart_seconds
    assert "livenessProbe" not in app_of(out, "other")
    settings, _ = started(out)
    assert settings.stall_action is StallAction.RESTART
    assert probe["httpGet"]["port"] == settings.health_port  # a numeric port: a named one the app lacks is Unknown


@pytest.mark.parametrize("restart_seconds", [0, 9.9, 10, 30, 45, 300])
def test_the_app_probe_threshold_outlasts_any_sidecar_restart(restart_seconds: float) -> None:
    probe = injection.app_probe(InjectionConfig(operator_namespace="v", sidecar_restart_seconds=restart_seconds))
    assert probe["periodSeconds"] * probe["failureThreshold"] > restart_seconds
    assert (probe["periodSeconds"] * (probe["failureThreshold"] - 1)) <= restart_seconds


def test_restart_keeps_an_existing_probe_and_the_sidecar_only_alerts() -> None:
    own = {"tcpSocket": {"port": 8080}, "periodSeconds": 5}
    decision = run(pod(container(livenessProbe=own)), group(liveness={"action": "restart"}))
    assert any("livenessProbe" in w and "alerts" in w for w in decision.warnings)
    out = admitted(apply(pod(container(livenessProbe=own)), decision.changes))
    assert app_of(out)["livenessProbe"] == own
    settings, _ = started(out)
    assert settings.stall_action is StallAction.ALERT


def test_other_actions_never_touch_an_existing_probe() -> None:
    own = {"httpGet": {"path": "/healthz", "port": 8080}}
    out = injected(pod(container(livenessProbe=own)), group(liveness={"action": "leave-group"}))
    assert app_of(out)["livenessProbe"] == own


# -- warnings -----------------------------------------------------------------------------------------------------


def test_an_app_port_equal_to_the_sidecars_is_warned_about() -> None:
    decision = run(pod(container(ports=[{"containerPort": 7391}])))
    assert any("7391" in w for w in decision.warnings)


def test_a_service_account_without_the_budget_lease_is_warned_about() -> None:
    assert any("ServiceAccount other" in w for w in run(pod(serviceAccountName="other")).warnings)
    g = group(workload={"serviceAccountName": "orders"})
    assert run(pod(serviceAccountName="orders"), g).warnings == []
    assert any("automount" in w for w in run(pod(automountServiceAccountToken=False)).warnings)


# -- contracts ----------------------------------------------------------------------------------------------------

SPEC_VARIANTS = [
    group(),
    group(kafka={"clusterName": "c"}, liveness={"cooldownSeconds": 9, "signal": "progress"}),
    group(client={"groupProtocol": "consumer", "maxPollIntervalMs": 90000}),
    group(client={"sessionTimeoutMs": 10000, "heartbeatIntervalMs": 1000, "maxPollIntervalMs": 60000}),
    static_group(liveness={"action": "restart"}),
    group(
        kafka={
            "securityProtocol": "SASL_SSL",
            "sasl": {"mechanism": "PLAIN", "username": "u", "passwordSecretRef": {"name": "s", "key": "p"}},
            "tls": {
                "caSecretRef": {"name": "s", "key": "ca"},
                "certSecretRef": {"name": "t", "key": "c"},
                "keySecretRef": {"name": "t", "key": "k"},
            },
        }
    ),
]
SETTINGS_VARS = {f"VIGIL_{name.upper()}" for name in SidecarSettings.model_fields}
KAFKA_VARS = {f"VIGIL_KAFKA_{name.upper()}" for name in KafkaConnection.model_fields}
HELPER_VARS = {"VIGIL_POD_IP"}  # expanded by other values only


@pytest.mark.parametrize("g", SPEC_VARIANTS)
def test_every_sidecar_variable_is_a_setting_the_sidecar_reads(g: ConsumerGroupSpec) -> None:
    emitted = {name for name in names(injection.sidecar_container(g, CFG)) if name.startswith("VIGIL_")}
    assert emitted - SETTINGS_VARS - KAFKA_VARS == HELPER_VARS
    assert "VIGIL_GROUP_ID" in emitted


def test_the_app_helper_and_sidecar_agree_on_the_beacon_variable() -> None:
    from vigil_sidecar.client import consumer

    assert consumer.BEACON_ADDR_ENV in names(app_of(injected(pod())))


def test_the_same_input_gives_the_same_output_and_is_not_mutated() -> None:
    p = pod(container(env=[{"name": "X", "value": "1"}]), volumes=[{"name": "v", "emptyDir": {}}])
    before = copy.deepcopy(p)
    g = SPEC_VARIANTS[-1]
    first = run(p, g)
    assert p == before
    assert run(p, g) == first
    assert json.dumps(first.changes, sort_keys=False) == json.dumps(run(copy.deepcopy(p), g).changes, sort_keys=False)


def test_injecting_the_result_again_changes_nothing() -> None:
    for g in SPEC_VARIANTS:
        for native in (True, False):
            out = injected(pod(), g, native=native)
            assert run(out, g, native=native) == Decision()


def test_warnings_are_single_short_lines() -> None:
    long_group = group(client={"groupProtocol": "consumer", "heartbeatIntervalMs": 1000})
    decisions = [run(pod(serviceAccountName="x" * 300)), run(pod(), long_group)]
    for decision in decisions:
        for warning in decision.warnings:
            assert "\n" not in warning
            assert len(warning) <= 250


def test_a_static_group_with_bridging_starts_a_bridging_sidecar() -> None:
    g = static_group(liveness={"bridge": {"enabled": True, "maxBridgeSeconds": 90, "onForeignRebalance": "hold"}})
    settings, _ = started(injected(admitted(pod()), g))
    assert (settings.bridge_enabled, settings.max_bridge_seconds, settings.on_foreign_rebalance) == (True, 90, "hold")
    assert settings.instance_id == f"{NS}-orders-0"


def test_a_kip848_static_group_with_bridging_starts_a_bridging_sidecar_the_sidecar_accepts() -> None:
    g = static_group(client={"groupProtocol": "consumer"}, liveness={"bridge": {"enabled": True}})
    settings, _ = started(injected(admitted(pod()), g))
    assert (settings.bridge_enabled, settings.group_protocol.value) == (True, "consumer")
    assert settings.heartbeat_interval_seconds is None  # a KIP-848 client refuses heartbeat.interval.ms


@pytest.mark.parametrize(
    "fields",
    [
        {"liveness": {"bridge": {"enabled": True}}},  # dynamic: nothing to bridge
        {"membership": "static", "liveness": {"signal": "progress", "bridge": {"enabled": True}}},  # no helper
    ],
)
def test_bridging_is_left_off_where_it_cannot_work(fields: dict[str, Any]) -> None:
    g = (static_group if fields.get("membership") else group)(**{k: v for k, v in fields.items() if k != "membership"})
    settings, _ = started(injected(admitted(pod()), g))
    assert settings.bridge_enabled is False


@pytest.mark.parametrize("policy", ["Ignore", "Fail"])
def test_a_failure_to_decide_answers_as_the_failure_policy_says(policy: str) -> None:
    """kopf answers a handler's exception with `allowed: false`: a deny even under Ignore. The webhook answers
    instead as the apiserver would for an operator that cannot answer."""
    decision = injection.failed(policy, "KeyError: 'kubelet'")
    assert decision.changes == {}
    if policy == "Ignore":
        assert decision.allowed
        assert len(decision.warnings) == 1
        assert "not injected" in decision.warnings[0]
        assert "KeyError: 'kubelet'" in decision.warnings[0]
    else:
        assert not decision.allowed
        assert "KeyError: 'kubelet'" in decision.message
        assert decision.warnings == []
    assert all(len(line) <= injection.WARNING_MAX for line in [*decision.warnings, decision.message])


# -- image pull secrets -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("configured", "own", "expected"),
    [
        ((), None, None),
        (("regcred",), None, ["regcred"]),
        (("regcred",), [], ["regcred"]),
        (("regcred", "mirror"), [{"name": "app-pull"}], ["app-pull", "regcred", "mirror"]),
        (("regcred", "mirror"), [{"name": "mirror"}], ["mirror", "regcred"]),
        (("regcred",), [{"name": "regcred"}], None),
        (("regcred", "regcred"), None, ["regcred"]),
    ],
    ids=["none-configured", "added", "empty-list", "after-the-pods-own", "only-missing", "all-present", "once"],
)
def test_the_operators_pull_secrets_are_added_to_the_pod_unless_it_names_them(
    configured: tuple[str, ...], own: list[dict[str, str]] | None, expected: list[str] | None
) -> None:
    cfg = InjectionConfig(operator_namespace="vigil-system", image_pull_secrets=configured)
    p = pod() if own is None else pod(imagePullSecrets=own)
    decision = run(p, cfg=cfg)
    assert decision.injected
    if expected is None:
        assert "imagePullSecrets" not in decision.changes["spec"]
    else:
        assert decision.changes["spec"]["imagePullSecrets"] == [{"name": n} for n in expected]
    out = apply(p, decision.changes)
    assert run(out, cfg=cfg) == Decision()  # reinvocation and re-applied pods: nothing more


def test_pods_left_alone_get_no_pull_secrets() -> None:
    cfg = InjectionConfig(operator_namespace="vigil-system", image_pull_secrets=("regcred",))
    assert run(pod(labels={"app": "orders"}), cfg=cfg) == Decision()
    refused = run(pod(), group(client={"groupProtocol": "consumer", "heartbeatIntervalMs": 1000}), cfg=cfg)
    assert (refused.changes, refused.injected) == ({}, False)  # a group the sidecar would refuse: not injected
