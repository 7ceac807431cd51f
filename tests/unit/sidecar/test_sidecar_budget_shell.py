"""The sidecar's budget shell without API access (no service account mounted): every eviction is refused under
its own cause ("no-api"), counted and answered to the watchdog as final; nothing reaches Kafka or a Lease."""

import asyncio
from pathlib import Path

from vigil_core.kafka.outcomes import Reaction
from vigil_sidecar import config
from vigil_sidecar.metrics import Metrics
from vigil_sidecar.runtime import Sidecar
from vigil_sidecar.watchdog.state import ActionResult, Evict

BASE = {"VIGIL_GROUP_ID": "orders", "VIGIL_POD_NAME": "orders-0", "VIGIL_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1",
        "VIGIL_EVENTS_TOPIC": "", "VIGIL_BUDGET": "lease"}  # fmt: skip


def test_without_api_access_an_eviction_is_refused_as_no_api(tmp_path: Path) -> None:
    settings, connection, _ = config.load(BASE | {"VIGIL_SERVICE_ACCOUNT_DIR": str(tmp_path / "none")})

    async def run() -> tuple[object, Sidecar]:
        sidecar = Sidecar(settings, connection, Metrics())
        try:
            sidecar.budget.open(sidecar.background)
            await sidecar._permit_then_leave(Evict("m1", None, "no poll for 40s"))  # noqa: SLF001 - the Evict path
            return sidecar._queue.get_nowait(), sidecar  # noqa: SLF001 - the watchdog's next observation
        finally:
            sidecar.close()

    answer, sidecar = asyncio.run(run())
    assert isinstance(answer, ActionResult)
    assert (answer.outcome.name, answer.outcome.reaction) == ("BUDGET_NO_API", Reaction.NOTHING_TO_DO)
    alerts = sidecar.metrics.registry.get_sample_value("vigil_sidecar_alerts_total", {"kind": "budget-no-api"})
    assert alerts == 1
    assert sidecar.status()["budget"] == "unavailable (no-api): alert only"
    evicted = {"action": "leave-group", "outcome": "NONE"}
    assert sidecar.metrics.registry.get_sample_value("vigil_sidecar_actions_total", evicted) is None
