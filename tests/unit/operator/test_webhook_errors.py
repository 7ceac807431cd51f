"""The webhook server's error counter (`vigil_operator_webhook_errors_total`): kopf's admission function for one
request, wrapped by `webhook_server.served`, fails in two ways — it raises (a request it cannot serve: kopf answers
the apiserver 4xx) or it answers code 500 (a handler's exception); a refusal (`kopf.AdmissionError`, 4xx in the
response) is a decision and not counted."""

import asyncio
from typing import Any

import pytest

from vigil_operator.metrics import WEBHOOKS, OperatorMetrics
from vigil_operator.webhook_server import served

REQUEST = {"request": {"uid": "u", "namespace": "shop", "object": {"metadata": {"name": "p"}}}}


def answer(code: int | None) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": "u", "allowed": code is None}
    if code is not None:
        response["status"] = {"message": "m", "code": code}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def errors(metrics: OperatorMetrics) -> dict[str, float]:
    return {w: metrics.registry.get_sample_value("vigil_operator_webhook_errors_total", {"webhook": w}) or 0.0
            for w in WEBHOOKS}  # fmt: skip


class UnservableError(Exception):
    pass


@pytest.mark.parametrize(
    ("webhook", "outcome", "counted"),
    [
        ("inject-sidecar", answer(None), {}),
        ("inject-sidecar", answer(400), {}),
        ("one-cr-per-group", answer(409), {}),
        ("inject-sidecar", answer(500), {"inject-sidecar": 1}),
        ("one-cr-per-group", answer(500), {"one-cr-per-group": 1}),
        ("inject-sidecar", UnservableError("no handlers for the resource"), {"inject-sidecar": 1}),
        ("../../etc/passwd", answer(500), {"other": 1}),
        (None, UnservableError("no id"), {"other": 1}),
    ],
    ids=["allowed", "refused", "conflict", "handler-error", "validating-error", "unservable", "unknown-path", "no-id"],
)
def test_errors_are_counted_by_webhook_and_refusals_are_not(
    webhook: str | None, outcome: dict[str, Any] | Exception, counted: dict[str, int]
) -> None:
    metrics = OperatorMetrics()
    seen: list[Any] = []

    async def fn(request: Any, **kwargs: Any) -> Any:
        seen.append((request, kwargs))
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    wrapped = served(fn, metrics)
    request = {"request": dict(REQUEST["request"], object={"metadata": {"name": "p"}})}
    if isinstance(outcome, Exception):
        with pytest.raises(UnservableError):
            asyncio.run(wrapped(request, webhook=webhook))
    else:
        assert asyncio.run(wrapped(request, webhook=webhook)) == outcome
    assert errors(metrics) == {w: float(counted.get(w, 0)) for w in WEBHOOKS}
    ((got, kwargs),) = seen
    assert kwargs == {"webhook": webhook}
    assert got["request"]["object"]["metadata"]["namespace"] == "shop"  # filled in from the request


def test_every_webhook_label_is_exported_at_zero_from_the_start() -> None:
    text = OperatorMetrics().registry.get_sample_value
    assert [text("vigil_operator_webhook_errors_total", {"webhook": w}) for w in WEBHOOKS] == [0.0, 0.0, 0.0]
