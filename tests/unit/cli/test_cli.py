"""The `vigil` command: user errors are one line, no traceback."""

import subprocess
import sys

import pytest

from vigil_cli import cli


def test_dev_status_without_a_stack_says_so(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["dev", "status", "--state-dir", str(tmp_path)]) == 1
    assert f"no stack at {tmp_path}" in capsys.readouterr().out


def test_dev_down_without_a_stack_is_harmless(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["dev", "down", "--state-dir", str(tmp_path)]) == 0
    assert "nothing running" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["dev", "up", "--brokers", "2"], ["dev", "up", "--security", "kerberos"], []])
def test_bad_arguments_exit_2_with_usage(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    assert "usage: vigil" in capsys.readouterr().err


# What `pip install kafka-vigil` (no extras: the sidecar image) lacks; the operator's and the report's extras.
NOT_IN_BASE = ("kopf", "kubernetes", "cryptography", "yaml", "pyspark")
BLOCK_EXTRAS = f"""
import importlib.abc, sys
class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {NOT_IN_BASE!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, NotInstalled())
from vigil_cli.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize(
    ("argv", "code", "expected"),
    [
        (["sidecar", "--help"], 0, "usage: vigil sidecar"),
        (["--help"], 0, "usage: vigil"),
        (
            ["operator", "--standalone"],
            2,
            "vigil operator: needs the operator extra: pip install 'kafka-vigil[operator]'",
        ),
        (["crd"], 2, "vigil crd: needs the operator extra"),
    ],
)
def test_the_base_install_runs_the_sidecar_and_names_missing_extras(argv: list[str], code: int, expected: str) -> None:
    """The sidecar image installs no extra: `vigil sidecar` must not import the operator's, the stack's or the
    report's dependencies (a real bug once: the `dev` subcommand's parser pulled in `cryptography`)."""
    done = subprocess.run([sys.executable, "-c", BLOCK_EXTRAS, *argv], capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip
    assert done.returncode == code, done.stderr[-2000:]
    assert expected in done.stdout + done.stderr
    assert "Traceback" not in done.stderr


def test_the_operator_reads_its_own_settings_and_ignores_service_link_variables() -> None:
    """Kubernetes adds `<SERVICE>_SERVICE_PORT_HTTPS`, `_PORT_443_TCP`... for each Service in the pod's namespace: a
    release named vigil-operator has the Service vigil-operator-webhook, whose variables share the operator's
    prefix. They are not settings (the operator crash-looped on them in its first real pod)."""
    from vigil_operator import settings

    env = {
        "VIGIL_OPERATOR_RESYNC_SECONDS": "3",
        "VIGIL_OPERATOR_WEBHOOK_SERVICE_PORT_HTTPS": "443",
        "VIGIL_OPERATOR_WEBHOOK_PORT_443_TCP": "tcp://10.77.64.119:443",
        "VIGIL_OPERATOR_WEBHOOK_SERVICE_HOST": "10.77.64.119",
    }
    loaded = settings.from_env(env)
    assert loaded.resync_seconds == 3
    with pytest.raises(ValueError, match=r"^VIGIL_OPERATOR_RESYNC_SECONDS: Input should be greater than or equal to 1"):
        settings.from_env({"VIGIL_OPERATOR_RESYNC_SECONDS": "0"})


NO_DEV = """
import sys
sys.modules["vigil_dev"] = None  # an image: kafka-vigil without the development distribution
from vigil_cli.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("argv", [["dev", "status"], ["demo"]])
def test_without_a_development_checkout_dev_and_demo_say_so_in_one_line(argv: list[str]) -> None:
    done = subprocess.run([sys.executable, "-c", NO_DEV, *argv], capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"vigil {argv[0]}: needs a development checkout of vigil (make setup installs vigil_dev); "
        "this installation has only the shipped packages"
    ]


def test_the_development_distribution_registers_each_plugin_command() -> None:
    """`vigil dev` and `vigil demo` are entry points of vigil_dev's distribution (no shipped package imports it):
    dev/pyproject.toml registers exactly the commands the CLI lists, each a `main(argv) -> int` that exists."""
    import importlib
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).resolve().parents[3] / "dev" / "pyproject.toml").read_text())["project"]
    registered = project["entry-points"][cli.PLUGIN_GROUP]
    assert set(registered) == set(cli.PLUGINS)
    for target in registered.values():
        module, _, name = target.partition(":")
        assert callable(getattr(importlib.import_module(module), name))
