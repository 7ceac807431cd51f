"""The one settings loader (`vigil_core.settings`): env vars by name, flags over env, one line naming the variable or
the flag; and both processes on it (the sidecar's `config.load`, `vigil operator`'s flags)."""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from vigil_core import settings as loader
from vigil_core.errors import ConfigError
from vigil_core.liveness import StallAction
from vigil_operator import cli as operator_cli
from vigil_operator import pki
from vigil_operator import settings as operator_settings
from vigil_operator.settings import OperatorSettings

PREFIX = "APP_"


class Example(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Annotated[str, Field(min_length=1)]
    """Required."""
    seconds: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 60.0
    topic: str = "events"
    enabled: bool = False
    path: Path | None = None

    @model_validator(mode="after")
    def _enabled_needs_a_path(self) -> "Example":
        if self.enabled and self.path is None:
            raise ValueError(f"{PREFIX}PATH: enabling needs a path")
        return self


def load(env: dict[str, str], flags: dict[str, object] | None = None) -> Example:
    return loader.load(Example, prefix=PREFIX, env=env, flags=flags, keep_empty={"topic"})


def test_env_by_name_and_flags_over_it() -> None:
    found = load({"APP_NAME": "a", "APP_SECONDS": "5", "APP_TOPIC": "t"}, {"seconds": "7", "topic": None})
    assert found == Example(name="a", seconds=7, topic="t")


def test_other_variables_under_the_prefix_are_not_refused() -> None:
    """Kubernetes' Service-link variables, a newer webhook's additions."""
    env = {"APP_NAME": "a", "APP_SERVICE_PORT_HTTPS": "443", "APP_PORT_443_TCP": "tcp://10.0.0.1:443", "APP_X": "y"}
    assert load(env) == Example(name="a")


def test_an_empty_value_is_unset_unless_kept() -> None:
    found = load({"APP_NAME": "a", "APP_SECONDS": "", "APP_TOPIC": ""}, {"path": ""})
    assert found == Example(name="a", topic="")


@pytest.mark.parametrize(
    ("env", "flags", "message"),
    [
        ({}, {}, "APP_NAME: required, not set"),
        ({"APP_NAME": ""}, {}, "APP_NAME: required, not set"),
        ({"APP_NAME": "a", "APP_SECONDS": "0"}, {}, "APP_SECONDS: Input should be greater than 0"),
        ({"APP_NAME": "a", "APP_SECONDS": "soon"}, {"seconds": "0"}, "--seconds: Input should be greater than 0"),
        (
            {"APP_NAME": "a"},
            {"enabled": "maybe"},
            "--enabled: Input should be a valid boolean, unable to interpret input",
        ),
        ({"APP_NAME": "a", "APP_ENABLED": "true"}, {}, "APP_PATH: enabling needs a path"),
        ({"APP_NAME": "a"}, {"enabled": "true"}, "APP_PATH: enabling needs a path"),
        ({"APP_NAME": "a", "APP_ENABLED": "true"}, {"path": ""}, "APP_PATH: enabling needs a path"),
    ],
)
def test_a_bad_value_is_one_line_naming_where_it_came_from(
    env: dict[str, str], flags: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load(env, flags)
    assert str(info.value) == message


_text = st.text(st.characters(codec="utf-8", exclude_characters="\0"), min_size=1, max_size=12)
_values = st.fixed_dictionaries(
    {"name": _text},
    optional={
        "seconds": st.floats(0.001, 1e9),
        "topic": st.text(max_size=8),
        "path": _text.map(lambda s: "/" + s),
    },
)


@settings(max_examples=200, deadline=None)
@given(values=_values, as_flags=st.sets(st.sampled_from(["name", "seconds", "topic", "path"])))
def test_a_value_reads_the_same_from_its_variable_or_its_flag(values: dict[str, Any], as_flags: set[str]) -> None:
    text = {name: str(value) for name, value in values.items()}
    env = {loader.variable(PREFIX, n): v for n, v in text.items() if n not in as_flags}
    flags = {n: v for n, v in text.items() if n in as_flags}
    decoy = {loader.variable(PREFIX, n): "not-this" for n in flags if n != "topic"}  # a flag wins over its variable
    assert load(env | decoy, flags) == load({loader.variable(PREFIX, n): v for n, v in text.items()})


def test_flags_are_named_after_the_fields() -> None:
    parser = argparse.ArgumentParser()
    loader.add_flags(parser, Example, switches=True)
    parsed = vars(parser.parse_args(["--seconds", "3", "--no-enabled"]))
    assert parsed == {"name": None, "seconds": "3", "topic": None, "enabled": False, "path": None}


# -- what --help and the docs say: one source, the model -------------------------------------------------------


class Described(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    name: str
    """Who to greet."""
    action: StallAction | None = None
    """What to do; nothing when unset."""
    cooldown_seconds: Annotated[float | None, loader.Unset("2 × the timeout")] = None
    """Between two actions."""
    listen_bind: str = "127.0.0.1"
    """Where to listen."""
    listen_port: int = 8080
    """50% of the time."""
    mode: Literal["fast", "slow"] = "fast"
    """How."""
    enabled: bool = False
    """Whether."""
    topic: str = ""
    """Where ("" = off)."""
    password: SecretStr = SecretStr("hunter2")
    """Never shown."""


SECTIONS = {"name": "who", "listen_bind": "listening"}


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Help on one line per entry: argparse wraps at the terminal's width, and breaks words at hyphens."""
    monkeypatch.setenv("COLUMNS", "1000")


@pytest.mark.parametrize(
    ("name", "metavar", "default", "literal", "section"),
    [
        ("name", "NAME", "required", False, "who"),
        ("action", "{leave-group,restart,alert}", "unset", False, "who"),
        ("cooldown_seconds", "SECONDS", "2 × the timeout", False, "who"),
        ("listen_bind", "ADDRESS", "127.0.0.1", True, "listening"),
        ("listen_port", "PORT", "8080", True, "listening"),
        ("mode", "{fast,slow}", "fast", True, "listening"),
        ("enabled", "BOOL", "false", True, "listening"),
        ("topic", "TOPIC", '""', True, "listening"),
        ("password", "PASSWORD", "not shown (secret)", False, "listening"),
    ],
)
def test_a_field_is_described_by_the_model(name: str, metavar: str, default: str, literal: bool, section: str) -> None:
    [found] = [s for s in loader.describe(Described, prefix=PREFIX, sections=SECTIONS) if s.name == name]
    assert (found.metavar, found.default, found.literal, found.section) == (metavar, default, literal, section)
    assert (found.variable, found.flag) == (loader.variable(PREFIX, name), loader.flag(name))
    assert found.meaning == Described.model_fields[name].description


def test_help_says_the_meaning_the_default_and_the_env_var_in_sections(wide: None) -> None:
    parser = argparse.ArgumentParser()
    loader.add_flags(parser, Described, prefix=PREFIX, sections=SECTIONS)
    text = " ".join(parser.format_help().split())
    assert "who: --name NAME Who to greet. (required; env APP_NAME)" in text
    assert "(default: 2 × the timeout; env APP_COOLDOWN_SECONDS)" in text
    assert "listening: --listen-bind ADDRESS Where to listen. (default: 127.0.0.1; env APP_LISTEN_BIND)" in text
    assert "50% of the time." in text  # argparse's % formatting escaped
    assert "None" not in text


def test_without_a_prefix_help_names_no_env_var(wide: None) -> None:
    """The operator's flags: `vigil operator` reads no variable, so its help names none."""
    parser = argparse.ArgumentParser()
    loader.add_flags(parser, Described, switches=True)
    text = " ".join(parser.format_help().split())
    assert "--enabled, --no-enabled Whether. (default: false)" in text
    assert "APP_" not in text


def test_a_secret_is_never_shown_by_help_or_the_docs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APP_PASSWORD", "from-the-environment")
    parser = argparse.ArgumentParser(formatter_class=argparse.RawDescriptionHelpFormatter)
    loader.add_flags(parser, Described, prefix=PREFIX)
    loader.add_variables(parser, Described, prefix=PREFIX, title="env only")
    settings_ = loader.describe(Described, prefix=PREFIX)
    for text in (parser.format_help(), loader.markdown_reference(settings_)):
        assert "hunter2" not in text
        assert "from-the-environment" not in text
        assert "not shown (secret)" in text


def test_env_only_settings_are_listed_but_no_flag_parses_them() -> None:
    parser = argparse.ArgumentParser(formatter_class=argparse.RawDescriptionHelpFormatter)
    loader.add_variables(parser, Described, prefix=PREFIX, title="env only")
    text = parser.format_help()
    assert "env only:\n  APP_NAME=NAME\n" in text
    assert " ".join(text.split()).count("(env") == 0  # the variable heads its entry
    with pytest.raises(SystemExit):
        parser.parse_args(["--name", "x"])


def test_the_docs_table_has_a_row_per_setting_under_its_section() -> None:
    table = loader.markdown_reference(loader.describe(Described, prefix=PREFIX, sections=SECTIONS))
    assert table.startswith("### Who\n\n| variable | flag | default | meaning |\n|---|---|---|---|\n")
    assert "| `APP_NAME` | `--name NAME` | required | Who to greet. |" in table
    assert "| `APP_MODE` | `--mode {fast,slow}` | `fast` | How. |" in table
    assert "\n### Listening\n" in table
    assert table.count("| `APP_") == len(Described.model_fields)


def test_a_section_must_start_at_a_field() -> None:
    with pytest.raises(ValueError, match="listen_address"):
        loader.describe(Described, prefix=PREFIX, sections={"listen_address": "listening"})


# -- the operator: flags only, handed to the handlers module in the process (never through os.environ) ------------


def test_the_operators_flags_are_its_settings() -> None:
    args = operator_cli.build_parser().parse_args(
        ["--standalone", "--resync-seconds", "3", "--events-topic", "", "--no-webhook", "--state-dir", "/tmp/x"]
    )
    found = operator_settings.from_flags(vars(args))
    assert found == OperatorSettings(
        standalone=True, resync_seconds=3, events_topic="", webhook=False, state_dir=Path("/tmp/x")
    )


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        ([], {}, ()),
        (["--sidecar-image-pull-secret", "regcred"], {}, ("regcred",)),
        (["--sidecar-image-pull-secret", "a", "--sidecar-image-pull-secret", "b"], {}, ("a", "b")),
        ([], {"VIGIL_OPERATOR_SIDECAR_IMAGE_PULL_SECRET": "a, b,"}, ("a", "b")),
        (["--sidecar-image-pull-secret", "c"], {"VIGIL_OPERATOR_SIDECAR_IMAGE_PULL_SECRET": "a"}, ("c",)),
    ],
    ids=["none", "one", "repeated", "env-comma-separated", "flags-over-env"],
)
def test_a_repeatable_operator_flag_is_a_tuple_setting(
    argv: list[str], env: dict[str, str], expected: tuple[str, ...]
) -> None:
    args = operator_cli.build_parser().parse_args(argv)
    found = loader.load(OperatorSettings, prefix=operator_settings.ENV_PREFIX, env=env, flags=vars(args))
    assert found.sidecar_image_pull_secret == expected
    assert found.injection().image_pull_secrets == expected


def test_an_empty_pull_secret_name_is_refused_naming_the_flag() -> None:
    args = operator_cli.build_parser().parse_args(["--sidecar-image-pull-secret", ""])
    with pytest.raises(ConfigError, match=r"^--sidecar-image-pull-secret: "):
        operator_settings.from_flags(vars(args))


def test_a_bad_operator_flag_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VIGIL_OPERATOR_RESYNC_SECONDS", "5")  # not read: the operator's settings are its flags
    before = dict(os.environ)
    assert operator_cli.main(["--standalone", "--resync-seconds", "0"]) == 2
    assert capsys.readouterr().err == "vigil operator: --resync-seconds: Input should be greater than or equal to 1\n"
    assert dict(os.environ) == before


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["--metrics-bind", "not-an-ip"],
         "--metrics-bind: expected an IP address to listen on (0.0.0.0: every address), got 'not-an-ip'"),
        (["--webhook-bind", "localhost"],
         "--webhook-bind: expected an IP address to listen on (0.0.0.0: every address), got 'localhost'"),
        (["--state-dir", "/proc/vigil-nope"], "--state-dir: cannot write /proc/vigil-nope: "),
        (["--webhook-cert", "/nonexistent.crt", "--webhook-key", "/nonexistent.key"],
         "--webhook-cert/--webhook-key: cannot load /nonexistent.crt with /nonexistent.key: "),
        (["--webhook-ca", "/etc/hostname"], "--webhook-ca: cannot load /etc/hostname as PEM certificates: "),
        (["--namespace", "Vigil_System"], "--namespace: expected a namespace name ("),
        (["-n", "team-a", "-n", "Team-B"], "--watch-namespace: expected a namespace name (lower-case letters, digits "
         "and '-', at most 63), got 'Team-B'"),
        (["--leader-lease", "vigil operator"], "--leader-lease: expected a Kubernetes name ("),
        (["--events-topic", "vigil/events"], "--events-topic: expected a Kafka topic name ("),
        (["--webhook-secret", "Certs", "--webhook-configuration", "vigil"], "--webhook-secret: expected a Kubernetes"),
        (["--webhook-adopt-secret", "vigil-webhook-tls"],
         "--webhook-adopt-secret hands a certificate over to --webhook-secret: set both"),
        (["--sidecar-image-pull-secret", "regcred", "--sidecar-image-pull-secret", "Reg"],
         "--sidecar-image-pull-secret: expected a Kubernetes name ("),
    ],
)  # fmt: skip
def test_an_address_file_or_name_the_operator_cannot_use_exits_2_before_kopf_starts(
    argv: list[str], line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # before: kopf's startup failed on them and retried every minute with a traceback, a crash loop in all but name
    assert operator_cli.main(["--standalone", "--state-dir", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"vigil operator: {line}"), err
    assert err.count("\n") == 1


def test_the_operators_preflight_passes_a_writable_state_dir_and_a_loadable_certificate(tmp_path: Path) -> None:
    ca = pki.new_ca("vigil-test-ca")
    leaf = pki.issue(ca, "vigil-webhook", hosts=["vigil-webhook.vigil-system.svc"], server=True)
    cert, key = leaf.write(tmp_path / "tls.crt", tmp_path / "tls.key")
    ca_file, _ = ca.write(tmp_path / "ca.crt", tmp_path / "ca.key")
    argv = ["--state-dir", str(tmp_path / "state"), "--webhook-cert", str(cert), "--webhook-key", str(key),
            "--webhook-ca", str(ca_file)]  # fmt: skip
    args = operator_cli.build_parser().parse_args(argv)
    assert operator_cli.preflight(operator_settings.from_flags(vars(args))) is None
    assert (tmp_path / "state").stat().st_mode & 0o777 == 0o700


def test_the_handlers_take_the_settings_handed_over_else_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"VIGIL_OPERATOR_RESYNC_SECONDS": "4", "VIGIL_OPERATOR_WEBHOOK_SERVICE_PORT_HTTPS": "443"}
    monkeypatch.setattr(operator_settings, "_configured", [])
    assert operator_settings.configured(env).resync_seconds == 4
    operator_settings.use(OperatorSettings(resync_seconds=9))
    assert operator_settings.configured(env).resync_seconds == 9


HANDOFF = """
import json, os, sys
import kopf
ran = {}
kopf.run = lambda **kwargs: ran.update(kwargs)
from vigil_operator import cli
async def no_refusal(kubeconfig):  # no cluster here: the CRD check has its own tests (test_crd_upgrade.py)
    return None
cli.crd_refusal = no_refusal
code = cli.main(sys.argv[1:])
from vigil_operator import admission, handlers
print(json.dumps({"code": code, "settings": handlers.SETTINGS.model_dump(mode="json"),
                  "kopf_standalone": ran["standalone"],
                  "env": sorted(k for k in os.environ if k.startswith("VIGIL_OPERATOR_"))}))
"""


def test_vigil_operator_hands_its_flags_to_the_handlers_module() -> None:
    """The settings the kopf handlers (and the admission webhooks, registered at import) run with are the flags',
    with no `VIGIL_OPERATOR_*` variable set on the way (the process environment, service links included, is not
    read)."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
           "VIGIL_OPERATOR_WEBHOOK_PORT": "tcp://10.77.64.119:443", "VIGIL_OPERATOR_RESYNC_SECONDS": "5"}  # fmt: skip
    argv = ["--standalone", "--resync-seconds", "7", "--events-topic", "", "--metrics-port", "0", "--liveness", ""]
    done = subprocess.run([sys.executable, "-c", HANDOFF, *argv], capture_output=True, text=True, timeout=120,
                          env=env, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert (found["code"], found["kopf_standalone"]) == (0, True)  # never kopf peering: the Lease elects
    expected = OperatorSettings(standalone=True, resync_seconds=7, events_topic="", metrics_port=0)
    assert found["settings"] == expected.model_dump(mode="json")
    assert found["env"] == ["VIGIL_OPERATOR_RESYNC_SECONDS", "VIGIL_OPERATOR_WEBHOOK_PORT"]  # as they were


def test_kopf_run_with_a_bad_env_var_exits_2_with_one_line() -> None:
    """The handlers module imported by `kopf run` (not `vigil operator`) reads its settings from the environment: a bad
    one is one line naming the variable, not a traceback from inside kopf's import."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
           "VIGIL_OPERATOR_LEADER_LEASE": "Vigil Lease"}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", "import vigil_operator.handlers"], capture_output=True, text=True,
                          timeout=120, env=env, check=False)  # fmt: skip
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr == (
        "vigil operator: VIGIL_OPERATOR_LEADER_LEASE: expected a Kubernetes name (lower-case letters, digits, '-' and "
        "'.', at most 253), got 'Vigil Lease'\n"
    )


def test_every_operator_setting_has_a_description_and_its_flag_its_default(wide: None) -> None:
    text = " ".join(operator_cli.build_parser().format_help().split())
    missing = [n for n, f in OperatorSettings.model_fields.items() if not (f.description or "").strip()]
    assert missing == [], "write a docstring under each OperatorSettings field: --help shows it"
    for s in loader.describe(OperatorSettings, prefix=None):
        assert f"{s.meaning} (default: {s.default})" in text, s.name
    assert "(default: None)" not in text
