"""`vigil operator --priority-from-pod-name`: the pure priority function and the CLI's refusals (exit 2, one line)."""

import pytest

from vigil_operator import cli
from vigil_operator.priority import POD_NAME_ENV, priority_from_pod_name

# What a Deployment's ReplicaSets name pods: <deployment>-<pod-template-hash>-<5 chars>, across a few rollouts.
POD_NAMES = [
    f"vigil-operator-{template}-{suffix}"
    for template in ("7d4b9c8f6d", "5f8c9d7b4", "6c7f9b8d5", "84b6d5c7f9")
    for suffix in ("x2k9p", "q8r7t", "lm4zv", "b9wqf", "7hnc2", "tz5kd", "p2v8s", "c6jxr")
]


def test_the_same_pod_name_always_gives_the_same_priority() -> None:
    # a fixed value: crc32 is stable across processes and Python versions (unlike str.__hash__)
    assert priority_from_pod_name("a") == 0xE8B7BE43 - 0x80000000 + 1


@pytest.mark.parametrize("name", [*POD_NAMES, "", "x" * 253])
def test_priorities_are_positive_31_bit_integers(name: str) -> None:
    assert 1 <= priority_from_pod_name(name) <= 2**31


def test_realistic_pod_names_get_distinct_priorities() -> None:
    priorities = [priority_from_pod_name(n) for n in POD_NAMES]
    assert len(set(priorities)) == len(POD_NAMES)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--priority-from-pod-name", "--priority", "5"], "--priority-from-pod-name and --priority exclude each other"),
        (["--priority-from-pod-name", "--standalone"], "--priority-from-pod-name and --standalone exclude each other"),
    ],
)
def test_conflicting_priority_flags_exit_2_with_one_line(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(POD_NAME_ENV, "vigil-operator-7d4b9c8f6d-x2k9p")
    assert cli.main(argv) == 2
    assert capsys.readouterr().err == f"vigil operator: {expected}\n"


@pytest.mark.parametrize("value", [None, ""])
def test_priority_from_pod_name_without_the_pod_name_exits_2_with_one_line(
    value: str | None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if value is None:
        monkeypatch.delenv(POD_NAME_ENV, raising=False)
    else:
        monkeypatch.setenv(POD_NAME_ENV, value)
    assert cli.main(["--priority-from-pod-name"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"vigil operator: --priority-from-pod-name needs ${POD_NAME_ENV}")


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        ([], None, 0),
        (["--priority", "20"], None, 20),
        (
            ["--priority-from-pod-name"],
            "vigil-operator-7d4b9c8f6d-x2k9p",
            priority_from_pod_name("vigil-operator-7d4b9c8f6d-x2k9p"),
        ),
    ],
)
def test_the_peering_priority_the_flags_ask_for(
    argv: list[str], env: str | None, expected: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    if env is not None:
        monkeypatch.setenv(POD_NAME_ENV, env)
    assert cli.peering_priority(cli.build_parser().parse_args(argv)) == expected
