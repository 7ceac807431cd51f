"""What each side of an operator ↔ sidecar interface writes today, produced by the real code: the recorded fixtures
of `tests/unit/operator/test_sidecar_compat.py` (operator/vigil_operator/COMPATIBILITY.md says which reader takes
which).

Run once per release; the directory is then history, never regenerated:

    .venv/bin/python -m vigil_dev.testing.sidecar_compat tests/unit/fixtures/sidecar-compat/<version>

The events topic has its own per-version records (`tests/unit/fixtures/events/v<N>/`), so none are written here.
"""

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import yaml  # type: ignore[import-untyped]

from vigil_core import sidecar_contract as contract
from vigil_core.bridge import engine as bridge
from vigil_core.budget import ledger
from vigil_core.kafka.model import MemberView
from vigil_operator.domain import injection
from vigil_operator.domain.spec import parse_spec
from vigil_operator.rollouts import Rollouts
from vigil_sidecar import config
from vigil_sidecar.metrics import Metrics
from vigil_sidecar.runtime import Sidecar
from vigil_sidecar.signals.beacon import parse_beacon

ROOT: Final = Path(__file__).resolve().parents[3]
EXAMPLES: Final = ROOT / "examples" / "consumergroups"
NOW: Final = 1_763_700_000.0
"""A fixed wall clock (Unix seconds) for what the payloads timestamp."""
MEMBER: Final = MemberView("orders-0-5f0c2a9e", "shop-orders-0", "orders-0", "/10.0.0.7", ())
GENERATION: Final = 7


def status() -> dict[str, Any]:
    """`GET /v1/status` of a sidecar whose static member is proven and whose app last beaconed generation 7
    (`Sidecar.status`, as `server.health_app` serves it)."""
    env = {"VIGIL_GROUP_ID": "orders", "VIGIL_POD_NAME": "orders-0", "VIGIL_NAMESPACE": "shop",
           "VIGIL_INSTANCE_ID": MEMBER.instance_id or "", "VIGIL_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1",
           "VIGIL_EVENTS_TOPIC": ""}  # fmt: skip
    settings, connection, _ = config.load(env)
    sidecar = Sidecar(settings, connection, Metrics())
    try:
        beacon = {"member_id": MEMBER.member_id, "generation": GENERATION, "instance_id": MEMBER.instance_id,
                  "assigned": 2, "time": 1763.5}  # fmt: skip
        sidecar.beacon(parse_beacon(json.dumps(beacon).encode()), "http")
        sidecar.state = sidecar.state.with_identity(MEMBER, None)
        found: dict[str, Any] = json.loads(json.dumps(sidecar.status()))
    finally:
        sidecar.close()
    found["poll_age_seconds"] = 0.25  # monotonic, per run: fixed so the record is reproducible
    return found


def budget_ledger() -> str:
    """The Lease annotation `vigil.dev/budget` after three sidecars published (one stalled and still asking: its
    `asked`), one got a permit and the operator recorded a removal: every record today's writers put there."""
    book = ledger.publish(ledger.Ledger(), "orders-1", 0.4, NOW - 30, stall_timeout=30)
    book = ledger.publish(book, "orders-0", 31.5, NOW - 3, stall_timeout=30)
    asked = ledger.decide_permit(book, "orders-0", 30, NOW - 3, member_id=MEMBER.member_id, max_concurrent=1,
                                 cooldown=60, systemic_percent=60, settle=2)  # fmt: skip
    assert isinstance(asked, ledger.Refusal), asked  # settle: `asked` is recorded
    granted = ledger.decide_permit(asked.ledger, "orders-0", 30, NOW, member_id=MEMBER.member_id,
                                   max_concurrent=2, cooldown=60, systemic_percent=60, settle=2)  # fmt: skip
    assert isinstance(granted, ledger.Permit), granted
    book = ledger.publish(granted.ledger, "orders-2", 29.0, NOW, stall_timeout=30)
    book = ledger.publish(book, "orders-2", 29.5, NOW + 0.5)  # no stall timeout: `asked` would be kept
    removal = ledger.decide_removal(book, "orders-3", NOW + 1, member_id="orders-3-aa", proven_gone=True,
                                    max_concurrent=2, cooldown=60)  # fmt: skip
    book = ledger.publish(removal.ledger, "orders-2", 31.0, NOW + 2, stall_timeout=30)
    asking = ledger.decide_permit(book, "orders-2", 30, NOW + 2, member_id="orders-2-bb", max_concurrent=5,
                                  cooldown=60, systemic_percent=90, settle=2)  # fmt: skip
    assert isinstance(asking, ledger.Refusal), asking
    return ledger.dumps(asking.ledger)


def bridge_state() -> str:
    """`status.rollout.bridge` as the operator persists it for a coordinated restart's step (`Rollouts.begin`),
    after one heartbeat went out: what an upgraded operator resumes mid-rollout."""
    spec = parse_spec(
        yaml.safe_load((EXAMPLES / "static-statefulset.yaml").read_text())["spec"] | {"groupId": "orders"}
    )
    state = Rollouts().begin(spec, bridge.Member(MEMBER.member_id, GENERATION, MEMBER.instance_id), NOW)
    state, actions = bridge.step(state, bridge.Tick(), NOW)
    assert any(isinstance(a, bridge.SendHeartbeat) for a in actions), actions
    return state.to_json()


def injected_pod(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A one-container pod of ConsumerGroup `name` as the webhook admits it (`injection.inject`: the sidecar's env,
    ports and probes, the app's wiring)."""
    # the recorded specs name their release's sidecar image: allowed, as a platform team pinning it would
    cfg = injection.InjectionConfig(
        operator_namespace="vigil-system", allowed_sidecar_images=("registry.example.com/*",)
    )
    pod: dict[str, Any] = {
        "metadata": {"name": f"{name}-0", "namespace": "shop", "labels": {injection.INJECT_LABEL: "true"},
                     "annotations": {injection.GROUP_ANNOTATION: name}},
        "spec": {"containers": [{"name": "app", "image": "shop/consumer:1"}]},
    }  # fmt: skip
    decision = injection.inject(pod, "shop", parse_spec(spec), name, cfg, native_supported=True)
    if not decision.injected:
        raise ValueError(f"ConsumerGroup {name} is not injected: {decision}")
    for section, values in decision.changes.items():
        pod[section] = {**pod[section], **values}
    return pod


def injected() -> dict[str, Any]:
    """Per example ConsumerGroup: its name, spec and pod as admitted; plus the sidecar paths the webhook points at."""
    groups = {}
    for path in sorted(EXAMPLES.glob("*.yaml")):
        group = yaml.safe_load(path.read_text())
        name = group["metadata"]["name"]
        groups[path.stem] = {"name": name, "spec": group["spec"], "pod": injected_pod(name, group["spec"])}
    paths = {"livez": contract.LIVEZ_PATH, "app_probe": contract.APP_PROBE_PATH, "beacon": contract.BEACON_PATH}
    return {"paths": paths, "groups": groups}


def write(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "status.json": json.dumps(status(), indent=2) + "\n",
        "budget-ledger.json": json.dumps(json.loads(budget_ledger()), indent=2) + "\n",
        "bridge-state.json": json.dumps(json.loads(bridge_state()), indent=2) + "\n",
        "injected-sidecar.json": json.dumps(injected(), indent=2) + "\n",
    }
    for name, text in files.items():
        (out / name).write_text(text)
    return [out / name for name in files]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write today's sidecar-compat fixtures into DIR (once per release).")
    parser.add_argument("dir", type=Path)
    for path in write(parser.parse_args(argv).dir):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
