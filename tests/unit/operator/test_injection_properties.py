"""Properties of the injection decision over generated pods and ConsumerGroups:

- idempotent: injecting the result again changes nothing (webhook reinvocation, a re-applied pod);
- an injected pod has exactly one sidecar; a pod not injected gets no changes at all;
- the app's own env entries, probes and other fields are never changed or removed, only appended to; its init
  containers keep their order (behind a native sidecar);
- the input is never mutated and the same input gives the same output;
- the sidecar would start (the kubelet's env rules, then its own `config.load`) with the group's id, the pod's
  name, the action in force and the same instance id the consumer container resolves;
- the webhook refuses to inject exactly when the sidecar would refuse to start on the group's timings.
"""

import copy
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from vigil_core.errors import ConfigError
from vigil_core.kafka.security import KafkaConnection
from vigil_core.liveness import StallAction
from vigil_dev.testing import pod_env as kubelet
from vigil_dev.testing.pod_env import Context
from vigil_operator.domain import injection
from vigil_operator.domain.injection import InjectionConfig, inject
from vigil_operator.domain.spec import ConsumerGroupSpec, SpecError, parse_spec
from vigil_sidecar import config
from vigil_sidecar.config import SidecarSettings

CFG = InjectionConfig(operator_namespace="vigil-system")
POD_IP = "127.20.0.9"
SECRETS = {"s": {"u": "user-from-secret", "p": "pw"}}
ALLOWED_VARS = (
    {f"VIGIL_{n.upper()}" for n in SidecarSettings.model_fields}
    | {f"VIGIL_KAFKA_{n.upper()}" for n in KafkaConnection.model_fields}
    | {"VIGIL_POD_IP"}
)

# -- strategies ---------------------------------------------------------------------------------------------------

ENV_NAMES = [
    "KAFKA_CLIENT_ID",
    "KAFKA_GROUP_INSTANCE_ID",
    "VIGIL_POD_IP",
    "VIGIL_BEACON_ADDR",
    "VIGIL_NAMESPACE",
    "VIGIL_POD_NAME",
    "POD",
    "ZONE",
]
env_entry = st.builds(
    lambda name, how: {"name": name, **how},
    st.sampled_from(ENV_NAMES),
    st.one_of(
        st.sampled_from(["1", "$(POD)", "$(ZONE)-$(POD)", "$$(POD)", "$(VIGIL_POD_NAME)", "x$(UNSET)"]).map(
            lambda v: {"value": v}
        ),
        st.sampled_from(["metadata.name", "metadata.namespace", "status.podIP"]).map(
            lambda p: {"valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": p}}}
        ),
        st.just({"valueFrom": {"secretKeyRef": {"name": "s", "key": "u"}}}),
    ),
)
probe = st.sampled_from(
    [
        {"httpGet": {"path": "/healthz", "port": 8080}},
        {"tcpSocket": {"port": 8080}, "periodSeconds": 5},
        {"exec": {"command": ["true"]}},
    ]
)


@st.composite
def app_container(draw: st.DrawFn, name: str) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "vigil-test/app", "command": ["python", "-m", "app"]}
    if draw(st.booleans()):
        c["env"] = draw(st.lists(env_entry, max_size=4))
    for kind in ("livenessProbe", "readinessProbe"):
        if draw(st.booleans()):
            c[kind] = draw(probe)
    if draw(st.booleans()):
        c["ports"] = [{"containerPort": draw(st.sampled_from([8080, 7390, 7391]))}]
    return c


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(1, 3))
    names = draw(st.permutations(["app", "worker", "proxy"]))[:count]
    if draw(st.integers(0, 9)) == 0:
        names[-1] = "vigil-sidecar"
    containers = [draw(app_container(n)) for n in names]
    labels = {"app": "x"} | ({"vigil.dev/inject": draw(st.sampled_from(["true", "true", "true", "true", "false"]))})
    annotations = {"vigil.dev/consumer-group": "orders"} if draw(st.integers(0, 9)) else {}
    if draw(st.integers(0, 9)) == 0:
        annotations["vigil.dev/injected"] = "old"
    meta: dict[str, Any] = {"labels": labels, "annotations": annotations}
    meta |= {"generateName": "orders-abc-"} if draw(st.booleans()) else {"name": "orders-0"}
    spec: dict[str, Any] = {"containers": containers}
    if draw(st.booleans()):
        spec["initContainers"] = [
            {"name": n, "image": "busybox", "command": ["true"]} for n in draw(st.sampled_from([["init"], ["a", "b"]]))
        ]
    if draw(st.booleans()):
        spec["volumes"] = [{"name": "vigil-kafka-0", "emptyDir": {}}]
    if draw(st.integers(0, 9)) == 0:
        spec["hostNetwork"] = True
    if draw(st.booleans()):
        spec["serviceAccountName"] = draw(st.sampled_from(["default", "orders"]))
    return {"metadata": meta, "spec": spec}


KAFKAS = [
    {"bootstrapServers": "k:9092"},
    {"bootstrapServers": "k:9093", "securityProtocol": "SSL", "tls": {"caSecretRef": {"name": "s", "key": "ca"}}},
    {
        "bootstrapServers": "k:9094,k2:9094",
        "securityProtocol": "SASL_SSL",
        "clusterName": "main",
        "sasl": {
            "mechanism": "SCRAM-SHA-256",
            "usernameSecretRef": {"name": "s", "key": "u"},
            "passwordSecretRef": {"name": "s", "key": "p"},
        },
        "tls": {
            "certSecretRef": {"name": "t", "key": "c"},
            "keySecretRef": {"name": "t", "key": "k"},
            "checkHostname": False,
        },
    },
]
CLIENTS = [
    {},
    {"sessionTimeoutMs": 10000, "heartbeatIntervalMs": 1000, "maxPollIntervalMs": 60000},
    {"groupProtocol": "consumer", "maxPollIntervalMs": 120000},
]


@st.composite
def groups(draw: st.DrawFn) -> ConsumerGroupSpec:
    static = draw(st.booleans())
    liveness: dict[str, Any] = {"stallTimeoutSeconds": draw(st.sampled_from([5, 12.5, 30, 60]))}
    if (action := draw(st.sampled_from([None, "leave-group", "restart", "alert"]))) is not None:
        liveness["action"] = action
    liveness["signal"] = draw(st.sampled_from(["beacon", "progress"]))
    body = {
        "groupId": draw(st.sampled_from(["orders", "a.b-c_d"])),
        "kafka": draw(st.sampled_from(KAFKAS)),
        "workload": {"kind": "StatefulSet" if static else "Deployment", "name": "orders"},
        "membership": "static" if static else "dynamic",
        "liveness": liveness,
        "client": draw(st.sampled_from(CLIENTS)),
        "sidecar": {"mode": draw(st.sampled_from(["auto", "native", "container"]))},
    }
    return parse_spec(body)


@st.composite
def cases(draw: st.DrawFn) -> tuple[dict[str, Any], str, ConsumerGroupSpec | None, InjectionConfig, bool]:
    namespace = draw(st.sampled_from(["shop"] * 8 + ["kube-system", "vigil-system"]))
    group = draw(st.one_of(groups(), groups(), groups(), st.none()))
    cfg = InjectionConfig(operator_namespace="vigil-system", reject_unknown_group=draw(st.booleans()))
    return draw(pods()), namespace, group, cfg, draw(st.booleans())


# -- helpers ------------------------------------------------------------------------------------------------------


def apply(pod: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(pod)
    for section, values in changes.items():
        out.setdefault(section, {}).update(copy.deepcopy(values))
    return out


def every_container(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*(pod["spec"].get("initContainers") or []), *pod["spec"]["containers"]]


def admitted(pod: dict[str, Any], namespace: str) -> dict[str, Any]:
    out = copy.deepcopy(pod)
    out["metadata"] |= {"name": out["metadata"].get("name", "orders-abc-x1"), "namespace": namespace, "uid": "u"}
    return out


def kubelet_env(pod: dict[str, Any], c: dict[str, Any]) -> dict[str, str]:
    ctx = Context(pod_ip=POD_IP, host_ip="127.0.0.1", node="n", secrets=SECRETS)
    return kubelet.resolve_env(c, pod, ctx)


# -- properties ---------------------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(cases())
def test_injection_is_idempotent_additive_and_pure(
    case: tuple[dict[str, Any], str, ConsumerGroupSpec | None, InjectionConfig, bool],
) -> None:
    pod, namespace, group, cfg, native = case
    before = copy.deepcopy(pod)
    decision = inject(pod, namespace, group, "orders", cfg, native_supported=native)
    assert pod == before, "the input was mutated"
    assert inject(pod, namespace, group, "orders", cfg, native_supported=native) == decision
    assert all("\n" not in w and len(w) <= 250 for w in decision.warnings)
    if not decision.injected:
        assert decision.changes == {}
        return
    out = apply(pod, decision.changes)
    # exactly one sidecar, every original container still there in order
    assert [c["name"] for c in every_container(out)].count("vigil-sidecar") == 1
    assert [c for c in every_container(out) if c["name"] != "vigil-sidecar"].__len__() == len(every_container(pod))
    assert [c for c in out["spec"].get("initContainers") or [] if c["name"] != "vigil-sidecar"] == (
        pod["spec"].get("initContainers") or []
    )
    # app containers: own env entries and probes untouched, only appended to
    for original, result in zip(pod["spec"]["containers"], out["spec"]["containers"], strict=False):
        own_env = original.get("env") or []
        assert result.get("env", [])[: len(own_env)] == own_env
        appended = [e["name"] for e in result.get("env", [])[len(own_env) :]]
        assert not set(appended) & {e["name"] for e in own_env}
        assert len(appended) == len(set(appended))
        for key, value in original.items():
            if key != "env":
                assert result[key] == value, key
        assert set(result) - set(original) <= {"env", "livenessProbe"}
    # volumes: the pod's own kept, ours added with free names
    assert (out["spec"].get("volumes") or [])[: len(pod["spec"].get("volumes") or [])] == (
        pod["spec"].get("volumes") or []
    )
    volume_names = [v["name"] for v in out["spec"].get("volumes") or []]
    assert len(volume_names) == len(set(volume_names))
    # idempotent
    again = inject(out, namespace, group, "orders", cfg, native_supported=native)
    assert again.changes == {}
    assert not again.injected


@settings(max_examples=300, deadline=None)
@given(pods(), groups(), st.booleans())
def test_the_injected_sidecar_starts_with_the_groups_settings_and_the_apps_identity(
    pod: dict[str, Any], group: ConsumerGroupSpec, native: bool
) -> None:
    pod["metadata"]["labels"]["vigil.dev/inject"] = "true"
    pod["metadata"]["annotations"] = {"vigil.dev/consumer-group": "orders"}
    pod["spec"].pop("hostNetwork", None)
    pod["spec"]["containers"] = [c for c in pod["spec"]["containers"] if c["name"] != "vigil-sidecar"]
    assume(pod["spec"]["containers"])
    decision = inject(pod, "shop", group, "orders", CFG, native_supported=native)
    assert decision.injected
    out = admitted(apply(pod, decision.changes), "shop")
    sidecar = next(c for c in every_container(out) if c["name"] == "vigil-sidecar")
    assert {e["name"] for e in sidecar["env"] if e["name"].startswith("VIGIL_")} <= ALLOWED_VARS
    settings_, connection, _ = config.load(kubelet_env(out, sidecar))
    assert (settings_.group_id, settings_.pod_name, settings_.namespace) == (
        group.group_id,
        out["metadata"]["name"],
        "shop",
    )
    assert (settings_.beacon_bind, settings_.health_bind) == (POD_IP, POD_IP)
    assert connection.bootstrap_servers == group.kafka.bootstrap_servers
    apps = pod["spec"]["containers"]
    consumer = next((i for i, c in enumerate(apps) if _sets(c, "KAFKA_GROUP_INSTANCE_ID")), 0)
    if group.membership.value != "static":
        consumer = 0
    expected_action = group.liveness.effective_action
    if expected_action is StallAction.RESTART and "livenessProbe" in apps[consumer]:
        expected_action = StallAction.ALERT
    assert settings_.stall_action is expected_action
    result_consumer = out["spec"]["containers"][consumer]
    if expected_action is StallAction.RESTART:
        assert result_consumer["livenessProbe"] == injection.app_probe(CFG)
    app_env = kubelet_env(out, result_consumer)
    if not (_sets(apps[consumer], "VIGIL_POD_IP") or _sets(apps[consumer], "VIGIL_BEACON_ADDR")):
        assert app_env["VIGIL_BEACON_ADDR"] == f"{settings_.beacon_bind}:{settings_.beacon_port}"
    if group.membership.value == "static" and not any("cannot reproduce" in w for w in decision.warnings):
        assert settings_.instance_id == app_env["KAFKA_GROUP_INSTANCE_ID"]
    if group.membership.value != "static":
        assert settings_.instance_id is None


def _sets(c: dict[str, Any], name: str) -> bool:
    return any(e["name"] == name for e in c.get("env") or [])


timing_ms = st.one_of(st.none(), st.sampled_from([500, 1000, 3000, 6000, 10000, 45000, 60000, 300000]))


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["classic", "consumer"]),
    timing_ms,
    timing_ms,
    timing_ms,
    st.sampled_from([1, 5, 60, 400]),
)
def test_refusing_to_inject_agrees_with_the_sidecar_refusing_to_start(
    protocol: str, session: int | None, heartbeat: int | None, max_poll: int | None, stall: float
) -> None:
    client: dict[str, Any] = {"groupProtocol": protocol}
    for key, value in (
        ("sessionTimeoutMs", session),
        ("heartbeatIntervalMs", heartbeat),
        ("maxPollIntervalMs", max_poll),
    ):
        if value is not None:
            client[key] = value
    body = {
        "groupId": "g",
        "kafka": {"bootstrapServers": "k:9092"},
        "workload": {"kind": "Deployment", "name": "d"},
        "liveness": {"stallTimeoutSeconds": stall},
        "client": client,
    }
    try:
        group = parse_spec(body)
    except SpecError:
        assume(False)
        return
    pod = admitted({"metadata": {}, "spec": {"containers": []}}, "shop")
    env = kubelet_env(pod, injection.sidecar_container(group, CFG))
    refusal = injection.sidecar_refusal(group)
    if refusal is None:
        settings_, _, _ = config.load(env)
        assert settings_.timings().protocol.value == protocol
    else:
        with pytest.raises(ConfigError):
            config.load(env)
