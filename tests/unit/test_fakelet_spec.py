"""The admitted pod → what the fakelet runs: env in the kubelet's order, downward API, references, probes."""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vigil_dev.kube.fakelet import spec
from vigil_dev.kube.fakelet.spec import Context, Exec, HttpGet, Kind, TcpSocket, Unsupported

CTX = Context(
    pod_ip="127.20.0.7",
    host_ip="127.0.0.1",
    node="node-1",
    python="/venv/python",
    base_env={"PATH": "/bin", "VIGIL_POD_IP": "127.20.0.7"},
    config_maps={"cfg": {"mode": "fast", "level": "3", "bad key": "x"}},
    secrets={"creds": {"password": "s3cret"}},
)


def pod(containers: list[dict[str, Any]], **spec_fields: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web-0",
            "namespace": "shop",
            "uid": "u-1",
            "labels": {"app": "web"},
            "annotations": {"team": "billing"},
        },
        "spec": {"nodeName": "node-1", "serviceAccountName": "sa", "containers": containers, **spec_fields},
    }


def container(**fields: Any) -> dict[str, Any]:
    return {"name": "app", "image": "vigil-test/podapp", "command": ["python", "-m", "app"], **fields}


def parse_one(**fields: Any) -> spec.Container:
    return spec.parse_pod(pod([container(**fields)]), CTX).apps[0]


def test_env_order_expansion_and_downward_api() -> None:
    env = [
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
        {"name": "TEAM", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['team']"}}},
        {"name": "ID", "value": "$(POD).$(NS)@$(IP) $(LATER) $$(POD)"},
        {"name": "LATER", "value": "x"},
    ]
    c = parse_one(env=env, args=["--id", "$(ID)"])
    values = dict(c.env)
    assert values["PATH"] == "/bin"
    assert (values["POD"], values["NS"], values["IP"], values["NODE"]) == ("web-0", "shop", "127.20.0.7", "node-1")
    assert (values["UID"], values["APP"], values["TEAM"]) == ("u-1", "web", "billing")
    assert values["ID"] == "web-0.shop@127.20.0.7 $(LATER) $(POD)"  # only earlier variables expand
    assert c.argv == ("/venv/python", "-m", "app", "--id", "web-0.shop@127.20.0.7 $(LATER) $(POD)")
    assert c.problem is None


def test_config_map_and_secret_references() -> None:
    env = [
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}},
        {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
        {"name": "OPT", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "k", "optional": True}}},
    ]
    env_from = [{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"}, {"secretRef": {"name": "gone", "optional": True}}]
    values = dict(parse_one(env=env, envFrom=env_from).env)
    assert (values["MODE"], values["PASS"], values["CFG_mode"], values["CFG_level"]) == ("fast", "s3cret", "fast", "3")
    assert "OPT" not in values
    assert "CFG_bad key" not in values  # not a valid variable name: skipped, as the kubelet does


@pytest.mark.parametrize(
    ("env", "env_from", "message"),
    [
        ([{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "k"}}}], [], 'configmap "absent"'),
        ([{"name": "X", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "nope"}}}], [], "find key nope"),
        ([], [{"secretRef": {"name": "absent"}}], 'secret "absent" not found'),
        ([{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.hostname"}}}], [], "unsupported fieldRef"),
        ([{"name": "X", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}], [], "resourceFieldRef"),
    ],
)
def test_unresolvable_references_make_the_container_wait(env: list[Any], env_from: list[Any], message: str) -> None:
    c = parse_one(env=env, envFrom=env_from)
    assert c.problem is not None
    assert c.problem[0] == "CreateContainerConfigError"
    assert message in c.problem[1]


def test_an_unknown_image_waits_with_err_image_pull() -> None:
    c = spec.parse_pod(pod([{"name": "web", "image": "nginx:1.27"}]), CTX).apps[0]
    assert c.problem is not None
    assert c.problem[0] == "ErrImagePull"
    assert "nginx:1.27" in c.problem[1]


def test_init_containers_sidecars_and_pod_fields() -> None:
    obj = pod(
        [container()],
        initContainers=[
            {"name": "init", "image": "busybox", "command": ["sh", "-c", "true"]},
            {"name": "side", "image": "vigil-sidecar:1", "restartPolicy": "Always", "args": ["--x"]},
        ],
        restartPolicy="OnFailure",
        terminationGracePeriodSeconds=7,
        readinessGates=[{"conditionType": "vigil.dev/ok"}],
    )
    p = spec.parse_pod(obj, CTX)
    assert [(c.name, c.kind) for c in p.containers] == [("init", Kind.INIT), ("side", Kind.SIDECAR), ("app", Kind.APP)]
    assert p.init[1].argv == ("/venv/python", "-m", "vigil_core.cli", "sidecar", "--x")
    assert (p.restart_policy, p.grace, p.readiness_gates) == ("OnFailure", 7.0, ("vigil.dev/ok",))


def test_probes_resolve_named_ports_against_the_pod_address() -> None:
    c = parse_one(
        ports=[{"name": "http", "containerPort": 8080}],
        livenessProbe={"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 2, "failureThreshold": 1},
        readinessProbe={"tcpSocket": {"port": "9090"}},
        startupProbe={"httpGet": {"port": "metrics"}},
    )
    assert c.liveness is not None
    assert c.liveness.action == HttpGet("127.20.0.7", 8080, "/healthz")
    assert (c.liveness.period, c.liveness.failure_threshold, c.liveness.timeout) == (2.0, 1, 1.0)
    assert c.readiness is not None
    assert c.readiness.action == TcpSocket("127.20.0.7", 9090)  # a numeric string is a number
    assert c.startup is not None
    assert c.startup.action == HttpGet("127.20.0.7", None, "/")  # undeclared name: Unknown, not failure


def test_exec_and_grpc_probes() -> None:
    c = parse_one(livenessProbe={"exec": {"command": ["python", "-c", "1"]}}, readinessProbe={"grpc": {"port": 1}})
    assert c.liveness is not None
    assert c.liveness.action == Exec(("/venv/python", "-c", "1"))
    assert c.readiness is not None
    assert c.readiness.action == Unsupported("grpc")


def test_referenced_names() -> None:
    obj = pod(
        [
            container(
                envFrom=[{"configMapRef": {"name": "a"}}],
                env=[{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
            )
        ],
        initContainers=[
            {
                "name": "i",
                "image": "busybox",
                "env": [{"name": "Y", "valueFrom": {"configMapKeyRef": {"name": "b", "key": "k"}}}],
            }
        ],
    )
    assert spec.referenced(obj) == ({"a", "b"}, {"s"})


@pytest.mark.parametrize(
    ("text", "out"),
    [
        ("$(A)", "1"),
        ("$(A)$(B)", "12"),
        ("$$(A)", "$(A)"),
        ("$$", "$"),
        ("$(MISSING)", "$(MISSING)"),
        ("$(A", "$(A"),
        ("a$", "a$"),
        ("$x", "$x"),
        ("$()", "$()"),
    ],
)
def test_expand_table(text: str, out: str) -> None:
    assert spec.expand(text, {"A": "1", "B": "2"}) == out


@given(st.text(alphabet=st.characters(blacklist_characters="$")))
def test_expand_leaves_text_without_dollars_alone(text: str) -> None:
    assert spec.expand(text, {"A": "1"}) == text


@given(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True), st.text(alphabet="abc$()", max_size=10))
def test_expand_substitutes_and_escapes(name: str, value: str) -> None:
    env = {name: value}
    assert spec.expand(f"<$({name})>", env) == f"<{value}>"
    assert spec.expand(f"$$({name})", env) == f"$({name})"
