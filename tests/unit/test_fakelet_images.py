"""Which local command an image stands for: the table, Kubernetes' command/args rule, the venv's python."""

import pytest

from vigil_dev.kube.fakelet import images
from vigil_dev.kube.fakelet.images import Image


@pytest.mark.parametrize(
    ("ref", "repository"),
    [
        ("busybox", "busybox"),
        ("busybox:1.36", "busybox"),
        ("docker.io/library/busybox:1.36", "busybox"),
        ("ghcr.io/acme/vigil-sidecar:0.1.0", "acme/vigil-sidecar"),
        ("localhost:5000/vigil-test/podapp:dev", "vigil-test/podapp"),
        ("vigil-test/podapp@sha256:" + "a" * 64, "vigil-test/podapp"),
        ("registry:5000/x/y:tag@sha256:" + "b" * 64, "x/y"),
        ("acme/app", "acme/app"),  # Docker Hub user repo: `acme` is no registry
    ],
)
def test_repository_strips_registry_tag_and_digest(ref: str, repository: str) -> None:
    assert images.repository(ref) == repository


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("vigil-sidecar:0.1", ("python", "-m", "vigil_core.cli", "sidecar")),
        ("ghcr.io/acme/vigil-sidecar:0.1", ("python", "-m", "vigil_core.cli", "sidecar")),
        ("acme/vigil-operator:1", ("python", "-m", "vigil_core.cli", "operator")),
        ("vigil-test/anything:1", ()),
        ("busybox:1.36", ()),
    ],
)
def test_known_images(ref: str, expected: tuple[str, ...]) -> None:
    image = images.lookup(ref)
    assert image is not None
    assert image.entrypoint == expected


@pytest.mark.parametrize("ref", ["nginx:1.27", "vigil-testing/x", "acme/vigil-sidecar-extra:1"])
def test_unknown_images_have_no_command(ref: str) -> None:
    assert images.lookup(ref) is None


@pytest.mark.parametrize(
    ("command", "args", "argv"),
    [
        ([], [], ["ep", "cmd"]),  # image defaults
        ([], ["a"], ["ep", "a"]),  # args replace CMD only
        (["c"], [], ["c"]),  # command replaces ENTRYPOINT and drops CMD
        (["c"], ["a"], ["c", "a"]),
    ],
)
def test_command_and_args_follow_kubernetes(command: list[str], args: list[str], argv: list[str]) -> None:
    assert images.command_line(Image(entrypoint=("ep",), cmd=("cmd",)), command, args) == argv


@pytest.mark.parametrize(
    ("argv", "local"),
    [
        (["python", "-m", "x"], ["/venv/python", "-m", "x"]),
        (["python3.11", "-c", "1"], ["/venv/python", "-c", "1"]),
        (["/usr/local/bin/python3", "app.py"], ["/venv/python", "app.py"]),
        (["sh", "-c", "python x"], ["sh", "-c", "python x"]),
        (["pythonic"], ["pythonic"]),
        ([], []),
    ],
)
def test_a_leading_python_is_this_interpreter(argv: list[str], local: list[str]) -> None:
    assert images.localize(argv, "/venv/python") == local
