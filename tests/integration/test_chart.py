"""The Helm chart `charts/vigil` against the real helm, kubectl and kube-apiserver.

Lint (strict, and bad values refused naming the key), a values matrix rendered and accepted by the apiserver
(`kubectl apply --dry-run=server`), the operator's and the report's rendered command lines parsed by their
real CLIs, a real install / upgrade (the TLS Secret kept) / uninstall (the CRD and ConsumerGroups kept), and
the chart's webhook configurations compared with the ones the operator itself writes in managed mode.

No pod runs here (the images cannot be built on this machine and no fakelet is started): objects are checked,
never readiness.
"""

import base64
import copy
import datetime
import json
import re
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import promql_parser
import pytest
import yaml
from cryptography import x509
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from vigil_core import names
from vigil_core.budget import ledger
from vigil_core.budget.ledger import RefusalCause
from vigil_dev import ports
from vigil_dev.testing import chart
from vigil_dev.testing.chart import Obj, Tools, find
from vigil_dev.testing.images import TESTAPPS
from vigil_dev.testing.kube_fixtures import Kube, exists, install_crd, read_json
from vigil_dev.testing.operator import RunningOperator, reading, start_operator
from vigil_dev.testing.waiting import bound, wait_for
from vigil_operator import cli as operator_cli
from vigil_operator import crd, pki
from vigil_operator import settings as operator_settings
from vigil_operator.domain.injection import GROUP_ANNOTATION, INJECT_LABEL, INJECTED_ANNOTATION, SIDECAR_NAME
from vigil_operator.metrics import OperatorMetrics
from vigil_operator.settings import POD_NAME_ENV, OperatorSettings
from vigil_sidecar.metrics import Metrics
from vigil_sidecar.watchdog.state import AlertKind
from vigil_spark import cli as report_cli

DEFAULT_VALUES: dict[str, Any] = yaml.safe_load((chart.CHART / "values.yaml").read_text())
SCHEMA: dict[str, Any] = json.loads((chart.CHART / "values.schema.json").read_text())
DEFAULT_REPLICAS = DEFAULT_VALUES["operator"]["replicas"]

pytestmark = pytest.mark.kube

REPORT_ON = {"report": {"enabled": True}, "kafka": {"bootstrapServers": "kafka.shop:9092"}}
WEBHOOK_PATHS = {"inject-sidecar.vigil.dev": "/inject-sidecar", "one-cr-per-group.vigil.dev": "/one-cr-per-group"}
"""kopf serves each webhook at /<handler id> (admission.py: `inject-sidecar`, `one-cr-per-group`)."""
COMPONENT = "app.kubernetes.io/component"
KINDS_WITHOUT_CRD = {"PodMonitor", "PrometheusRule", "Certificate", "Issuer"}
"""prometheus-operator and cert-manager kinds: their CRDs are not on the local apiserver (no registry for them
here), so these documents are checked by the assertions below instead of `--dry-run=server`."""


@pytest.fixture(scope="module")
def tools(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Tools:
    return Tools.from_binaries(kube.cluster.binaries, kube.kubeconfig, tmp_path_factory.mktemp("helm"))


@pytest.fixture(scope="module")
def crd_installed(kube: Kube) -> None:
    install_crd(kube)


def merged(*layers: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for layer in layers:
        _merge(out, copy.deepcopy(layer))
    return out


def _merge(into: dict[str, Any], layer: dict[str, Any]) -> None:
    for key, value in layer.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def operator_container(objects: list[Obj]) -> Obj:
    (deployment,) = find(objects, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


# -- static checks -------------------------------------------------------------------------------------------


def test_the_charts_crds_are_the_canonical_crds_byte_for_byte() -> None:
    copied = chart.CHART / "crds" / chart.CANONICAL_CRD.name
    assert copied.read_bytes() == chart.CANONICAL_CRD.read_bytes(), f"cp {chart.CANONICAL_CRD} {copied}"
    assert sorted(p.name for p in (chart.CHART / "crds").iterdir()) == [chart.CANONICAL_CRD.name]


KUBERNETES_TYPES = {"/operator/affinity", "/report/affinity", "/webhook/namespaceSelector"}
"""Values that are Kubernetes' own types (Affinity, LabelSelector), empty by default: the schema refuses unknown keys
at their top level; below it, the apiserver checks them at install (the values matrix renders them)."""


def test_the_values_schema_refuses_unknown_keys_at_every_object_level() -> None:
    schema, values = SCHEMA, DEFAULT_VALUES
    loose: list[str] = []

    def walk(node: dict[str, Any], value: Any, path: str) -> None:
        if node.get("type") != "object":
            return
        assert isinstance(value, dict), f"{path}: values.yaml has {value!r} where the schema wants an object"
        if isinstance(node.get("additionalProperties"), dict):  # a map (labels, a nodeSelector): names are yours
            assert "properties" not in node, path
            assert node["additionalProperties"].get("type") == "string", path
            return
        if node.get("additionalProperties") is not False:
            loose.append(path or "/")
            return
        if path in KUBERNETES_TYPES:
            assert value == {}, path
            return
        # every key of values.yaml is declared, and every declared key has a default in values.yaml
        assert set(value) == set(node["properties"]), f"{path}: values {sorted(value)} vs schema"
        for key, child in node["properties"].items():
            walk(child, value[key], f"{path}/{key}")

    walk(schema, values, "")
    assert loose == []


def test_the_values_schema_checks_names_by_the_rules_vigil_checks_them_by() -> None:
    """The chart refuses at `helm install` the names the operator would refuse at start (vigil_core.names)."""
    schema = SCHEMA["properties"]
    kafka = schema["kafka"]["properties"]
    subdomains = [
        schema["operator"]["properties"]["leaderLease"]["pattern"],
        schema["imagePullSecrets"]["items"]["properties"]["name"]["pattern"],
        kafka["sasl"]["properties"]["passwordSecret"]["properties"]["name"]["pattern"].removeprefix("^$|"),
        kafka["tls"]["properties"]["caSecret"]["properties"]["name"]["pattern"].removeprefix("^$|"),
    ]
    assert subdomains == [names.DNS_SUBDOMAIN] * 4
    topic = schema["operator"]["properties"]["eventsTopic"]
    assert (topic["pattern"], topic["maxLength"], topic["not"]) == ("^$|" + names.TOPIC, 249, {"enum": [".", ".."]})


def test_lint_strict_passes_on_the_default_values(tools: Tools) -> None:
    result = tools.lint()
    assert result.returncode == 0, result.output
    assert "1 chart(s) linted, 0 chart(s) failed" in result.output


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"webhok": {"enabled": False}}, ["additional properties 'webhok' not allowed"]),
        ({"operator": {"replicas": "two"}}, ["/operator/replicas", "got string, want integer"]),
        ({"webhook": {"failurePolicy": "Sometimes"}}, ["/webhook/failurePolicy", "Ignore", "Fail"]),
        ({"operator": {"replicas": -1}}, ["/operator/replicas", "minimum"]),
        ({"operator": {"leaderLease": "Vigil_HA"}}, ["/operator/leaderLease", "does not match"]),
        ({"operator": {"eventsTopic": "vigil events"}}, ["/operator/eventsTopic", "does not match"]),
        ({"operator": {"eventsTopic": ".."}}, ["/operator/eventsTopic", "'not' failed"]),
        ({"kafka": {"tls": {"caSecret": {"name": "Kafka_CA"}}}}, ["/kafka/tls/caSecret/name", "does not match"]),
        ({"report": {"enabled": True}}, ["/kafka/bootstrapServers", "minLength"]),
        ({"kafka": {"bootstrapServers": "localhost"}}, ["/kafka/bootstrapServers", "'localhost' does not match"]),
        ({"operator": {"image": {"tag": 1}}}, ["/operator/image/tag", "got number, want string"]),
        ({"sidecar": {"image": {"digest": "sha256:abc"}}}, ["/sidecar/image/digest", "does not match"]),
        ({"image": {"registry": "reg.example.com/a b"}}, ["/image/registry", "does not match"]),
        ({"imagePullSecrets": ["regcred"]}, ["/imagePullSecrets/0", "got string, want object"]),
        (
            {"operator": {"tolerations": [{"key": "a", "operator": "Is"}]}},
            ["/operator/tolerations/0/operator", "Exists"],
        ),
        ({"report": {"affinity": {"nodeAfinity": {}}}}, ["/report/affinity", "additional properties 'nodeAfinity'"]),
        ({"webhook": {"hostNetwork": "yes"}}, ["/webhook/hostNetwork", "got string, want boolean"]),
        ({"webhook": {"namespaceSelector": {"matchLabel": {}}}}, ["/webhook/namespaceSelector", "'matchLabel'"]),
        ({"monitoring": {"prometheusRule": {"labels": {"release": 1}}}}, ["/monitoring/prometheusRule/labels/release"]),
        ({"monitoring": {"podMonitor": {"label": {}}}}, ["/monitoring/podMonitor", "additional properties 'label'"]),
        ({"operator": {"podDisruptionBudget": {"minAvailable": 0}}}, ["/operator/podDisruptionBudget/minAvailable"]),
    ],
    ids=[
        "typo-top-level-key",
        "wrong-type",
        "bad-enum",
        "negative-replicas",
        "leader-lease",
        "events-topic",
        "events-topic-dots",
        "secret-name",
        "report-without-kafka",
        "no-port",
        "nested",
        "short-digest",
        "registry-with-space",
        "pull-secret-not-an-object",
        "toleration-operator",
        "affinity-typo",
        "host-network-type",
        "namespace-selector-typo",
        "rule-label-type",
        "pod-monitor-typo",
        "budget-keeping-nothing",
    ],
)
def test_bad_values_fail_lint_with_a_message_naming_the_key(
    tools: Tools, values: dict[str, Any], expected: list[str]
) -> None:
    result = tools.lint(values, name=uuid.uuid4().hex[:8])
    assert result.returncode != 0, result.output
    for words in expected:
        assert words in result.output, result.output


def test_a_budget_keeping_every_operator_replica_is_refused_at_render(tools: Tools) -> None:
    values = {"operator": {"replicas": 2, "podDisruptionBudget": {"minAvailable": 2}}}
    result = tools.helm("template", "x", str(chart.CHART), "-f", str(tools.values_file("budget-all", values)))
    assert result.returncode != 0
    assert "operator.podDisruptionBudget.minAvailable (2) must be below operator.replicas (2)" in result.output


def test_spark_on_kubernetes_without_a_claim_is_refused_at_render(tools: Tools) -> None:
    """The executors write the tables: an emptyDir of the job's pod would leave them in pods that are deleted."""
    values = merged(REPORT_ON, {"report": {"master": "kubernetes"}})
    result = tools.helm("template", "x", str(chart.CHART), "-f", str(tools.values_file("k8s-no-claim", values)))
    assert result.returncode != 0
    assert "report.master=kubernetes needs report.persistence.existingClaim" in result.output


def test_a_status_writing_report_over_two_watched_namespaces_is_refused_at_render(tools: Tools) -> None:
    """Rules that span keys are the templates' (`fail`): `helm lint` only logs those, `install`/`template` refuse."""
    values = merged(REPORT_ON, {"rbac": {"scope": "namespaced", "namespaces": ["shop", "pay"]}})
    result = tools.helm("template", "x", str(chart.CHART), "-f", str(tools.values_file("two-namespaces", values)))
    assert result.returncode != 0
    assert "report.updateStatus with rbac.scope=namespaced needs exactly one namespace" in result.output


# -- the values matrix, rendered and accepted by the real apiserver ------------------------------------------


MATRIX: dict[str, dict[str, Any]] = {
    "defaults": {},
    "report": REPORT_ON,
    "cluster-rbac-fail-policy": merged(REPORT_ON, {"rbac": {"scope": "cluster"}, "webhook": {"failurePolicy": "Fail"}}),
    "namespaced-rbac": merged(REPORT_ON, {"rbac": {"scope": "namespaced"}}),
    "report-on-kubernetes": merged(
        REPORT_ON,
        {
            "report": {
                "master": "kubernetes",
                "persistence": {"existingClaim": "report-data"},
                "kubernetes": {"executors": 3, "executorRequestCores": "250m"},
            },
            "kafka": {"tls": {"caSecret": {"name": "kafka-ca"}}},
        },
    ),
    "cert-manager": {"webhook": {"certManager": {"enabled": True}}},
    "operator-certificates": {
        "webhook": {"operatorCertificates": {"enabled": True, "caValidityDays": 90, "propagationSeconds": 30}},
        "rbac": {"scope": "namespaced"},
    },
    "chart-certificates": {"webhook": {"operatorCertificates": {"enabled": False}}},
    "cert-manager-cluster-issuer": {
        "webhook": {"certManager": {"enabled": True, "issuerRef": {"name": "ca", "kind": "ClusterIssuer"}}}
    },
    "monitoring": {"monitoring": {"podMonitor": {"enabled": True}, "grafanaDashboard": {"enabled": True}}},
    "monitoring-labels-and-alerts": {
        "monitoring": {
            "podMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
            "prometheusRule": {
                "enabled": True,
                "labels": {"release": "kube-prometheus-stack"},
                "systemicStallGroups": 5,
            },
        }
    },
    "registry-digests-pull-secrets": merged(
        REPORT_ON,
        {
            "image": {"registry": "registry.example.com/kafka/"},
            "imagePullSecrets": [{"name": "regcred"}, {"name": "mirror"}],
            "operator": {"image": {"digest": "sha256:" + "0" * 64}},
            "sidecar": {"image": {"digest": "sha256:" + "1" * 64, "tag": "ignored"}},
            "report": {"image": {"tag": "0.2.0-rc1"}},
        },
    ),
    "tenancy-allow-lists": {
        "sidecar": {"allowedImages": ["registry.example.com/kafka/vigil-sidecar:*", "mirror.example/vigil-*"]},
        "operator": {
            "allowedSecretNames": ["kafka-*", "shared-ca"],
            "allowedBootstrapServers": ["kafka-*.kafka.svc:9093"],
        },
    },
    "pull-secrets-not-injected": {
        "imagePullSecrets": [{"name": "regcred"}],
        "sidecar": {"injectImagePullSecrets": False},
    },
    "scheduling": merged(
        REPORT_ON,
        {
            component: {
                "nodeSelector": {"kubernetes.io/os": "linux"},
                "tolerations": [
                    {"key": "dedicated", "operator": "Equal", "value": "kafka", "effect": "NoSchedule"},
                    {
                        "key": "node.kubernetes.io/unreachable",
                        "operator": "Exists",
                        "effect": "NoExecute",
                        "tolerationSeconds": 30,
                    },
                ],
                "affinity": {
                    "podAntiAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 100,
                                "podAffinityTerm": {
                                    "topologyKey": "kubernetes.io/hostname",
                                    "labelSelector": {"matchLabels": {COMPONENT: component}},
                                },
                            }
                        ]
                    }
                },
                "priorityClassName": f"vigil-{component}",
            }
            for component in ("operator", "report")
        },
    ),
    "host-network": {
        "webhook": {"hostNetwork": True, "port": 10443},
        "operator": {"livenessPort": 10480, "metricsPort": 10481, "replicas": 2},
    },
    "namespace-selector": {
        "webhook": {
            "excludeNamespaces": ["legacy", "kube-system"],
            "namespaceSelector": {
                "matchLabels": {"vigil.dev/injection": "enabled"},
                "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["test"]}],
            },
        }
    },
    "no-webhook-no-rbac": {"webhook": {"enabled": False}, "rbac": {"create": False}},
    "replicas-cluster": {"operator": {"replicas": 2}, "rbac": {"aggregateToUserRoles": False}},
    "replicas-namespaced": {"operator": {"replicas": 3, "leaderLease": "vigil-ha"}, "rbac": {"scope": "namespaced"}},
    "kafka-sasl-tls": merged(
        REPORT_ON,
        {
            "kafka": {
                "securityProtocol": "SASL_SSL",
                "sasl": {"mechanism": "SCRAM-SHA-512", "username": "report", "passwordSecret": {"name": "kafka"}},
                "tls": {"caSecret": {"name": "kafka-ca"}},
            },
            "report": {"persistence": {"existingClaim": "vigil-report"}, "extraArgs": ["--ingest-only"]},
        },
    ),
}


@pytest.mark.parametrize("case", list(MATRIX))
def test_each_rendered_values_case_is_accepted_by_the_apiserver(
    kube: Kube, tools: Tools, namespace: str, case: str
) -> None:
    values = merged(MATRIX[case])
    if values.get("rbac", {}).get("scope") == "namespaced":
        values["rbac"]["namespaces"] = [namespace]
    lint = tools.lint(values, name=f"lint-{case}")
    assert lint.returncode == 0, lint.output
    release = f"v{uuid.uuid4().hex[:6]}"
    objects = tools.template(release, namespace, values, name=case)

    without_crd = [o for o in objects if o["kind"] in KINDS_WITHOUT_CRD]
    # `helm test`'s pod needs its hook ServiceAccount to exist (a dry run makes none): the e2e suite runs it for real
    checked = [o for o in objects if o["kind"] not in KINDS_WITHOUT_CRD and not _test_pod(o)]
    applied = tools.kubectl("apply", "--dry-run=server", "-o", "json", "-f", "-", stdin=chart.dump(checked))
    assert applied.returncode == 0, applied.output
    accepted = json.loads(applied.stdout)
    accepted_items = accepted.get("items", [accepted])
    assert sorted((o["kind"], o["metadata"]["name"]) for o in accepted_items) == sorted(
        (o["kind"], o["metadata"]["name"]) for o in checked
    )

    webhook = values.get("webhook", {})
    cert_manager = webhook.get("certManager", {}).get("enabled", False)
    expected_without_crd = set()
    if cert_manager:
        expected_without_crd |= {"Certificate"} | ({"Issuer"} if not webhook["certManager"].get("issuerRef") else set())
    if values.get("monitoring", {}).get("podMonitor", {}).get("enabled"):
        expected_without_crd.add("PodMonitor")
    if values.get("monitoring", {}).get("prometheusRule", {}).get("enabled"):
        expected_without_crd.add("PrometheusRule")
    assert {o["kind"] for o in without_crd} == expected_without_crd

    _check_operator_command_line(objects, namespace, values)
    _check_leader_election(objects, namespace, values)
    _check_disruption_budget(objects, values)
    _check_webhooks(objects, namespace, values)
    _check_rbac(objects, namespace, values)
    _check_report(objects, namespace, values)
    _check_monitoring(objects, values)
    _check_images(objects, values)
    _check_placement(objects, values)
    _check_host_network(tools, objects, namespace, values)


def _test_pod(obj: Obj) -> bool:
    return obj["kind"] == "Pod" and (obj["metadata"].get("annotations") or {}).get("helm.sh/hook") == "test"


def _check_operator_command_line(objects: list[Obj], namespace: str, values: dict[str, Any]) -> None:
    """The rendered args are accepted by the operator's own parser and settings model, with the chart's values."""
    container = operator_container(objects)
    assert container["command"] == ["vigil"]
    assert container["args"][0] == "operator"
    parsed = operator_cli.build_parser().parse_args(container["args"][1:])
    settings = OperatorSettings.model_validate(
        {n: getattr(parsed, n) for n in OperatorSettings.model_fields if getattr(parsed, n) is not None}
    )
    replicas = values.get("operator", {}).get("replicas", DEFAULT_REPLICAS)
    assert not settings.standalone  # one replica or several, they elect a leader (a rolling update runs two)
    assert settings.leader_lease == values.get("operator", {}).get("leaderLease", "vigil-operator")
    # the pod name: the identity of the Lease's holder and of kopf's logs (kopf's default needs a passwd entry for
    # the image's user, which it has not)
    assert container["env"] == [{"name": POD_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    (deployment,) = find(objects, "Deployment")
    assert deployment["spec"]["template"]["spec"]["enableServiceLinks"] is False  # no VIGIL_* Service variables
    assert settings.namespace == namespace
    assert settings.metrics_port == values.get("operator", {}).get("metricsPort", 8081)
    webhook = values.get("webhook", {})
    assert settings.webhook is webhook.get("enabled", True)
    if settings.webhook:
        assert settings.webhook_failure_policy == webhook.get("failurePolicy", "Ignore")
        assert settings.webhook_port == webhook.get("port", 9443)
        assert settings.webhook_bind == "0.0.0.0"  # noqa: S104 - the apiserver calls in through the Service
        assert not settings.webhook_managed  # the chart owns the configurations
        if operator_certificates(webhook):
            assert settings.webhook_secret is not None
            assert settings.webhook_adopt_secret is not None  # the chart's own, taken over when switching from it
            assert settings.webhook_adopt_secret.endswith("-webhook-tls")
            assert settings.webhook_cert is None
        else:
            assert settings.webhook_cert is not None
            assert settings.webhook_key is not None
            mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
            assert settings.webhook_cert.parent == Path(mounts["webhook-tls"])
    if values.get("rbac", {}).get("scope") == "namespaced":
        assert parsed.watch_namespace == [namespace]
        assert not parsed.all_namespaces
    else:
        assert parsed.all_namespaces
        assert parsed.watch_namespace == []
    assert str(settings.state_dir).startswith("/tmp/")
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    (deployment,) = find(objects, "Deployment")
    # with hostNetwork two operator pods cannot share a node (their ports are the node's): the old one goes first
    surge = (0, 1) if webhook.get("hostNetwork") else (1, 0)
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge[0], "maxUnavailable": surge[1]}
    }  # fmt: skip
    assert deployment["spec"]["replicas"] == replicas
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True


def _check_leader_election(objects: list[Obj], namespace: str, values: dict[str, Any]) -> None:
    """The replicas' leader Lease: a Role in the release namespace to create Leases and get/patch that one, bound to
    the operator's ServiceAccount; nothing of kopf's peering any more."""
    assert not [o for o in objects if o["kind"] in {"ClusterKopfPeering", "KopfPeering"}]
    assert not [r for o in objects if o["kind"] in {"ClusterRole", "Role"} for r in _rules_of(o) if r[0] == "kopf.dev"]
    if values.get("rbac", {}).get("create", True) is False:
        return
    lease = values.get("operator", {}).get("leaderLease", "vigil-operator")
    (role,) = [o for o in find(objects, "Role") if o["metadata"]["name"].endswith("-operator-leader")]
    assert role["metadata"]["namespace"] == namespace
    assert sorted((tuple(r.get("resourceNames", ())), tuple(r["verbs"])) for r in role["rules"]) == [
        ((), ("create",)), ((lease,), ("get", "patch"))
    ]  # fmt: skip
    (binding,) = [o for o in find(objects, "RoleBinding") if o["metadata"]["name"].endswith("-operator-leader")]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    (account,) = [a for a in find(objects, "ServiceAccount") if a["metadata"]["labels"].get(COMPONENT) == "operator"]
    assert [(s["kind"], s["name"]) for s in binding["subjects"]] == [("ServiceAccount", account["metadata"]["name"])]


def _check_disruption_budget(objects: list[Obj], values: dict[str, Any]) -> None:
    """With 2 replicas or more, a budget keeps one through drains and evictions (the webhook answering); with one,
    none (a budget on a single replica would block every drain)."""
    replicas = values.get("operator", {}).get("replicas", DEFAULT_REPLICAS)
    budgets = find(objects, "PodDisruptionBudget")
    if replicas < 2:
        assert budgets == []
        return
    (budget,) = budgets
    (deployment,) = find(objects, "Deployment")
    assert budget["spec"] == {"minAvailable": 1, "selector": deployment["spec"]["selector"]}


def _check_webhooks(objects: list[Obj], namespace: str, values: dict[str, Any]) -> None:
    webhook = values.get("webhook", {})
    mutating = find(objects, "MutatingWebhookConfiguration")
    validating = find(objects, "ValidatingWebhookConfiguration")
    if not webhook.get("enabled", True):
        assert mutating == validating == []
        assert find(objects, "Service") == find(objects, "Secret") == []
        return
    ((config,), (vconfig,)) = mutating, validating
    (hook,) = config["webhooks"]
    assert hook["failurePolicy"] == webhook.get("failurePolicy", "Ignore")
    assert hook["rules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"], "scope": "*"}
    ]
    assert hook["objectSelector"] == {"matchExpressions": [{"key": INJECT_LABEL, "operator": "In", "values": ["true"]}]}
    # kube-system and the release namespace always left alone, then the values' exclusions (once each), then the
    # values' own selector narrowing it
    own = webhook.get("namespaceSelector", {})
    excluded = list(dict.fromkeys(["kube-system", namespace, *webhook.get("excludeNamespaces", [])]))
    expected_selector: Obj = {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": excluded},
            *own.get("matchExpressions", []),
        ]
    }
    if own.get("matchLabels"):
        expected_selector["matchLabels"] = own["matchLabels"]
    assert hook["namespaceSelector"] == expected_selector
    assert hook["reinvocationPolicy"] == "IfNeeded"
    assert hook["timeoutSeconds"] <= 10
    (service,) = find(objects, "Service")
    for cfg in (config, vconfig):
        for h in cfg["webhooks"]:
            ref = h["clientConfig"]["service"]
            assert (ref["name"], ref["namespace"], ref["path"]) == (
                service["metadata"]["name"],
                namespace,
                WEBHOOK_PATHS[h["name"]],
            )
    if webhook.get("certManager", {}).get("enabled"):
        (certificate,) = find(objects, "Certificate")
        (deployment,) = find(objects, "Deployment")
        volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "webhook-tls")
        assert certificate["spec"]["secretName"] == volume["secret"]["secretName"]
        assert f"{service['metadata']['name']}.{namespace}.svc" in certificate["spec"]["dnsNames"]
        inject_from = f"{namespace}/{certificate['metadata']['name']}"
        for cfg in (config, vconfig):
            assert cfg["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == inject_from
            assert all("caBundle" not in h["clientConfig"] for h in cfg["webhooks"])
        assert find(objects, "Secret") == []
        issuer = certificate["spec"]["issuerRef"]
        if not webhook["certManager"].get("issuerRef"):
            (own,) = find(objects, "Issuer")
            assert (issuer["kind"], issuer["name"]) == ("Issuer", own["metadata"]["name"])
            assert own["spec"] == {"selfSigned": {}}
        else:
            assert (issuer["kind"], issuer["name"]) == ("ClusterIssuer", "ca")
    elif operator_certificates(webhook):
        _check_operator_certificates(objects, namespace, config)
    else:
        (secret,) = find(objects, "Secret")
        ca = base64.b64decode(secret["data"]["ca.crt"])
        for cfg in (config, vconfig):
            assert all(base64.b64decode(h["clientConfig"]["caBundle"]) == ca for h in cfg["webhooks"])
        _check_serving_cert(secret, f"{service['metadata']['name']}.{namespace}.svc")


def operator_certificates(webhook: dict[str, Any]) -> bool:
    """Whether the operator keeps the webhook's certificates with these values: the default, unless cert-manager."""
    return bool(
        webhook.get("operatorCertificates", {}).get("enabled", True)
        and not webhook.get("certManager", {}).get("enabled")
    )


def _check_operator_certificates(objects: list[Obj], namespace: str, config: Obj) -> None:
    """The operator's own certificates: an empty Secret for them, no caBundle and no certificate in any manifest (a
    render makes none), and RBAC for that Secret and the two configurations by name, and to read the chart's own
    Secret it takes over when switching from it, nothing more."""
    (secret,) = find(objects, "Secret")
    assert "data" not in secret
    assert secret["type"] == "Opaque"
    for cfg in (config, *find(objects, "ValidatingWebhookConfiguration")):
        assert all("caBundle" not in h["clientConfig"] for h in cfg["webhooks"])
    container = operator_container(objects)
    flags = dict(a.removeprefix("--").split("=", 1) for a in container["args"][1:] if "=" in a)
    assert flags["webhook-secret"] == secret["metadata"]["name"]
    assert flags["webhook-configuration"] == config["metadata"]["name"]
    assert "webhook-cert" not in flags
    assert "webhook-tls" not in {m["name"] for m in container["volumeMounts"]}
    (role,) = [o for o in find(objects, "Role") if o["metadata"]["name"].endswith("-operator-webhook-certs")]
    assert role["metadata"]["namespace"] == namespace
    name = secret["metadata"]["name"]
    chart_secret = name.removesuffix("-webhook-certs") + "-webhook-tls"
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [name], "verbs": ["get", "patch"]},
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [chart_secret], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
    ]
    (cluster_role,) = [o for o in find(objects, "ClusterRole") if o["metadata"]["name"].endswith("-webhook-certs")]
    (rule,) = cluster_role["rules"]
    assert rule["resourceNames"] == [config["metadata"]["name"]]
    assert rule["verbs"] == ["get", "patch"]
    for kind in ("RoleBinding", "ClusterRoleBinding"):
        (binding,) = [o for o in find(objects, kind) if o["metadata"]["name"].endswith("-operator-webhook-certs")]
        assert binding["roleRef"]["name"] == binding["metadata"]["name"]


def _check_serving_cert(secret: Obj, host: str) -> None:
    """The serving certificate names the Service's DNS name and is signed by the CA in the caBundle."""
    ca = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["ca.crt"]))
    leaf = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert host in names
    leaf.verify_directly_issued_by(ca)


def _rules_of(obj: Obj) -> set[tuple[str, str, str]]:
    return {
        (g, r, v) for rule in obj["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }


OPERATOR_NEEDS = {
    ("vigil.dev", "consumergroups", "watch"),
    ("vigil.dev", "consumergroups", "patch"),
    ("vigil.dev", "consumergroups/status", "patch"),
    ("", "pods", "watch"),
    ("", "pods", "delete"),
    ("", "secrets", "get"),
    ("", "events", "create"),
    ("apps", "statefulsets", "get"),
    ("coordination.k8s.io", "leases", "create"),
    ("coordination.k8s.io", "leases", "update"),
    ("rbac.authorization.k8s.io", "roles", "create"),
    ("rbac.authorization.k8s.io", "rolebindings", "create"),
}
CLUSTER_NEEDS = {("", "nodes", "watch"), ("apiextensions.k8s.io", "customresourcedefinitions", "watch")}


def _check_rbac(objects: list[Obj], namespace: str, values: dict[str, Any]) -> None:
    rbac = values.get("rbac", {})
    kinds = {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    if rbac.get("create", True) is False:
        assert [o for o in objects if o["kind"] in kinds] == []
        return
    aggregated = {o["metadata"]["name"].rsplit("-", 1)[1]: o for o in find(objects, "ClusterRole")
                  if "rbac.authorization.k8s.io/aggregate-to-view" in o["metadata"]["labels"]
                  or "rbac.authorization.k8s.io/aggregate-to-edit" in o["metadata"]["labels"]}  # fmt: skip
    if rbac.get("aggregateToUserRoles", True):
        assert set(aggregated) == {"view", "edit"}
        assert {verb for _, _, verb in _rules_of(aggregated["view"])} == {"get", "list", "watch"}
        assert ("vigil.dev", "consumergroups/status", "patch") not in _rules_of(aggregated["edit"])  # the operator's
    else:
        assert aggregated == {}
    (operator_cluster_role,) = [o for o in find(objects, "ClusterRole") if o["metadata"]["name"].endswith("-operator")]
    cluster_rules = _rules_of(operator_cluster_role)
    assert cluster_rules >= CLUSTER_NEEDS
    assert ("", "secrets", "list") not in cluster_rules  # least privilege: secrets are read by name only
    assert all(verb not in {"*", "escalate", "bind", "impersonate"} for (_, _, verb) in cluster_rules)
    if rbac.get("scope", "cluster") == "namespaced":
        assert not cluster_rules & OPERATOR_NEEDS  # nothing namespaced is granted cluster-wide
        (role,) = [o for o in find(objects, "Role") if o["metadata"]["name"].endswith("-operator")]
        assert role["metadata"]["namespace"] == namespace
        assert _rules_of(role) >= OPERATOR_NEEDS
    else:
        assert cluster_rules >= OPERATOR_NEEDS
        assert [o for o in find(objects, "Role") if o["metadata"]["name"].endswith("-operator")] == []
    if values.get("report", {}).get("enabled"):
        report_roles = [
            o for o in objects if o["kind"] in {"Role", "ClusterRole"} and o["metadata"]["name"].endswith("-report")
        ]
        (report_role,) = report_roles
        assert _rules_of(report_role) == {
            ("vigil.dev", "consumergroups", "get"),
            ("vigil.dev", "consumergroups", "list"),
            ("vigil.dev", "consumergroups/status", "get"),
            ("vigil.dev", "consumergroups/status", "patch"),
        }
    spark_roles = [o for o in find(objects, "Role") if o["metadata"]["name"].endswith("-report-spark")]
    if _report_on_kubernetes(values):
        (spark_role,) = spark_roles  # Spark's driver makes and removes its executor pods, in the release namespace
        assert spark_role["metadata"]["namespace"] == namespace
        assert _rules_of(spark_role) == {
            ("", kind, verb) for kind in ("pods", "configmaps")
            for verb in ("create", "get", "list", "watch", "delete", "deletecollection")
        }  # fmt: skip
    else:
        assert spark_roles == []


def _check_report(objects: list[Obj], namespace: str, values: dict[str, Any]) -> None:
    jobs = find(objects, "CronJob")
    if not values.get("report", {}).get("enabled"):
        assert jobs == []
        return
    (job,) = jobs
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["vigil"]
    assert container["args"][0] == "report"
    parsed = report_cli.build_parser().parse_args(container["args"][1:])  # the real flags, or SystemExit
    if _report_on_kubernetes(values):
        _check_report_on_kubernetes(objects, container, parsed, namespace, values)
    else:
        assert parsed.master == "local[*]"
        assert parsed.conf == []
    assert parsed.update_status is values["report"].get("updateStatus", True)
    namespaced = values.get("rbac", {}).get("scope") == "namespaced"
    assert parsed.namespace == (namespace if namespaced and parsed.update_status else None)
    assert str(parsed.out) in {m["mountPath"] for m in container["volumeMounts"]}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["VIGIL_KAFKA_BOOTSTRAP_SERVERS"] == values["kafka"]["bootstrapServers"]
    assert job["spec"]["concurrencyPolicy"] == "Forbid"
    sasl = values["kafka"].get("sasl", {})
    if sasl.get("passwordSecret"):
        password_file = Path(env["VIGIL_KAFKA_SASL_PASSWORD_FILE"] or "")
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        assert str(password_file.parent) == mounts["kafka-sasl"]
        (volume,) = [v for v in pod["volumes"] if v["name"] == "kafka-sasl"]
        assert volume["secret"]["items"] == [{"key": "password", "path": password_file.name}]
        assert parsed.ingest_only


def _report_on_kubernetes(values: dict[str, Any]) -> bool:
    report = values.get("report", {})
    return bool(report.get("enabled")) and report.get("master") == "kubernetes"


def _check_report_on_kubernetes(
    objects: list[Obj], container: Obj, parsed: Any, namespace: str, values: dict[str, Any]
) -> None:
    """The driver's flags name the in-cluster apiserver, its own pod and IP, the executors and their template; the
    template's pod is as restricted as the job's, with the same claim and Kafka CA."""
    assert parsed.master == "k8s://https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"
    conf = dict(parsed.conf)
    executors = values["report"].get("kubernetes", {})
    image = container["image"]
    assert conf["spark.kubernetes.namespace"] == namespace
    assert conf["spark.kubernetes.container.image"] == image
    assert conf["spark.kubernetes.driver.pod.name"] == "$(VIGIL_POD_NAME)"
    assert conf["spark.driver.host"] == "$(VIGIL_POD_IP)"
    assert conf["spark.executor.instances"] == str(executors.get("executors", 2))
    assert conf.get("spark.kubernetes.executor.request.cores") == (executors.get("executorRequestCores") or None)
    fields = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in container["env"]}
    assert fields["VIGIL_POD_NAME"] == "metadata.name"
    assert fields["VIGIL_POD_IP"] == "status.podIP"
    template_path = Path(conf["spark.kubernetes.executor.podTemplateFile"])
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["executor-template"] == str(template_path.parent)
    (config_map,) = [o for o in find(objects, "ConfigMap") if o["metadata"]["name"].endswith("-report-executor")]
    executor_pod = yaml.safe_load(config_map["data"][template_path.name])
    (job,) = find(objects, "CronJob")
    job_pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert executor_pod["spec"]["securityContext"] == job_pod["securityContext"]
    assert executor_pod["spec"]["automountServiceAccountToken"] is False
    (executor,) = executor_pod["spec"]["containers"]
    assert executor["command"] == ["python", "-m", "vigil_spark.executor"]
    assert executor["securityContext"] == container["securityContext"]
    volumes = {v["name"]: v for v in executor_pod["spec"]["volumes"]}
    claim = values["report"]["persistence"]["existingClaim"]
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == claim
    executor_mounts = {m["name"]: m["mountPath"] for m in executor["volumeMounts"]}
    assert executor_mounts["data"] == mounts["data"] == str(parsed.out)
    if values["kafka"].get("tls", {}).get("caSecret", {}).get("name"):
        assert executor_mounts["kafka-tls"] == mounts["kafka-tls"]  # the truststore path the driver passes on


def _check_monitoring(objects: list[Obj], values: dict[str, Any]) -> None:
    monitoring = values.get("monitoring", {})
    _check_prometheus_rule(objects, values)
    if not monitoring.get("podMonitor", {}).get("enabled"):
        assert find(objects, "PodMonitor") == []
    else:
        sidecars, operator = sorted(find(objects, "PodMonitor"), key=lambda m: m["metadata"]["name"], reverse=True)
        assert sidecars["apiVersion"] == operator["apiVersion"] == "monitoring.coreos.com/v1"
        wanted = monitoring["podMonitor"].get("labels", {})
        assert sidecars["metadata"]["labels"].items() >= wanted.items()
        assert operator["metadata"]["labels"].items() >= wanted.items()
        # the sidecars' series get the ConsumerGroup their pod names, as the operator's per-group series have it
        assert sidecars["spec"]["podMetricsEndpoints"][0]["relabelings"] == [
            {
                "sourceLabels": ["__meta_kubernetes_pod_annotation_vigil_dev_consumer_group"],
                "targetLabel": "consumergroup",
            }
        ]
        assert sidecars["spec"]["selector"] == {"matchLabels": {INJECT_LABEL: "true"}}
        assert sidecars["spec"]["podMetricsEndpoints"][0]["port"] == "vigil-health"  # the injected sidecar's port
        # the operator's per-group `namespace` is the ConsumerGroup's: kept, not renamed to exported_namespace
        assert operator["spec"]["podMetricsEndpoints"][0]["honorLabels"] is True
        # the operator's own /metrics: the port the Deployment names, on the pods it selects
        (deployment,) = find(objects, "Deployment")
        assert operator["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
        ports = {p["name"]: p["containerPort"] for p in operator_container(objects)["ports"]}
        assert operator["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
        assert ports["metrics"] == 8081
    dashboards = [o for o in find(objects, "ConfigMap") if o["metadata"]["name"].endswith("-dashboard")]
    if not monitoring.get("grafanaDashboard", {}).get("enabled"):
        assert dashboards == []
        return
    (dashboard,) = dashboards
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    parsed = json.loads(dashboard["data"]["vigil.json"])
    exprs = [t["expr"] for p in parsed["panels"] for t in p["targets"]]
    assert exprs
    assert all("vigil_sidecar_" in e or "vigil_operator_" in e for e in exprs)
    assert any("vigil_operator_consumergroup_rebalances_total" in e for e in exprs)
    _check_metric_names(exprs)


def _check_metric_names(exprs: list[str]) -> None:
    """Every metric the dashboard (or an alert) queries is one the sidecar or the operator exports (counters with
    prometheus' `_total`)."""
    exported: set[str] = set()
    for registry in (Metrics().registry, OperatorMetrics().registry):
        for family in registry.collect():
            exported.add(family.name + "_total" if family.type == "counter" else family.name)
    used = {m for e in exprs for m in re.findall(r"vigil_(?:sidecar|operator)_[a-z_]+", e)}
    assert used <= exported, used - exported


SIDECAR_MISSING = "vigil_operator_consumergroup_pods_without_sidecar"
"""The operator's per-group gauge of labelled pods without the sidecar (condition SidecarMissing)."""
ALERTS = {"VigilMemberStalled", "VigilGroupSystemicStall", "VigilSystemicStall", "VigilWebhookErrors",
          "VigilSidecarMissing"}  # fmt: skip


def _check_prometheus_rule(objects: list[Obj], values: dict[str, Any]) -> None:
    """The alerts parse as PromQL, query only vigil's real metrics (and the pending gauge), and group by labels the
    series have: the operator's per-group ones (namespace, consumergroup), the PodMonitor's relabelled one."""
    rule_values = values.get("monitoring", {}).get("prometheusRule", {})
    rules = find(objects, "PrometheusRule")
    if not rule_values.get("enabled"):
        assert rules == []
        return
    (rule,) = rules
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["labels"].items() >= rule_values.get("labels", {}).items()
    ((group,),) = [rule["spec"]["groups"]]
    alerts = {r["alert"]: r for r in group["rules"]}
    assert set(alerts) == ALERTS
    for name, alert in alerts.items():
        parsed = promql_parser.parse(alert["expr"])  # ValueError on a syntax error
        assert parsed is not None, name
        assert alert["labels"]["severity"] in {"warning", "critical"}
        assert {"summary", "description"} <= set(alert["annotations"])
    _check_metric_names([a["expr"] for a in alerts.values()])
    assert SIDECAR_MISSING in alerts["VigilSidecarMissing"]["expr"]
    assert "vigil_operator_webhook_errors_total" in alerts["VigilWebhookErrors"]["expr"]
    assert 'kind="budget-systemic-stall"' in alerts["VigilGroupSystemicStall"]["expr"]
    assert alerts["VigilSystemicStall"]["expr"].rstrip().endswith(f">= {rule_values.get('systemicStallGroups', 3)}")
    # the sidecar's kinds and actions the alerts name are the ones it counts
    sidecar_kinds = {k.value for k in AlertKind} | {f"budget-{c}" for c in get_args(RefusalCause)}
    for expr in (a["expr"] for a in alerts.values()):
        for kinds in re.findall(r'kind=~?"([^"]+)"', expr):
            assert set(kinds.split("|")) <= sidecar_kinds, kinds


def _check_images(objects: list[Obj], values: dict[str, Any]) -> None:
    """Every image is `[registry/]repository` with the digest when given (it wins over the tag), else the tag or the
    appVersion; the sidecar the operator injects follows the same rule; the pull secrets go to every vigil pod and,
    unless turned off, to the operator's flags for injected pods."""
    registry = values.get("image", {}).get("registry", "").rstrip("/")
    version = yaml.safe_load((chart.CHART / "Chart.yaml").read_text())["appVersion"]

    def expected(component: str) -> str:
        image = values.get(component, {}).get("image", {})
        repository = image.get("repository", f"vigil-{component}")
        repository = f"{registry}/{repository}" if registry else repository
        if image.get("digest"):
            return f"{repository}@{image['digest']}"
        return f"{repository}:{image.get('tag') or version}"

    container = operator_container(objects)
    assert container["image"] == expected("operator")
    parsed = operator_cli.build_parser().parse_args(container["args"][1:])
    assert parsed.sidecar_image == expected("sidecar")
    secrets = values.get("imagePullSecrets", [])
    injected = values.get("sidecar", {}).get("injectImagePullSecrets", True)
    assert (parsed.sidecar_image_pull_secret or []) == ([s["name"] for s in secrets] if injected else [])
    settings = operator_settings.from_flags(vars(parsed))
    assert settings.injection().image_pull_secrets == tuple(parsed.sidecar_image_pull_secret or ())
    # the allow-lists of what a ConsumerGroup may name (domain.tenancy): the chart's own sidecar image always
    tenancy = settings.injection().tenancy()
    assert tenancy.default_image == expected("sidecar")
    assert tenancy.allowed_images == tuple(values.get("sidecar", {}).get("allowedImages", []))
    assert tenancy.allowed_secrets == tuple(values.get("operator", {}).get("allowedSecretNames", []))
    assert tenancy.allowed_bootstrap_servers == tuple(values.get("operator", {}).get("allowedBootstrapServers", []))
    for pod in _pod_specs(objects).values():
        assert pod.get("imagePullSecrets", []) == secrets
    for job in find(objects, "CronJob"):
        (report,) = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
        assert report["image"] == expected("report")


def _pod_specs(objects: list[Obj]) -> dict[str, Obj]:
    """The pod templates by component: the operator's Deployment, the report's CronJob."""
    pods: dict[str, Obj] = {}
    for deployment in find(objects, "Deployment"):
        pods["operator"] = deployment["spec"]["template"]["spec"]
    for job in find(objects, "CronJob"):
        pods["report"] = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return pods


def _check_placement(objects: list[Obj], values: dict[str, Any]) -> None:
    """nodeSelector, tolerations, affinity and priorityClassName as given, on the pods of their component only; the
    operator's replicas, given no affinity, preferably on different nodes."""
    for component, pod in _pod_specs(objects).items():
        given = values.get(component, {})
        for key in ("nodeSelector", "tolerations", "priorityClassName"):
            assert pod.get(key) == (given.get(key) or None), (component, key)
        assert pod.get("affinity") == (given.get("affinity") or _default_affinity(objects, component)), component


def _default_affinity(objects: list[Obj], component: str) -> Obj | None:
    if component != "operator":
        return None
    (deployment,) = find(objects, "Deployment")
    term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": deployment["spec"]["selector"]}
    return {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": term}
    ]}}  # fmt: skip


def _check_host_network(tools: Tools, objects: list[Obj], namespace: str, values: dict[str, Any]) -> None:
    """hostNetwork on the operator pod with the DNS policy that keeps cluster names resolving; a pod of that template,
    as the apiserver admits it, takes its ports on the node (hostPort = containerPort), so the scheduler never puts
    two on one node — the reason the rolling update then takes the old pod down first."""
    host_network = values.get("webhook", {}).get("hostNetwork", False)
    template = _pod_specs(objects)["operator"]
    assert template.get("hostNetwork", False) is host_network
    assert template.get("dnsPolicy") == ("ClusterFirstWithHostNet" if host_network else None)
    if not host_network:
        return
    spec = {**copy.deepcopy(template), "serviceAccountName": "default"}  # the chart's account is not created here
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "host-network", "namespace": namespace},
        "spec": spec,
    }
    admitted = tools.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(pod))
    assert admitted.returncode == 0, admitted.output
    (container,) = json.loads(admitted.stdout)["spec"]["containers"]
    host_ports = {p["name"]: p.get("hostPort") for p in container["ports"]}
    operator = values.get("operator", {})
    assert host_ports == {
        "liveness": operator["livenessPort"], "metrics": operator["metricsPort"], "webhook": values["webhook"]["port"]
    }  # fmt: skip


# -- a real install, upgrade and uninstall -------------------------------------------------------------------


@pytest.fixture
def release(tools: Tools, namespace: str) -> Iterator[str]:
    name = f"vigil-{uuid.uuid4().hex[:6]}"
    try:
        yield name
    finally:
        tools.helm("uninstall", name, "--namespace", namespace, "--ignore-not-found")


def test_install_upgrade_uninstall_on_the_real_apiserver(
    kube: Kube, tools: Tools, namespace: str, release: str
) -> None:
    ext = client.ApiextensionsV1Api(kube.api)
    admission = client.AdmissionregistrationV1Api(kube.api)
    rbac = client.RbacAuthorizationV1Api(kube.api)
    batch = client.BatchV1Api(kube.api)
    crd_before = exists(lambda: ext.read_custom_resource_definition(crd.NAME))
    chart_certs = {"webhook": {"failurePolicy": "Fail", "operatorCertificates": {"enabled": False}}}
    values = tools.values_file(release, merged(REPORT_ON, chart_certs))

    installed = tools.helm("install", release, str(chart.CHART), "--namespace", namespace, "-f", str(values))
    assert installed.returncode == 0, installed.output
    assert "kubectl apply -f my-group.yaml" in installed.stdout  # NOTES.txt is shown

    full = release  # the release name contains "vigil": it is the prefix
    deployment = kube.apps.read_namespaced_deployment(f"{full}-operator", namespace)
    assert deployment.spec.strategy.type == "RollingUpdate"
    assert deployment.spec.template.spec.service_account_name == full
    kube.core.read_namespaced_service_account(full, namespace)
    kube.core.read_namespaced_service_account(f"{full}-report", namespace)
    role = rbac.read_cluster_role(f"{full}-operator")
    assert {r for r in _rules_of(_camel(role)) if r in OPERATOR_NEEDS} == OPERATOR_NEEDS
    binding = rbac.read_cluster_role_binding(f"{full}-operator")
    assert [(s.kind, s.name, s.namespace) for s in binding.subjects] == [("ServiceAccount", full, namespace)]
    rbac.read_cluster_role_binding(f"{full}-report")
    service = kube.core.read_namespaced_service(f"{full}-webhook", namespace)
    assert [(p.port, p.target_port) for p in service.spec.ports] == [(443, "webhook")]
    cron = batch.read_namespaced_cron_job(f"{full}-report", namespace)
    assert cron.spec.schedule == "17 * * * *"
    # a namespace's users get ConsumerGroups with the built-in roles they hold (aggregated by the controller manager)
    for user, role_name, verb, allowed in (("ann", "view", "list", True), ("ann", "view", "create", False),
                                           ("ed", "edit", "create", True), ("ed", "edit", "update", True)):  # fmt: skip
        kube.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                    "metadata": {"name": f"{user}-{role_name}", "namespace": namespace},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]})  # fmt: skip
        wait_for(lambda u=user, v=verb: _may(kube, u, v, namespace), lambda found, a=allowed: found is a,
                 timeout=bound(10), what=f"{user} ({role_name}) may {verb} consumergroups: {allowed}")  # fmt: skip

    secret = kube.core.read_namespaced_secret(f"{full}-webhook-tls", namespace).data
    config = admission.read_mutating_webhook_configuration(full)
    (hook,) = config.webhooks
    assert hook.failure_policy == "Fail"
    assert hook.reinvocation_policy == "IfNeeded"
    assert hook.client_config.ca_bundle == secret["ca.crt"]
    assert hook.namespace_selector.match_expressions[0].values == ["kube-system", namespace]
    assert hook.object_selector.match_expressions[0].key == INJECT_LABEL
    (vhook,) = admission.read_validating_webhook_configuration(full).webhooks
    assert vhook.client_config.ca_bundle == secret["ca.crt"]
    crd_now = ext.read_custom_resource_definition(crd.NAME)  # from the chart's crds/ unless already there
    assert crd_before or crd_now.spec.names.short_names == ["kcg"]
    checksum = deployment.spec.template.metadata.annotations["checksum/webhook-tls"]

    # A ConsumerGroup (the operator does not run here: nothing reconciles it) must outlive the release.
    group = yaml.safe_load((chart.ROOT / "examples" / "consumergroups" / "dynamic-deployment.yaml").read_text())
    group["metadata"] = {"name": "kept", "namespace": namespace}
    kube.apply(group)

    upgraded = tools.helm(
        "upgrade", release, str(chart.CHART), "--namespace", namespace, "-f", str(values), "--set",
        "operator.resyncSeconds=45",
    )  # fmt: skip
    assert upgraded.returncode == 0, upgraded.output
    after = kube.core.read_namespaced_secret(f"{full}-webhook-tls", namespace).data
    assert after == secret  # generated once, kept by the upgrade
    (hook_after,) = admission.read_mutating_webhook_configuration(full).webhooks
    assert hook_after.client_config.ca_bundle == secret["ca.crt"]
    args = kube.apps.read_namespaced_deployment(f"{full}-operator", namespace).spec.template.spec.containers[0].args
    assert "--resync-seconds=45" in args  # the upgrade did change what it should
    template_after = kube.apps.read_namespaced_deployment(f"{full}-operator", namespace).spec.template
    assert template_after.metadata.annotations["checksum/webhook-tls"] == checksum  # same certificate, same hash

    # -- switching to the operator's own certificates: the chart's CA stays trusted, its Secret stays to be taken
    # over, until the operator's Secret holds a bundle; then every upgrade renders that bundle (none removes it)
    def switch() -> None:
        switched = tools.helm(
            "upgrade", release, str(chart.CHART), "--namespace", namespace, "-f", str(values), "--set",
            "operator.resyncSeconds=45", "--set", "webhook.operatorCertificates.enabled=true",
        )  # fmt: skip
        assert switched.returncode == 0, switched.output

    def trusted() -> set[str]:
        configs = (admission.read_mutating_webhook_configuration(full),
                   admission.read_validating_webhook_configuration(full))  # fmt: skip
        return {h.client_config.ca_bundle for c in configs for h in c.webhooks}

    switch()
    assert kube.core.read_namespaced_secret(f"{full}-webhook-tls", namespace).data == secret
    assert not kube.core.read_namespaced_secret(f"{full}-webhook-certs", namespace).data  # the operator's: empty
    assert trusted() == {secret["ca.crt"]}
    args = kube.apps.read_namespaced_deployment(f"{full}-operator", namespace).spec.template.spec.containers[0].args
    assert f"--webhook-adopt-secret={full}-webhook-tls" in args
    # the operator's takeover as it writes it (no operator runs here): the chart's CA and a new one, in its Secret
    own_ca = pki.new_ca("takeover", validity=datetime.timedelta(days=1)).cert_pem()
    bundle = base64.b64encode(base64.b64decode(secret["ca.crt"]) + own_ca).decode()
    kube.core.patch_namespaced_secret(f"{full}-webhook-certs", namespace, {"data": {"ca.crt": bundle}})
    switch()
    assert not exists(lambda: kube.core.read_namespaced_secret(f"{full}-webhook-tls", namespace))  # taken over
    assert trusted() == {bundle}

    uninstalled = tools.helm("uninstall", release, "--namespace", namespace)
    assert uninstalled.returncode == 0, uninstalled.output
    assert not exists(lambda: admission.read_mutating_webhook_configuration(full))
    assert not exists(lambda: admission.read_validating_webhook_configuration(full))
    assert not exists(lambda: rbac.read_cluster_role(f"{full}-operator"))
    assert not exists(lambda: rbac.read_cluster_role(f"{full}-edit"))
    assert not exists(lambda: kube.core.read_namespaced_secret(f"{full}-webhook-tls", namespace))
    assert exists(lambda: ext.read_custom_resource_definition(crd.NAME))  # Helm never deletes crds/
    assert exists(
        lambda: kube.custom.get_namespaced_custom_object("vigil.dev", "v1alpha1", namespace, "consumergroups", "kept")
    )


def _may(kube: Kube, user: str, verb: str, namespace: str) -> bool:
    """Whether the apiserver lets `user` `verb` ConsumerGroups in `namespace` (a SubjectAccessReview)."""
    asked = {"namespace": namespace, "verb": verb, "group": "vigil.dev", "resource": "consumergroups"}
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
              "spec": {"user": user, "resourceAttributes": asked}}  # fmt: skip
    answer = client.AuthorizationV1Api(kube.api).create_subject_access_review(review)
    return bool(answer.status.allowed)


def _camel(role: Any) -> Obj:
    return {
        "rules": [{"apiGroups": r.api_groups or [""], "resources": r.resources, "verbs": r.verbs} for r in role.rules]
    }


# -- the real operator, running with nothing but the chart's RBAC ---------------------------------------------


@pytest.mark.usefixtures("crd_installed")
@pytest.mark.parametrize("scope", ["cluster", "namespaced"])
def test_the_operator_does_its_work_with_nothing_but_the_charts_rbac(  # noqa: PLR0917 - fixtures
    kube: Kube, tools: Tools, namespace: str, release: str, tmp_path: Path, scope: str
) -> None:
    """The operator process acts as the chart's ServiceAccount, electing itself leader by the chart's Lease in the
    release namespace. For a ConsumerGroup whose broker is unreachable it writes the status, posts Events, creates
    the budget Lease, Role and RoleBinding, and puts no finalizer on it — and the apiserver refuses it nothing."""
    values = {"rbac": {"scope": scope, "namespaces": [namespace] if scope == "namespaced" else []}}
    installed = tools.helm(
        "install", release, str(chart.CHART), "--namespace", namespace, "-f", str(tools.values_file(release, values))
    )
    assert installed.returncode == 0, installed.output
    kubeconfig = chart.service_account_kubeconfig(tools, namespace, release, tmp_path / "operator.kubeconfig")
    (port,) = ports.free_ports(1)  # nothing listens there: BrokerUnreachable at once
    group = yaml.safe_load((chart.ROOT / "examples" / "consumergroups" / "dynamic-deployment.yaml").read_text())
    group["metadata"] = {"name": "orders", "namespace": namespace}
    group["spec"]["kafka"] = {"bootstrapServers": f"127.0.0.1:{port}"}
    watch = ["--watch-namespace", namespace] if scope == "namespaced" else []
    operator = start_operator(kubeconfig, tmp_path, name=f"operator-{scope}", webhook=False, standalone=False,
                              args=[*watch, "--namespace", namespace])  # fmt: skip
    rbac = client.RbacAuthorizationV1Api(kube.api)
    coordination = client.CoordinationV1Api(kube.api)
    try:
        kube.apply(group)

        def status() -> Obj:
            found: Obj = kube.custom.get_namespaced_custom_object(
                "vigil.dev", "v1alpha1", namespace, "consumergroups", "orders"
            )
            return found.get("status") or {}

        conditions = wait_for(
            lambda: {c["type"]: c.get("reason") for c in status().get("conditions") or []},
            lambda c: c.get("Ready") == "BrokerUnreachable",
            timeout=bound(30),
            what="status written by the operator as the chart's ServiceAccount",
        )
        assert conditions["Ready"] == "BrokerUnreachable"
        lease = ledger.lease_name("orders")
        wait_for(
            lambda: [
                exists(lambda: coordination.read_namespaced_lease(lease, namespace)),
                exists(lambda: rbac.read_namespaced_role("vigil-budget-orders", namespace)),
                exists(lambda: rbac.read_namespaced_role_binding("vigil-budget-orders", namespace)),
            ],
            all,
            timeout=bound(10),
            what="the budget Lease, Role and RoleBinding",
        )
        events = wait_for(
            lambda: kube.core.list_namespaced_event(namespace, field_selector="involvedObject.name=orders").items,
            timeout=bound(10),
            what="an Event on the ConsumerGroup",
        )
        assert events
        meta = kube.custom.get_namespaced_custom_object("vigil.dev", "v1alpha1", namespace, "consumergroups", "orders")[
            "metadata"
        ]
        assert not meta.get("finalizers")  # deleting it never waits for the operator
        leader = coordination.read_namespaced_lease("vigil-operator", namespace)  # the chart's operator.leaderLease
        assert leader.spec.holder_identity
    finally:
        operator.stop()
    # an RBAC refusal names the account (a 403 for a namespace another test is deleting is not one)
    account = f"system:serviceaccount:{namespace}:{release}"
    refused = [
        line
        for line in operator.log_text().splitlines()
        if account in line or "not enough permissions" in line.lower() or "rbac" in line.lower()
    ]
    assert refused == []


# -- the chart's webhooks against the operator-managed ones -------------------------------------------------


MUTATING_DIFFERENCES = {"clientConfig", "namespaceSelector", "reinvocationPolicy", "timeoutSeconds"}
"""What only the chart sets: the Service instead of a URL; the namespaces it leaves alone (the operator also
refuses them in code); reinvocation (injection is idempotent); a short timeout (kopf always writes 30)."""
VALIDATING_DIFFERENCES = {"clientConfig", "timeoutSeconds", "failurePolicy"}
"""kopf writes Fail for a validating handler; the chart defaults to Ignore (the operator marks duplicates
DuplicateGroup anyway, so an operator outage should not block ConsumerGroup creation)."""


def test_the_charts_webhooks_match_the_ones_the_operator_manages(
    kube: Kube, tools: Tools, crd_installed: None, namespace: str, tmp_path: Path
) -> None:
    admission = client.AdmissionregistrationV1Api(kube.api)
    objects = tools.template("vigil", namespace, {}, name="compare")

    def server_form(kind: str) -> Obj:
        """The chart's configuration as the apiserver stores it (defaults filled), by a dry-run create."""
        (obj,) = find(objects, kind)
        applied = tools.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(obj))
        assert applied.returncode == 0, applied.output
        result: Obj = json.loads(applied.stdout)
        return result

    chart_mutating = server_form("MutatingWebhookConfiguration")
    chart_validating = server_form("ValidatingWebhookConfiguration")

    operator = start_operator(kube.kubeconfig, tmp_path, name="chart-compare-operator")
    try:
        operator_mutating = _managed_by(admission, operator, "mutating")
        operator_validating = _managed_by(admission, operator, "validating")
    finally:
        operator.stop()
        _delete_managed(admission)
    assert operator_mutating is not None
    assert operator_validating is not None

    for ours, theirs, allowed in (
        (chart_mutating, operator_mutating, MUTATING_DIFFERENCES),
        (chart_validating, operator_validating, VALIDATING_DIFFERENCES),
    ):
        (mine,) = ours["webhooks"]
        (kopf_hook,) = theirs["webhooks"]
        differing = {k for k in set(mine) | set(kopf_hook) if mine.get(k) != kopf_hook.get(k)}
        assert differing == allowed, {k: (mine.get(k), kopf_hook.get(k)) for k in differing}
        # same handler path: the Service path is the operator's URL path
        assert kopf_hook["clientConfig"]["url"].endswith(mine["clientConfig"]["service"]["path"])
        assert "service" not in kopf_hook["clientConfig"]
    (mine,) = chart_mutating["webhooks"]
    (kopf_hook,) = operator_mutating["webhooks"]
    assert (mine["reinvocationPolicy"], kopf_hook["reinvocationPolicy"]) == ("IfNeeded", "Never")
    assert kopf_hook["namespaceSelector"] == {}


def _managed_by(admission: client.AdmissionregistrationV1Api, operator: RunningOperator, kind: str) -> Obj:
    """The (mutating|validating) webhook configuration `vigil.dev` once this operator (managed mode) has written it."""
    read = (
        admission.read_mutating_webhook_configuration
        if kind == "mutating"
        else admission.read_validating_webhook_configuration
    )

    def written_by_this_operator(config: Obj | None) -> bool:
        hooks = (config or {}).get("webhooks") or []
        return len(hooks) == 1 and f":{operator.webhook_port}/" in hooks[0]["clientConfig"].get("url", "")

    found: Obj = wait_for(
        lambda: read_json(lambda: read("vigil.dev", _preload_content=False)),
        written_by_this_operator,
        timeout=bound(10),
        what=f"the operator's managed {kind} webhook configuration vigil.dev",
    )
    return found


def _delete_managed(admission: client.AdmissionregistrationV1Api) -> None:
    for delete in (admission.delete_mutating_webhook_configuration, admission.delete_validating_webhook_configuration):
        try:
            delete("vigil.dev")
        except ApiException as exc:
            if exc.status != 404:
                raise


# -- the operator's side of the chart's values: pull secrets on injected pods, webhook errors counted ----------


def test_the_operator_adds_the_charts_pull_secrets_to_injected_pods_and_counts_webhook_errors(
    kube: Kube, tools: Tools, crd_installed: None, namespace: str, tmp_path: Path
) -> None:
    """The operator run with the flags the chart renders for `imagePullSecrets` injects a labelled pod (created
    through the real apiserver, dry-run) with the pod's own pull secret first and the chart's appended once; a request
    it cannot serve is counted in `vigil_operator_webhook_errors_total`, and the injection before it was not."""
    admission = client.AdmissionregistrationV1Api(kube.api)
    values = {"imagePullSecrets": [{"name": "mirror"}, {"name": "regcred"}]}
    args = [a for a in operator_container(tools.template("vigil", namespace, values, name="pull"))["args"]
            if a.startswith("--sidecar-image-pull-secret=")]  # fmt: skip
    assert args == ["--sidecar-image-pull-secret=mirror", "--sidecar-image-pull-secret=regcred"]
    (port,) = ports.free_ports(1)  # the group's broker: nothing listens (injection needs only the spec)
    group = yaml.safe_load((chart.ROOT / "examples" / "consumergroups" / "dynamic-deployment.yaml").read_text())
    group["metadata"] = {"name": "orders", "namespace": namespace}
    group["spec"]["kafka"] = {"bootstrapServers": f"127.0.0.1:{port}"}
    kube.apply(group)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "orders-0",
            "namespace": namespace,
            "labels": {INJECT_LABEL: "true"},
            "annotations": {GROUP_ANNOTATION: "orders"},
        },
        "spec": {
            "imagePullSecrets": [{"name": "mirror"}, {"name": "app-pull"}],
            "containers": [{"name": "app", "image": TESTAPPS, "imagePullPolicy": "Never"}],
        },
    }

    def created() -> Obj:
        done = tools.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(pod))
        assert done.returncode == 0, done.output
        result: Obj = json.loads(done.stdout)
        return result

    operator = start_operator(kube.kubeconfig, tmp_path, name="pull-secrets-operator", args=args)
    try:
        _managed_by(admission, operator, "mutating")
        injected = wait_for(
            created,
            lambda p: INJECTED_ANNOTATION in (p["metadata"].get("annotations") or {}),
            timeout=bound(20),
            what="a labelled pod injected (the operator's catalog knows the ConsumerGroup)",
        )
        assert injected["spec"]["imagePullSecrets"] == [{"name": "mirror"}, {"name": "app-pull"}, {"name": "regcred"}]
        sidecars = [c for c in [*injected["spec"].get("initContainers", []), *injected["spec"]["containers"]]
                    if c["name"] == SIDECAR_NAME]  # fmt: skip
        assert len(sidecars) == 1

        def errors() -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{operator.metrics_port}/metrics", timeout=2) as response:
                return str(response.read().decode())

        assert reading(errors(), "vigil_operator_webhook_errors_total", webhook="inject-sidecar") == 0  # served well
        unverified = ssl.create_default_context()
        unverified.check_hostname = False
        unverified.verify_mode = ssl.CERT_NONE  # the operator's throwaway CA; only the answer's status matters here
        # an AdmissionReview without the user's info: kopf's admission function refuses to serve it (400)
        review = {"request": {"uid": "u-1", "operation": "CREATE", "object": pod,
                              "resource": {"group": "", "version": "v1", "resource": "pods"}}}  # fmt: skip
        garbage = urllib.request.Request(
            f"https://127.0.0.1:{operator.webhook_port}/inject-sidecar",
            data=json.dumps(review).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(garbage, timeout=5, context=unverified)  # noqa: S310 - https, the operator on loopback
        assert refused.value.code == 400
        wait_for(
            lambda: reading(errors(), "vigil_operator_webhook_errors_total", webhook="inject-sidecar"),
            lambda n: n == 1,
            timeout=bound(5),
            what="the unservable request counted",
        )
        assert reading(errors(), "vigil_operator_webhook_errors_total", webhook="one-cr-per-group") == 0
    finally:
        operator.stop()
        _delete_managed(admission)
