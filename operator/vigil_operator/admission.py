"""The admission webhooks (registered only when the operator serves them: `vigil operator` imports this module
unless --no-webhook): sidecar injection into pods, and the cross-object check CEL cannot make on ConsumerGroups."""

import logging
from typing import Any

import kopf

from vigil_core.errors import first_line
from vigil_operator.catalog import Catalog, Record
from vigil_operator.domain import injection
from vigil_operator.domain.spec import ConsumerGroupSpec, SpecError, parse_spec
from vigil_operator.handlers import CR, SETTINGS
from vigil_operator.metrics import INJECT_SIDECAR, ONE_CR_PER_GROUP

log = logging.getLogger(__name__)


@kopf.on.mutate(
    "pods",
    operation="CREATE",
    id=INJECT_SIDECAR,
    labels={injection.INJECT_LABEL: "true"},
    # Ignore (default): an operator outage must not stop workloads from starting (they run without vigil)
    ignore_failures=SETTINGS.webhook_failure_policy == "Ignore",
)
def inject_sidecar(*, body: kopf.Body, patch: kopf.Patch, warnings: list[str], memo: Any, **kwargs: Any) -> None:
    catalog: Catalog = memo["catalog"]
    kubelets: kopf.Index[str, str] = kwargs["kubelets"]
    namespace = str(body.get("metadata", {}).get("namespace") or "")
    wanted = str((body.get("metadata", {}).get("annotations") or {}).get(injection.GROUP_ANNOTATION) or "")
    try:
        group = _spec_of(catalog.lookup((namespace, wanted)))
        decision = injection.inject(
            body,
            namespace,
            group,
            wanted or None,
            SETTINGS.injection(),
            native_supported=injection.native_sidecars_supported(list(kubelets.get("kubelet", []))),
        )
    except Exception as exc:  # a bug must not become a deny the failurePolicy never asked for
        log.exception("inject-sidecar: pod %s/%s", namespace, body.get("metadata", {}).get("name") or "(generated)")
        decision = injection.failed(SETTINGS.webhook_failure_policy, first_line(exc))
        memo["runtime"].metrics.webhook_errors.labels(INJECT_SIDECAR).inc()  # answered, so not a 500 the server counts
    warnings.extend(decision.warnings)
    if not decision.allowed:
        raise kopf.AdmissionError(decision.message, code=400)
    for key, value in decision.changes.items():
        patch[key] = value


@kopf.on.validate(*CR, operation="CREATE", id=ONE_CR_PER_GROUP)
def one_cr_per_group(
    *, namespace: str | None, name: str, spec: kopf.Spec, memo: Any, warnings: list[str], **_: Any
) -> None:
    """What CEL cannot see: another ConsumerGroup already observing the same group at the same bootstrap. A failure
    to tell admits it with a warning: the operator marks a duplicate `Ready=False, DuplicateGroup` anyway."""
    try:
        _refuse_a_second_cr(namespace or "", name, spec, memo["catalog"])
    except kopf.AdmissionError:
        raise
    except Exception as exc:  # a bug must not refuse a ConsumerGroup: this check is a convenience
        log.exception("one-cr-per-group: ConsumerGroup %s/%s", namespace, name)
        memo["runtime"].metrics.webhook_errors.labels(ONE_CR_PER_GROUP).inc()
        warnings.append(f"vigil: the one-ConsumerGroup-per-Kafka-group check failed ({first_line(exc)}); admitted")


def _refuse_a_second_cr(namespace: str, name: str, spec: kopf.Spec, catalog: Catalog) -> None:
    wanted = (spec.get("groupId"), (spec.get("kafka") or {}).get("bootstrapServers"))
    for claim in catalog.claims(str(spec.get("groupId") or "")):
        record = catalog.lookup((claim.namespace, claim.name))
        if record is None or (claim.namespace, claim.name) == (namespace, name):
            continue
        if (record.spec.get("groupId"), (record.spec.get("kafka") or {}).get("bootstrapServers")) == wanted:
            raise kopf.AdmissionError(
                f"spec.groupId: Kafka group {wanted[0]!r} at {wanted[1]} is already observed by"
                f" ConsumerGroup {claim.namespace}/{claim.name}",
                code=409,
            )


def _spec_of(record: Record | None) -> ConsumerGroupSpec | None:
    if record is None:
        return None
    try:
        return parse_spec(dict(record.spec))
    except SpecError:
        return None
