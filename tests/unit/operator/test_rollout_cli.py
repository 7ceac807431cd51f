"""`vigil rollout status`: what it says and how it exits, from a ConsumerGroup and its StatefulSet (pure part), and
the wait loop on a fake clock."""

from typing import Any

import pytest

from vigil_operator import rollout_cli


def cr(rollout: dict[str, Any] | None = None, *, strategy: str = "Coordinated", valid: str = "True") -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [{"type": "ConfigValid", "status": valid, "reason": "R", "message": "M"}]}
    if rollout is not None:
        status["rollout"] = rollout
    return {"spec": {"restart": {"strategy": strategy}}, "status": status}


def sts(revision: str = "orders-b", requested: str | None = None) -> dict[str, Any]:
    annotations = {} if requested is None else {"vigil.dev/restart-requested-at": requested}
    return {"metadata": {"annotations": annotations}, "status": {"update_revision": revision}}


ROLLING = {"targetRevision": "orders-b", "phase": "Rolling", "done": 1, "total": 4, "message": "restarting orders-2"}


@pytest.mark.parametrize(
    ("the_cr", "workload", "code", "says"),
    [
        (cr(strategy="None"), sts(), 1, "not Coordinated"),
        (cr(valid="False"), sts(), 1, "ConfigValid=False R: M"),
        (cr(), None, None, "waiting for the StatefulSet"),
        (cr(), sts(), None, "waiting for the operator to take up revision orders-b"),
        (cr(ROLLING | {"targetRevision": "orders-a", "phase": "Complete"}), sts(), None, "take up revision orders-b"),
        (cr(ROLLING), sts(), None, "1/4 restarted; restarting orders-2"),
        (cr(ROLLING | {"phase": "Paused", "message": "x: not back"}), sts(), 1, "paused at 1/4: x: not back"),
        (cr(ROLLING | {"phase": "Complete", "done": 4}), sts(), 0, "rolled out orders-b: 4/4"),
        (cr(ROLLING | {"phase": "Complete"}), sts(requested="2026-11-21T12:00:00Z"), None, "take up revision"),
        (cr(ROLLING | {"phase": "Complete", "targetRevision": "orders-b+restart@2026-11-21T12:00:00Z"}),
         sts(requested="2026-11-21T12:00:00Z"), 0, "rolled out orders-b+restart@"),
    ],
)  # fmt: skip
def test_progress(the_cr: dict[str, Any], workload: dict[str, Any] | None, code: int | None, says: str) -> None:
    verdict, line = rollout_cli.progress(the_cr, workload)
    assert verdict == code
    assert says in line


def test_wait_prints_each_change_once_and_times_out(capsys: pytest.CaptureFixture[str]) -> None:
    now = [0.0]
    views = iter([(cr(), sts())] * 3 + [(cr(ROLLING), sts())] * 100)
    code = rollout_cli.wait(lambda: next(views), "ConsumerGroup ns/orders", 10, clock=lambda: now[0],
                             sleep=lambda s: now.__setitem__(0, now[0] + s))  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 1
    assert out.splitlines() == [
        "ConsumerGroup ns/orders: waiting for the operator to take up revision orders-b",
        "ConsumerGroup ns/orders: 1/4 restarted; restarting orders-2",
    ]
    assert (
        err.strip() == "vigil rollout: ConsumerGroup ns/orders: not rolled out within 10s (1/4 restarted;"
        " restarting orders-2)"
    )


def test_wait_ends_at_completion() -> None:
    views = iter([(cr(ROLLING), sts()), (cr(ROLLING | {"phase": "Complete"}), sts())])
    assert rollout_cli.wait(lambda: next(views), "x", 60, clock=lambda: 0.0, sleep=lambda _: None) == 0


def test_no_kubeconfig_is_one_line(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope"
    assert rollout_cli.main(["status", "orders", "--kubeconfig", str(missing)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("vigil rollout: ")
    assert err.count("\n") == 1
