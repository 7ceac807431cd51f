"""`vigil sidecar --help` and docs/sidecar.md's settings reference: every setting with its meaning, default and env
var, from one source (the settings models), never a secret's value."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from vigil_cli import cli
from vigil_core import markdown
from vigil_core.kafka.security import KafkaConnection
from vigil_sidecar import config
from vigil_sidecar.config import SidecarSettings

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "sidecar.md"

#: What the help says for the defaults that are not a plain value: computed, or what unset means.
WORDED_DEFAULTS = {
    "group_id": "required",
    "pod_name": "required",
    "namespace": "unset",
    "instance_id": "unset",
    "action": "leave-group, alert with the progress signal",
    "cooldown_seconds": "2 × stall timeout",
    "check_interval_seconds": "stall timeout / 4, at most 5",
    "heartbeat_interval_seconds": "the client's, 3",
    "max_poll_interval_seconds": "the client's, 300",
    "budget_lease": "the name the operator derives from the group id",
    "expected_return_seconds": "the bridge's deadline",
}


@pytest.fixture
def help_entries(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """`vigil sidecar --help`, an entry (its text on one line) per flag or variable."""
    monkeypatch.setenv("COLUMNS", "1000")  # one line per entry: argparse breaks words at hyphens
    entries: dict[str, str] = {}
    for match in re.finditer(
        r"^  (--[\w-]+|VIGIL_\w+)[ =]\S*((?:.*\n {3,}.*)*.*)", config.build_parser().format_help(), re.M
    ):
        entries[match[1]] = " ".join(match[2].split())
    return entries


def _shown(value: object) -> str:
    """A default as a reader writes it: `60` (not 60.0), `lease` (not BudgetMode.LEASE), `false`."""
    value = getattr(value, "value", value)
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


@pytest.mark.parametrize("name", list(SidecarSettings.model_fields))
def test_every_setting_is_in_help_with_its_meaning_default_and_env_var(name: str, help_entries: dict[str, str]) -> None:
    field = SidecarSettings.model_fields[name]
    entry = help_entries["--" + name.replace("_", "-")]
    default = WORDED_DEFAULTS.get(name) or _shown(field.default)
    notes = default if default == "required" else f"default: {default}"
    assert entry.endswith(f"{' '.join(str(field.description).split())} ({notes}; env VIGIL_{name.upper()})"), entry


@pytest.mark.parametrize("name", list(KafkaConnection.model_fields))
def test_every_kafka_setting_is_in_help_as_a_variable(name: str, help_entries: dict[str, str]) -> None:
    """The Kafka connection is read from the environment only: listed, with no flag."""
    assert f"VIGIL_KAFKA_{name.upper()}" in help_entries
    assert "--" + name.replace("_", "-") not in help_entries


def test_every_setting_has_a_description() -> None:
    fields = {**SidecarSettings.model_fields, **KafkaConnection.model_fields}
    missing = [name for name, field in fields.items() if not (field.description or "").strip()]
    assert missing == [], "write a docstring under the field: --help and docs/sidecar.md show it"


def test_a_computed_default_is_said_never_none(help_entries: dict[str, str]) -> None:
    assert [flag for flag, entry in help_entries.items() if "None" in entry] == []
    assert {n for n, f in SidecarSettings.model_fields.items() if f.default is None} <= set(WORDED_DEFAULTS)


def test_help_shows_no_value_from_the_environment() -> None:
    """Help is the model's text: a password file's path or any other value set in the environment never shows."""
    env = {"PATH": "/usr/bin:/bin", "VIGIL_KAFKA_SASL_PASSWORD_FILE": "/secret/p4ssw0rd",
           "VIGIL_KAFKA_SASL_USERNAME": "alice-the-user", "VIGIL_GROUP_ID": "orders-group-from-env"}  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "vigil_sidecar", "--help"], env=env, capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "VIGIL_KAFKA_SASL_PASSWORD_FILE=FILE" in done.stdout
    for value in env.values():
        assert value not in done.stdout


def test_vigil_sidecar_help_is_the_sidecars(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["sidecar", "--help"])
    assert info.value.code == 0
    assert capsys.readouterr().out == config.build_parser().format_help()


def test_the_committed_reference_is_the_generators_output() -> None:
    document = DOC.read_text()
    fresh = markdown.splice(document, config.MARKER, config.reference())
    assert fresh == document, (
        "docs/sidecar.md is stale: run make generate-docs (python -m vigil_sidecar.config --write)"
    )


def test_the_reference_has_a_row_per_setting() -> None:
    rows = config.reference().splitlines()
    for name in SidecarSettings.model_fields:
        assert sum(r.startswith(f"| `VIGIL_{name.upper()}` | `--{name.replace('_', '-')} ") for r in rows) == 1
    for name in KafkaConnection.model_fields:
        assert sum(r.startswith(f"| `VIGIL_KAFKA_{name.upper()}` | — (env only) |") for r in rows) == 1


def test_check_names_a_stale_document_and_write_refreshes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "sidecar.md"
    stale.write_text(f"# preamble\n\n{config.MARKER}\n\nold table\n")
    assert config.main(["--check", str(stale)]) == 1
    assert capsys.readouterr().err.endswith(f"{stale} is stale (run: make generate-docs)\n")
    assert config.main(["--write", str(stale)]) == 0
    assert stale.read_text() == f"# preamble\n\n{config.MARKER}\n\n{config.reference()}"
    assert config.main(["--check", str(stale)]) == 0
