"""The hand-written CRD and the pydantic models are one contract: same fields, enums, bounds, defaults, rules.

The CRD is what the apiserver enforces and the models are what the operator reads, so any drift means a CR the
cluster accepts and the operator refuses (or the reverse). tests/integration/test_crd_apiserver.py asks the real
apiserver the same questions and reuses `specs()`, `problems()` and the fixture readers from here.
"""

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter

from vigil_core import crd, liveness, rules
from vigil_core.kafka.security import Mechanism, Protocol
from vigil_core.liveness import StallAction
from vigil_operator.domain import spec as spec_model
from vigil_operator.domain.spec import ConsumerGroupSpec, SpecError, impossible, parse_spec
from vigil_operator.domain.status import RFC3339_PATTERN, ConsumerGroupStatus

ROOT = Path(__file__).resolve().parents[3]
CRD_FILE = ROOT / "crds" / "consumergroups.vigil.dev.yaml"
EXAMPLES = sorted((ROOT / "examples" / "consumergroups").glob("*.yaml"))
INVALID = sorted((Path(__file__).parents[1] / "fixtures" / "consumergroups" / "invalid").glob("*.yaml"))
EXPECT = re.compile(r"^# (expect|expect-apiserver|expect-model|expect-status): (.+)$")

CRD: dict[str, Any] = yaml.safe_load(CRD_FILE.read_text())
VERSION = CRD["spec"]["versions"][0]
ROOT_SCHEMA: dict[str, Any] = VERSION["schema"]["openAPIV3Schema"]


# -- shared with the apiserver test -------------------------------------------------------------------------


@dataclass(frozen=True)
class Invalid:
    """An invalid CR and the substrings each side's rejection must contain (`# expect…:` comment lines)."""

    path: Path
    cr: dict[str, Any]
    apiserver: tuple[str, ...]
    model: tuple[str, ...]
    status: int = 422
    """The apiserver's HTTP status: 422 Invalid, or 400 for a strict-decoding error (an unknown field)."""


def read_invalid(path: Path) -> Invalid:
    text = path.read_text()
    found = [m.groups() for m in map(EXPECT.match, text.splitlines()) if m]
    both = [t for k, t in found if k == "expect"]
    return Invalid(
        path,
        yaml.safe_load(text),
        apiserver=(*both, *(t for k, t in found if k == "expect-apiserver")),
        model=(*both, *(t for k, t in found if k == "expect-model")),
        status=int(next((t for k, t in found if k == "expect-status"), 422)),
    )


def cel_rules() -> list[dict[str, Any]]:
    """Every x-kubernetes-validations rule in the schema."""
    found: list[dict[str, Any]] = []

    def walk(node: dict[str, Any]) -> None:
        found.extend(node.get("x-kubernetes-validations", []))
        for child in [*node.get("properties", {}).values(), node.get("items"), node.get("additionalProperties")]:
            if isinstance(child, dict):
                walk(child)

    walk(ROOT_SCHEMA)
    return found


def problems(spec: dict[str, Any]) -> list[str]:
    """Every impossible() problem of a spec whose parts are each valid (the whole is not validated, so none hides
    behind the first, as parse_spec's single line would)."""
    fields = {
        name: TypeAdapter(info.annotation).validate_python(spec[info.alias])
        for name, info in ConsumerGroupSpec.model_fields.items()
        if info.alias in spec
    }
    return impossible(ConsumerGroupSpec.model_construct(**fields))


def values(enum: Any) -> st.SearchStrategy[str]:
    return st.sampled_from([m.value for m in enum])


REF = st.fixed_dictionaries({"name": st.just("kafka-secrets"), "key": st.sampled_from(["user", "password", "ca"])})
SASL_PROTOCOLS = {Protocol.SASL_PLAINTEXT.value, Protocol.SASL_SSL.value}
TLS_PROTOCOLS = {Protocol.SSL.value, Protocol.SASL_SSL.value}


@st.composite
def kafkas(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly coherent protocol/sasl/tls combinations, with every incoherent one reachable."""
    kafka: dict[str, Any] = {"bootstrapServers": "kafka:9092"}
    protocol = draw(st.sampled_from([None, *(p.value for p in Protocol)]))
    if protocol is not None:
        kafka["securityProtocol"] = protocol
    if draw(st.sampled_from([protocol in SASL_PROTOCOLS] * 3 + [protocol not in SASL_PROTOCOLS])):
        sasl = {"mechanism": draw(values(Mechanism)), "passwordSecretRef": draw(REF)}
        user = draw(st.sampled_from(["inline", "ref", "inline", "ref", "both", "none"]))
        if user in ("inline", "both"):
            sasl["username"] = "app"
        if user in ("ref", "both"):
            sasl["usernameSecretRef"] = draw(REF)
        kafka["sasl"] = sasl
    if draw(st.sampled_from([False, protocol in TLS_PROTOCOLS, protocol in TLS_PROTOCOLS, True])):
        tls = draw(st.fixed_dictionaries({}, optional={"caSecretRef": REF, "checkHostname": st.booleans()}))
        pair = draw(st.sampled_from(["none", "both", "both", "cert", "key"]))
        if pair in ("both", "cert"):
            tls["certSecretRef"] = draw(REF)
        if pair in ("both", "key"):
            tls["keySecretRef"] = draw(REF)
        kafka["tls"] = tls
    if draw(st.booleans()):
        kafka["clusterName"] = "main"
    return kafka


@st.composite
def workloads(draw: st.DrawFn) -> dict[str, Any]:
    shape = draw(st.sampled_from(["kind+name", "kind+name", "kind+name", "selector", "selector", "kind", "name",
                                  "kind+name+selector", ""]))  # fmt: skip
    workload: dict[str, Any] = {}
    if "kind" in shape:
        workload["kind"] = draw(values(spec_model.WorkloadKind))
    if "name" in shape:
        workload["name"] = "orders"
    if "selector" in shape:
        workload["selector"] = {"matchLabels": {"app": "orders"}}
    if draw(st.booleans()):
        workload["serviceAccountName"] = "orders"
    return workload


QUANTITIES = st.dictionaries(st.sampled_from(["cpu", "memory"]), st.sampled_from([1, 0, "500m", "64Mi", "1e3"]))
OPTIONAL_PARTS: dict[str, st.SearchStrategy[Any]] = {
    "membership": values(spec_model.Membership),
    "liveness": st.fixed_dictionaries(
        {},
        optional={
            "signal": values(liveness.Signal),
            "stallTimeoutSeconds": st.sampled_from([1, 2.5, 60, 86400]),
            "action": values(StallAction),
            "cooldownSeconds": st.sampled_from([1, 600.5, 86400]),
            "maxConcurrentEvictions": st.integers(1, 1000),
            "systemicStallPercent": st.sampled_from([0.5, 50, 100]),
            "bridge": st.fixed_dictionaries(
                {},
                optional={
                    "enabled": st.booleans(),
                    "maxBridgeSeconds": st.sampled_from([0.1, 120, 3600]),
                    "onForeignRebalance": values(liveness.ForeignRebalance),
                },
            ),
        },
    ),
    "client": st.fixed_dictionaries(
        {},
        optional={
            "groupProtocol": values(rules.GroupProtocol),
            "sessionTimeoutMs": st.integers(1, 60_000),
            "heartbeatIntervalMs": st.integers(1, 60_000),
            "maxPollIntervalMs": st.integers(1, 10**7),
        },
    ),
    "restart": st.fixed_dictionaries(
        {},
        optional={
            "strategy": values(spec_model.RestartStrategy),
            "maxRestartSeconds": st.sampled_from([1, 300, 3600]),
        },
    ),
    "sidecar": st.fixed_dictionaries(
        {},
        optional={
            "mode": values(spec_model.SidecarMode),
            "image": st.just("registry.example.com/vigil:0.1.0"),
            "resources": st.fixed_dictionaries({}, optional={"requests": QUANTITIES, "limits": QUANTITIES}),
        },
    ),
}


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    """Specs whose every value is in range: only the cross-field rules (impossible() / CEL) can refuse them."""
    spec: dict[str, Any] = {
        "groupId": draw(st.sampled_from(["orders", "g" * 249])),
        "kafka": draw(kafkas()),
        "workload": draw(workloads()),
    }
    for key, part in OPTIONAL_PARTS.items():
        if draw(st.booleans()):
            spec[key] = draw(part)
    return spec


# -- the schema as a comparable view ------------------------------------------------------------------------

KEEP = {"type", "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
        "minProperties", "maxProperties", "minItems", "maxItems", "pattern", "format"}  # fmt: skip


def with_defaults(schema: dict[str, Any], value: Any) -> Any:
    """`value` with the schema's nested defaults applied, as the apiserver's structural defaulting does."""
    if isinstance(value, dict) and "properties" in schema:
        out = dict(value)
        for name, sub in schema["properties"].items():
            if name not in out and "default" in sub:
                out[name] = copy.deepcopy(sub["default"])
            if name in out:
                out[name] = with_defaults(sub, out[name])
        return out
    if isinstance(value, list) and "items" in schema:
        return [with_defaults(schema["items"], v) for v in value]
    return value


def crd_view(node: dict[str, Any]) -> dict[str, Any]:
    """The CRD schema with Kubernetes' spellings turned into JSON Schema's (what pydantic emits)."""
    if node.get("x-kubernetes-int-or-string"):
        return {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": node["pattern"]}]}
    out: dict[str, Any] = {k: v for k, v in node.items() if k in KEEP}
    if node.get("x-kubernetes-preserve-unknown-fields") and "properties" not in node:
        out["additionalProperties"] = True
    if "properties" in node:
        out["properties"] = {k: crd_view(v) for k, v in node["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            out[key] = crd_view(node[key])
    if node.get("required"):
        out["required"] = sorted(node["required"])
    if "default" in node:
        out["default"] = with_defaults(node, node["default"])
    return out


def _no_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _no_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_no_nulls(v) for v in value]
    return value


def model_view(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON Schema, refs resolved and Optional unwrapped (absent is how a CR says None)."""
    schema = model.model_json_schema(by_alias=True)
    return _model_node(schema, schema.get("$defs", {}))


def _model_node(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        node = {**defs[node["$ref"].rsplit("/", 1)[1]], **{k: v for k, v in node.items() if k != "$ref"}}
    options = [o for o in node.get("anyOf", []) if o != {"type": "null"}]
    if len(options) == 1:
        rest = {k: v for k, v in node.items() if k != "anyOf" and not (k == "default" and v is None)}
        return _model_node({**options[0], **rest}, defs)
    out: dict[str, Any] = {k: v for k, v in node.items() if k in KEEP}
    if "exclusiveMinimum" in node:  # JSON Schema 2020-12 → OpenAPI v3.0, as apiextensions.k8s.io spells it
        out |= {"minimum": node["exclusiveMinimum"], "exclusiveMinimum": True}
    if node.get("pattern") == RFC3339_PATTERN:
        del out["pattern"]
        out["format"] = "date-time"
    if "anyOf" in node:
        out["anyOf"] = [_model_node(o, defs) for o in node["anyOf"]]
    if "properties" in node:
        out["properties"] = {k: _model_node(v, defs) for k, v in node["properties"].items()}
    if "items" in node:
        out["items"] = _model_node(node["items"], defs)
    additional = node.get("additionalProperties")
    if additional is True or isinstance(additional, dict):  # False (extra="forbid") ≙ the apiserver's pruning
        out["additionalProperties"] = additional if additional is True else _model_node(additional, defs)
    if node.get("required"):
        out["required"] = sorted(node["required"])
    if "default" in node:
        out["default"] = _no_nulls(node["default"])
    return out


def differences(crd: Any, model: Any, path: str = "") -> list[str]:
    """Where the two views differ, one line each, named by schema path."""
    if isinstance(crd, dict) and isinstance(model, dict):
        out = []
        for key in sorted(crd.keys() | model.keys(), key=str):
            where = path if key == "properties" else f"{path}.{key}"
            if key not in model:
                out.append(f"{where}: only in the CRD ({crd[key]!r})")
            elif key not in crd:
                out.append(f"{where}: only in the model ({model[key]!r})")
            else:
                out.extend(differences(crd[key], model[key], where))
        return out
    if crd != model or isinstance(crd, bool) != isinstance(model, bool):
        return [f"{path}: CRD {crd!r} != model {model!r}"]
    return []


# -- the tests ----------------------------------------------------------------------------------------------


def test_crd_identity_matches_core_constants() -> None:
    names = CRD["spec"]["names"]
    assert CRD["metadata"]["name"] == f"{crd.PLURAL}.{crd.API_GROUP}"
    assert (CRD["spec"]["group"], CRD["spec"]["scope"]) == (crd.API_GROUP, "Namespaced")
    assert (names["kind"], names["plural"], names["singular"]) == (crd.KIND, crd.PLURAL, "consumergroup")
    assert (names["shortNames"], names["categories"]) == ([crd.SHORT_NAME], ["vigil"])
    assert [(v["name"], v["served"], v["storage"]) for v in CRD["spec"]["versions"]] == [(crd.VERSION, True, True)]
    assert VERSION["subresources"] == {"status": {}}


@pytest.mark.parametrize(("part", "model"), [("spec", ConsumerGroupSpec), ("status", ConsumerGroupStatus)])
def test_schema_and_model_agree_field_for_field(part: str, model: type[BaseModel]) -> None:
    """Names both ways, types, enums (in order), bounds, required lists and defaults (nested ones applied)."""
    assert differences(crd_view(ROOT_SCHEMA["properties"][part]), model_view(model)) == []


def prop(schema: dict[str, Any], dotted: str) -> dict[str, Any]:
    for name in dotted.split("."):
        schema = schema["properties"][name]
    return schema


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda s: prop(s, "liveness.bridge")["properties"].pop("enabled"), ".enabled: only in the model"),
        (lambda s: prop(s, "client.groupProtocol").update(default="consumer"), ".groupProtocol.default"),
        (lambda s: prop(s, "membership")["enum"].reverse(), ".membership.enum"),
        (lambda s: prop(s, "restart.maxRestartSeconds").update(maximum=7200), ".maxRestartSeconds.maximum"),
        (lambda s: prop(s, "kafka")["required"].append("clusterName"), ".kafka.required"),
        (lambda s: prop(s, "liveness.systemicStallPercent").pop("exclusiveMinimum"), ".exclusiveMinimum"),
        (lambda s: prop(s, "liveness.bridge").update(default={"enabled": True}), ".bridge.default.enabled"),
    ],
)
def test_the_comparison_notices_drift(mutate: Any, expected: str) -> None:
    drifted = copy.deepcopy(ROOT_SCHEMA["properties"]["spec"])
    mutate(drifted)
    found = differences(crd_view(drifted), model_view(ConsumerGroupSpec))
    assert found
    assert any(expected in line for line in found), found


def test_status_conditions_are_a_map_list_keyed_on_type_and_report_is_preserved() -> None:
    status = ROOT_SCHEMA["properties"]["status"]["properties"]
    conditions = status["conditions"]
    assert (conditions["x-kubernetes-list-type"], conditions["x-kubernetes-list-map-keys"]) == ("map", ["type"])
    assert set(conditions["items"]["properties"]) == {
        "type", "status", "reason", "message", "lastTransitionTime", "observedGeneration"
    }  # fmt: skip
    assert status["report"] == status["report"] | {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def schema_at(json_path: str) -> dict[str, Any]:
    """The schema node a printer column's JSONPath reads (filters like [?(@.type=="Ready")] select list items)."""
    node = ROOT_SCHEMA
    for part in re.sub(r"\[[^\]]*\]", "[]", json_path).lstrip(".").split("."):
        node = node["properties"][part.removesuffix("[]")]
        if part.endswith("[]"):
            node = node["items"]
    return node


COLUMN_TYPES = {"integer": ("integer", None), "string": ("string", None), "date": ("string", "date-time")}


@pytest.mark.parametrize("column", VERSION["additionalPrinterColumns"], ids=lambda c: c["name"])
def test_printer_columns_read_paths_the_schema_has(column: dict[str, Any]) -> None:
    if column["jsonPath"] == ".metadata.creationTimestamp":  # metadata's schema is the apiserver's, not ours
        assert column["type"] == "date"
        return
    node = schema_at(column["jsonPath"])
    assert (node.get("type"), node.get("format")) == COLUMN_TYPES[column["type"]]


def test_printer_columns_are_the_documented_ones() -> None:
    columns = [(c["name"], c.get("priority", 0)) for c in VERSION["additionalPrinterColumns"]]
    assert columns == [("Group", 0), ("State", 0), ("Members", 0), ("Stalled", 0), ("Ready", 0),
                       ("Age", 0), ("Protocol", 1), ("Generation", 1), ("LastRebalance", 1)]  # fmt: skip


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_parses(path: Path) -> None:
    cr = yaml.safe_load(path.read_text())
    assert (cr["apiVersion"], cr["kind"]) == (f"{crd.API_GROUP}/{crd.VERSION}", crd.KIND)
    assert problems(cr["spec"]) == []
    parse_spec(cr["spec"])


def test_the_examples_cover_the_documented_shapes() -> None:
    parsed = [parse_spec(yaml.safe_load(p.read_text())["spec"]) for p in EXAMPLES]
    assert any(s.workload.kind is spec_model.WorkloadKind.DEPLOYMENT and s.liveness.signal is liveness.Signal.BEACON
               and s.liveness.effective_action is StallAction.LEAVE_GROUP for s in parsed)  # fmt: skip
    assert any(s.membership is spec_model.Membership.STATIC and s.client.session_timeout_ms
               and s.restart.strategy is spec_model.RestartStrategy.COORDINATED and s.liveness.bridge.enabled
               for s in parsed)  # fmt: skip
    assert any(s.kafka.security_protocol is Protocol.SASL_SSL and s.kafka.sasl and s.kafka.sasl.username_secret_ref
               for s in parsed)  # fmt: skip
    assert any(s.workload.selector and s.liveness.signal is liveness.Signal.PROGRESS
               and s.liveness.effective_action is StallAction.ALERT for s in parsed)  # fmt: skip


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_every_invalid_fixture_is_refused_with_its_expectation(path: Path) -> None:
    case = read_invalid(path)
    assert case.apiserver
    assert case.model
    with pytest.raises(SpecError) as refused:
        parse_spec(case.cr["spec"])
    message = str(refused.value)
    assert "\n" not in message
    for expected in case.model:
        assert expected in message


def test_every_cel_rule_has_a_fixture_and_says_what_impossible_says() -> None:
    expectations = {e for p in INVALID for e in read_invalid(p).apiserver}
    # a transition rule (oldSelf) binds updates only: tested on the apiserver (test_crd_apiserver.py)
    messages = [r["message"] for r in cel_rules() if "oldSelf" not in r["rule"]]
    assert len(messages) == 8
    assert [r["message"] for r in cel_rules() if "oldSelf" in r["rule"]] == [
        "spec.groupId is immutable: create another ConsumerGroup for another group"
    ]
    assert not set(messages) - expectations
    for path in INVALID:
        case = read_invalid(path)
        if set(case.model) & set(messages):
            assert problems(case.cr["spec"]) == [m for m in case.model if m in messages]


@settings(max_examples=400, deadline=None)
@given(spec=specs())
def test_parse_spec_accepts_exactly_the_possible_specs(spec: dict[str, Any]) -> None:
    """No crash and no other exception: a SpecError naming the first problem, or a spec with none."""
    expected = problems(spec)
    if expected:
        with pytest.raises(SpecError) as refused:
            parse_spec(spec)
        assert str(refused.value) == expected[0]
    else:
        assert impossible(parse_spec(spec)) == []
