"""`vigil check-injection` (helm test): whether a dry-run pod shows that vigil's injection webhook answered."""

from typing import Any

import pytest

from vigil_operator.domain.injection import GROUP_ANNOTATION, INJECT_LABEL, SIDECAR_NAME
from vigil_operator.injection_check import PROBE_GROUP, probe_pod, verdict, warning_texts


def admitted(*, init: tuple[str, ...] = (), containers: tuple[str, ...] = ("app",)) -> dict[str, Any]:
    return {"spec": {"initContainers": [{"name": n} for n in init], "containers": [{"name": n} for n in containers]}}


@pytest.mark.parametrize(
    ("pod", "warnings", "ok", "says"),
    [
        (admitted(init=(SIDECAR_NAME,)), [], True, "the sidecar was injected"),
        (admitted(containers=("app", SIDECAR_NAME)), [], True, "the sidecar was injected"),
        (
            admitted(),
            ["vigil: ConsumerGroup 'x' (vigil.dev/consumer-group) not found in namespace default; pod not injected"],
            True,
            "not found in namespace default",
        ),
        (admitted(), [], False, "did not answer"),
        (admitted(), ['would violate PodSecurity "baseline:latest"'], False, "did not answer"),  # not ours
    ],
)
def test_the_verdict(pod: dict[str, Any], warnings: list[str], ok: bool, says: str) -> None:
    found, line = verdict(pod, warnings)
    assert found is ok
    assert says in line
    assert "\n" not in line


@pytest.mark.parametrize(
    ("header", "texts"),
    [
        (None, []),
        ("", []),
        ('299 - "vigil: one"', ["vigil: one"]),
        ('299 - "vigil: a, b", 299 - "second \\"quoted\\""', ["vigil: a, b", 'second "quoted"']),
    ],
)
def test_warning_texts_unquote_each_warning_of_the_header(header: str | None, texts: list[str]) -> None:
    assert warning_texts(header) == texts


def test_the_probe_is_opted_in_and_restricted() -> None:
    pod = probe_pod(PROBE_GROUP)
    assert pod["metadata"]["labels"] == {INJECT_LABEL: "true"}
    assert pod["metadata"]["annotations"] == {GROUP_ANNOTATION: PROBE_GROUP}
    (container,) = pod["spec"]["containers"]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
