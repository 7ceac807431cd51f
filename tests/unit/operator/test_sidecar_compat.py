"""The operator tolerates sidecars one release older, interface by interface (operator/vigil_operator/COMPATIBILITY.md).

Each recorded release (`fixtures/sidecar-compat/<version>/`, written by the real encoders of that release with
`vigil_dev.testing.sidecar_compat`; events: `fixtures/events/v<N>/`) goes through today's readers: (a) as recorded,
(b) without every field the reader treats as optional, (c) with unknown fields added everywhere, (d) as a future
incompatible version, which is refused with one line, never a crash. Each reader is the one the operator (or, for
the injected env, the sidecar) runs.
"""

import asyncio
import copy
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import BaseModel

from vigil_core import events as ev
from vigil_core.bridge import engine as bridge
from vigil_core.budget import ledger
from vigil_core.errors import ConfigError
from vigil_dev.testing import pod_env as kubelet
from vigil_dev.testing import sidecar_compat
from vigil_operator.domain import stalls
from vigil_operator.rollouts import Rollouts, StepRefusedError
from vigil_sidecar import config, server
from vigil_sidecar.metrics import Metrics
from vigil_sidecar.runtime import Sidecar

FIXTURES = Path(__file__).parents[1] / "fixtures"
RELEASES = sorted((FIXTURES / "sidecar-compat").glob("[0-9]*"), key=lambda p: tuple(map(int, p.name.split("."))))
EVENTS = sorted((FIXTURES / "events").glob("v*/*.json"))
UNKNOWN = {"added_later": {"nested": [1, "two"]}}
"""What a newer writer may add to any object."""
NOW = sidecar_compat.NOW


def _load(release: Path, name: str) -> Any:
    return json.loads((release / name).read_text())


def _with_unknown(value: Any, *, maps: frozenset[str] = frozenset(), keyed: bool = False) -> Any:
    """`value` with UNKNOWN added to every object in it; the objects under a key in `maps` are maps (their keys are
    data, e.g. pod names): only their values get it."""
    if isinstance(value, dict):
        inner = {k: _with_unknown(v, maps=maps, keyed=k in maps) for k, v in value.items()}
        return inner if keyed else {**inner, **copy.deepcopy(UNKNOWN)}
    if isinstance(value, list):
        return [_with_unknown(v, maps=maps) for v in value]
    return value


def _one_line(exc: BaseException) -> str:
    message = str(exc)
    assert message
    assert "\n" not in message
    return message


def releases(name: str) -> Any:
    return pytest.mark.parametrize("release", RELEASES, ids=lambda p: f"{p.name}/{name}")


def test_a_release_is_recorded_and_todays_writers_still_write_every_recorded_field() -> None:
    """Additive on the writers' side too: a field a recorded release wrote is still written (an older reader of
    it may need it)."""
    assert RELEASES, "no recorded release under fixtures/sidecar-compat"
    newest = RELEASES[-1]
    today = {
        "status.json": sidecar_compat.status(),
        "budget-ledger.json": json.loads(sidecar_compat.budget_ledger()),
        "bridge-state.json": json.loads(sidecar_compat.bridge_state()),
    }
    for name, written in today.items():
        assert _paths(_load(newest, name)) <= _paths(written), name


def _paths(value: Any, prefix: str = "") -> set[str]:
    if isinstance(value, dict):
        return {p for k, v in value.items() for p in {f"{prefix}{k}"} | _paths(v, f"{prefix}{k}.")}
    return set()


# -- GET /v1/status: the operator reads a pod's member before each coordinated-restart step ---------------------


class _Serve:
    """A loopback HTTP server answering `GET /v1/status` with `body` (the sidecar's side of the wire)."""

    def __init__(self, body: bytes) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200 if self.path == "/v1/status" else 404)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _member_of(body: Any) -> bridge.Member:
    served = _Serve(json.dumps(body).encode())
    try:
        return asyncio.run(Rollouts().member_of(served.url, "orders-0"))
    finally:
        served.close()


STATUS_READ = {"member": {"member_id", "instance_id", "generation"}}
"""All the operator reads of /v1/status: anything else may come and go."""


@releases("status")
def test_status_as_recorded_is_read(release: Path) -> None:
    recorded = _load(release, "status.json")
    member = recorded["member"]
    assert _member_of(recorded) == bridge.Member(member["member_id"], member["generation"], member["instance_id"])


@releases("status")
def test_status_without_everything_the_operator_does_not_read_is_read(release: Path) -> None:
    recorded = _load(release, "status.json")
    minimal = {"member": {k: v for k, v in recorded["member"].items() if k in STATUS_READ["member"]}}
    assert set(recorded) - set(minimal)  # there was something to leave out
    assert _member_of(minimal) == _member_of(recorded)


@releases("status")
def test_status_with_unknown_fields_is_read_alike(release: Path) -> None:
    recorded = _load(release, "status.json")
    assert _member_of(_with_unknown(recorded)) == _member_of(recorded)


@pytest.mark.parametrize(
    "body",
    [
        {"v": 2, "members": [{"id": "m-1", "generation": 7}]},
        {"member": ["orders-0-5f0c2a9e", 7]},
        {"member": {"member_id": "orders-0-5f0c2a9e", "instance_id": "shop-orders-0", "generation": "7"}},
    ],
    ids=["member renamed", "member not an object", "generation retyped"],
)
def test_an_incompatible_status_refuses_the_step_in_one_line(body: dict[str, Any]) -> None:
    with pytest.raises(StepRefusedError) as refused:
        _member_of(body)
    assert _one_line(refused.value).startswith("orders-0: its sidecar knows no static member with a generation")


# -- the budget Lease's ledger: sidecars and the operator read and rewrite each other's records -------------------


def _operator_removal(text: str) -> str:
    """What `lease_api.request_removal` does to the annotation: read, decide, write back."""
    decided = ledger.decide_removal(ledger.loads(text), "orders-9", NOW + 5, member_id="orders-9-cc",
                                    proven_gone=True, max_concurrent=1, cooldown=60)  # fmt: skip
    assert isinstance(decided, ledger.Permit)
    assert decided.ledger.permits[-1] == ledger.PermitRecord("orders-9", "orders-9-cc", NOW + 5)
    return ledger.dumps(decided.ledger)


@releases("ledger")
def test_the_ledger_as_recorded_is_read_and_kept_by_the_operators_rewrite(release: Path) -> None:
    recorded = _load(release, "budget-ledger.json")
    book = ledger.loads(json.dumps(recorded))
    assert set(book.members) == set(recorded["members"])
    assert [(p.pod, p.member_id) for p in book.permits] == [(p["pod"], p["member"]) for p in recorded["permits"]]
    rewritten = json.loads(_operator_removal(json.dumps(recorded)))
    assert rewritten["members"] == recorded["members"]
    assert rewritten["permits"][: len(recorded["permits"])] == recorded["permits"]


LEDGER_OPTIONAL_MEMBER_FIELDS = ("asked",)
LEDGER_OPTIONAL_TOP_FIELDS = ("members", "permits", "handoffs", "poison")


@releases("ledger")
def test_the_ledger_without_its_optional_fields_is_read(release: Path) -> None:
    recorded = _load(release, "budget-ledger.json")
    bare = copy.deepcopy(recorded)
    for entry in bare["members"].values():
        for name in LEDGER_OPTIONAL_MEMBER_FIELDS:
            entry.pop(name, None)
    assert bare != recorded  # something optional was recorded
    assert all(e.asked is None for e in ledger.loads(json.dumps(bare)).members.values())
    assert json.loads(_operator_removal(json.dumps(bare)))["members"] == bare["members"]
    empty = {k: v for k, v in recorded.items() if k not in LEDGER_OPTIONAL_TOP_FIELDS}
    assert ledger.loads(json.dumps(empty)) == ledger.Ledger()


@releases("ledger")
def test_unknown_ledger_fields_are_ignored_and_kept_on_every_rewrite(release: Path) -> None:
    """A newer writer's fields survive an older reader's write: the operator's removal and a sidecar's publish."""
    extended = _with_unknown(_load(release, "budget-ledger.json"), maps=frozenset({"members"}))
    after_operator = json.loads(_operator_removal(json.dumps(extended)))
    book = ledger.loads(json.dumps(after_operator))
    after_sidecar = json.loads(ledger.dumps(ledger.publish(book, "orders-1", 0.2, NOW + 6)))
    for written in (after_operator, after_sidecar):
        assert written["added_later"] == UNKNOWN["added_later"]
        assert all(written["members"][pod]["added_later"] for pod in extended["members"])
        assert all(p["added_later"] for p in written["permits"][: len(extended["permits"])])


def test_a_newer_ledger_version_of_the_same_shape_is_read() -> None:
    recorded = _load(RELEASES[-1], "budget-ledger.json")
    assert ledger.loads(json.dumps(recorded | {"v": 7})).members == ledger.loads(json.dumps(recorded)).members


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(members=[]), "vigil.dev/budget: members must be an object"),
        (lambda d: d.update(permits={}), "vigil.dev/budget: permits must be a list"),
        (lambda d: d.update(v="2.0"), 'vigil.dev/budget: v must be an integer, got "2.0"'),
        (lambda d: d["members"]["orders-0"].update(age="31s"), "vigil.dev/budget: members.orders-0.age must be"),
    ],
    ids=["members", "permits", "version", "entry"],
)
def test_an_incompatible_ledger_is_refused_in_one_line(change: Callable[[dict[str, Any]], None], message: str) -> None:
    """Refused, not guessed: `lease_api.update` turns it into BudgetUnavailable("bad-ledger") — the sidecar only
    alerts, the operator removes only members proven gone (and logs one line)."""
    changed = _load(RELEASES[-1], "budget-ledger.json")
    change(changed)
    with pytest.raises(ledger.LedgerDecodeError) as refused:
        ledger.loads(json.dumps(changed))
    assert _one_line(refused.value).startswith(message)


# -- status.rollout.bridge: an upgraded operator resumes the bridge its predecessor persisted -----------------------


def _resumed(text: str) -> bridge.BridgeState:
    """What `shells.rollout.RolloutShell._resume` does: decode, then the runner first observes Resumed."""
    state = bridge.BridgeState.from_json(text)
    stepped, _ = bridge.step(state, bridge.Resumed(), NOW + 1)
    assert stepped.ended is None
    return state


@releases("bridge")
def test_the_bridge_as_recorded_resumes(release: Path) -> None:
    recorded = _load(release, "bridge-state.json")
    state = _resumed(json.dumps(recorded))
    assert (state.member_id, state.generation, state.instance_id) == (
        recorded["member_id"], recorded["generation"], recorded["instance_id"])  # fmt: skip
    written = json.loads(state.to_json())
    added = {name: value for name, value in written["config"].items() if name not in recorded["config"]}
    assert added == {name: ADDED_SINCE[name] for name in added}, added  # only fields added since, at their defaults
    state_added = {name: value for name, value in written.items() if name not in recorded}
    assert state_added == {name: STATE_ADDED_SINCE[name] for name in state_added}, state_added
    assert {k: v for k, v in written.items() if k not in state_added} | {"config": recorded["config"]} == recorded
    assert {k: v for k, v in written["config"].items() if k not in added} == recorded["config"]


ADDED_SINCE = {"session_timeout": None}
"""`BridgeConfig` fields added after the recorded releases, with the default a resumed older state takes."""
STATE_ADDED_SINCE = {"protocol": "classic", "release_due": False}
"""`BridgeState` fields added after the recorded releases (KIP-848 bridging), with their defaults."""


BRIDGE_DEFAULTED = {
    "state": ("heartbeats_sent", "in_flight", "remove_at", "remove_cause", "last_error", "ended"),
    "config": ("on_foreign_rebalance", "expected_return_seconds", "crash_window_seconds", "crash_loop_restarts"),
}
"""The fields `BridgeState`/`BridgeConfig` give a default: the ones a field added later would join."""


@releases("bridge")
def test_the_bridge_without_its_defaulted_fields_resumes_with_the_defaults(release: Path) -> None:
    bare = _load(release, "bridge-state.json")
    for name in BRIDGE_DEFAULTED["state"]:
        bare.pop(name)
    for name in BRIDGE_DEFAULTED["config"]:
        bare["config"].pop(name)
    state = _resumed(json.dumps(bare))
    assert state.heartbeats_sent == 0
    assert state.config.crash_loop_restarts == bridge.BridgeConfig(1.0, 2.0).crash_loop_restarts


@releases("bridge")
def test_the_bridge_with_unknown_fields_resumes_alike(release: Path) -> None:
    recorded = _load(release, "bridge-state.json")
    extended = recorded | copy.deepcopy(UNKNOWN) | {"config": recorded["config"] | copy.deepcopy(UNKNOWN)}
    assert _resumed(json.dumps(extended)) == _resumed(json.dumps(recorded))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("generation"), "not a bridge state: generation is missing"),
        (lambda d: d.update(proof="operator-said-so"), "not a bridge state: proof must be 'helper-connection-closed',"),
        (lambda d: d.update(config=[3.0, 600.0]), "not a bridge state: config must be an object, got [3.0, 600.0]"),
        (lambda d: d.update(v=None), "not a bridge state: v must be an integer, got null"),
    ],
    ids=["field gone", "new vocabulary", "config reshaped", "no version"],
)
def test_an_incompatible_bridge_is_refused_in_one_line(change: Callable[[dict[str, Any]], None], message: str) -> None:
    """The rollout shell's `_resume` logs it once ("the persisted rollout bridge is unreadable") and does not resume."""
    changed = _load(RELEASES[-1], "bridge-state.json")
    change(changed)
    with pytest.raises(bridge.BridgeDecodeError) as refused:
        bridge.BridgeState.from_json(json.dumps(changed))
    assert _one_line(refused.value).startswith(message)


# -- the events topic: the operator folds the sidecars' events into who is stalled (event_feed → stalls) -----------


def _model(data: dict[str, Any]) -> type[BaseModel]:
    return next(m for m in ev.EVENT_MODELS if m.model_fields["type"].default == data["type"])


def _nested(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for a in get_args(annotation) if (m := _nested(a)) is not None), None)


def _required_only(data: Any, model: type[BaseModel]) -> Any:
    """`data` without every field its model gives a default (the discriminator `type` kept)."""
    out = {}
    for name, value in data.items():
        field = model.model_fields[name]
        if name != "type" and not field.is_required():
            continue
        inner = _nested(field.annotation)
        if inner is not None and isinstance(value, dict):
            out[name] = _required_only(value, inner)
        elif inner is not None and isinstance(value, list):
            out[name] = [_required_only(v, inner) for v in value]
        else:
            out[name] = value
    return out


def _folded(event: ev.Event) -> stalls.StallBook:
    """What `EventFeed._take` does with a decoded record."""
    book = stalls.EMPTY.record(event)
    member = getattr(event.payload, "member", None)
    key = (event.group, member.member_id) if member is not None else None
    if isinstance(event, ev.StallDetected):
        assert key in book.reports
    elif isinstance(event, ev.StallEnded | ev.EvictionDone):
        assert book.ended[key] == event.time  # type: ignore[index]
    else:
        assert book == stalls.EMPTY
    return book


def event_files() -> Any:
    return pytest.mark.parametrize("path", EVENTS, ids=lambda p: f"{p.parent.name}/{p.stem}")


@event_files()
def test_every_recorded_event_is_read(path: Path) -> None:
    _folded(ev.parse_event(path.read_bytes()))


@event_files()
def test_every_recorded_event_without_its_optional_fields_is_read(path: Path) -> None:
    recorded = json.loads(path.read_text())
    bare = _required_only(recorded, _model(recorded))
    assert bare != recorded  # every envelope has optional fields (schema_version, event_id, namespace, pod)
    event = ev.parse_event(json.dumps(bare).encode())
    assert (event.type, event.group, event.pod) == (recorded["type"], recorded["group"], None)
    _folded(event)


@event_files()
def test_every_recorded_event_with_unknown_fields_is_read_alike(path: Path) -> None:
    recorded = json.loads(path.read_text())
    event = ev.parse_event(json.dumps(_with_unknown(recorded)).encode())
    assert event == ev.parse_event(path.read_bytes())
    assert _folded(event) == _folded(ev.parse_event(path.read_bytes()))


def test_a_newer_schema_version_of_a_known_type_is_read() -> None:
    recorded = json.loads((FIXTURES / "events" / "v1" / "stall-detected.json").read_text())
    newer = _with_unknown(recorded) | {"schema_version": ev.SCHEMA_VERSION + 5}
    assert _folded(ev.parse_event(json.dumps(newer).encode())).reports


def test_an_event_type_this_operator_does_not_know_is_refused_in_one_line() -> None:
    """An incompatible change is a new type (vigil_core.events): the feed counts it as undecodable and skips it."""
    recorded = json.loads((FIXTURES / "events" / "v1" / "stall-detected.json").read_text())
    future = recorded | {"type": "stall-detected-v2", "schema_version": ev.SCHEMA_VERSION + 1}
    with pytest.raises(ev.EventDecodeError) as refused:
        ev.parse_event(json.dumps(future).encode())
    assert _one_line(refused.value).startswith("not a vigil event: record: Input tag 'stall-detected-v2'")


# -- the injected sidecar: the env and paths the webhook gives the sidecar ---------------------------------------


def _groups() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for release in RELEASES:
        for name, group in _load(release, "injected-sidecar.json")["groups"].items():
            yield release.name, name, group


GROUPS = list(_groups())


def groups() -> Any:
    return pytest.mark.parametrize(("release", "name", "group"), GROUPS, ids=[f"{r}/{n}" for r, n, _ in GROUPS])


def _sidecar(pod: dict[str, Any]) -> dict[str, Any]:
    every = [*(pod["spec"].get("initContainers") or []), *pod["spec"]["containers"]]
    found: dict[str, Any] = next(c for c in every if c["name"] == "vigil-sidecar")
    return found


def _env(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """The container's environment as a kubelet resolves it (downward API, `$(VAR)`, Secret keys)."""
    refs = [e["valueFrom"]["secretKeyRef"] for e in container["env"] if "secretKeyRef" in e.get("valueFrom", {})]
    secrets: dict[str, dict[str, str]] = {}
    for ref in refs:
        secrets.setdefault(ref["name"], {})[ref["key"]] = "from-a-secret"
    admitted = copy.deepcopy(pod)
    admitted["metadata"]["uid"] = "u-1"
    ctx = kubelet.Context(pod_ip="10.77.128.7", host_ip="10.77.0.1", node="node-real", secrets=secrets)
    return kubelet.resolve_env(container, admitted, ctx)


@groups()
def test_the_recorded_injection_starts_todays_sidecar(release: str, name: str, group: dict[str, Any]) -> None:
    settings, _, _ = config.load(_env(group["pod"], _sidecar(group["pod"])))
    assert settings.group_id == group["spec"]["groupId"]
    assert settings.signal.value == group["spec"].get("liveness", {}).get("signal", "beacon")


@groups()
def test_the_recorded_injection_without_its_defaulted_settings_starts_todays_sidecar(
    release: str, name: str, group: dict[str, Any]
) -> None:
    env = _env(group["pod"], _sidecar(group["pod"]))
    defaulted = {f"VIGIL_{n.upper()}" for n, f in config.SidecarSettings.model_fields.items() if not f.is_required()}
    bare = {k: v for k, v in env.items() if k not in defaulted}
    assert set(env) - set(bare)
    settings, _, _ = config.load(bare)
    assert settings.group_id == group["spec"]["groupId"]


@groups()
def test_variables_the_sidecar_does_not_know_are_ignored(release: str, name: str, group: dict[str, Any]) -> None:
    """What lets a newer webhook add a variable for sidecars one release older."""
    env = _env(group["pod"], _sidecar(group["pod"]))
    newer = env | {"VIGIL_ADDED_LATER": "x", "VIGIL_KAFKA_ADDED_LATER": "y"}
    assert config.load(newer)[:2] == config.load(env)[:2]


@groups()
def test_todays_webhook_changes_no_variable_an_older_sidecar_was_given(
    release: str, name: str, group: dict[str, Any]
) -> None:
    """For the same ConsumerGroup, today's injection only adds: every variable and port the recorded webhook gave
    the sidecar is given again with the same value, and its probe is unchanged (so the older sidecar starts and is
    probed as it was)."""
    recorded = _sidecar(group["pod"])
    current = _sidecar(sidecar_compat.injected_pod(group["name"], group["spec"]))
    assert [e for e in recorded["env"] if e not in current["env"]] == []
    assert [p for p in recorded["ports"] if p not in current["ports"]] == []
    assert current["livenessProbe"] == recorded["livenessProbe"]


@pytest.mark.parametrize("release", RELEASES, ids=lambda p: p.name)
def test_the_paths_the_webhook_points_at_are_still_served(release: Path) -> None:
    paths = _load(release, "injected-sidecar.json")["paths"]
    settings, connection, _ = config.load({"VIGIL_GROUP_ID": "g", "VIGIL_POD_NAME": "p",
                                           "VIGIL_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"})  # fmt: skip
    sidecar = Sidecar(settings, connection, Metrics())
    try:
        routes = {path for listener in (server.health_server(sidecar), server.beacon_server(sidecar))
                  for _, path in listener.routes}  # fmt: skip
    finally:
        sidecar.close()
    assert set(paths.values()) <= routes


def test_a_value_an_older_sidecar_does_not_know_stops_it_in_one_line() -> None:
    """A feature value (here a signal) the pinned sidecar image predates: it exits 2 naming the variable, never
    guesses; the fix is a sidecar image of the operator's release (COMPATIBILITY.md)."""
    env = {"VIGIL_GROUP_ID": "g", "VIGIL_POD_NAME": "p", "VIGIL_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"}
    with pytest.raises(ConfigError) as refused:
        config.load(env | {"VIGIL_SIGNAL": "added-later"})
    assert _one_line(refused.value).startswith("VIGIL_SIGNAL")
