"""The image definitions (they cannot be built on this machine: no container engine): each runs a real `vigil`
entry point, as a non-root user, from a pinned base, and the sidecar's carries no extra."""

import re
from pathlib import Path

import pytest

from vigil_core import cli

IMAGES = Path(__file__).parents[2] / "images"
# image -> (the `vigil` subcommand it runs, the extra it installs: None = the base install only)
EXPECTED = {"sidecar": ("sidecar", None), "operator": ("operator", "operator"), "report": ("report", "report")}


def dockerfile(name: str) -> str:
    return (IMAGES / f"{name}.Dockerfile").read_text()


def test_every_image_is_expected() -> None:
    assert sorted(p.name for p in IMAGES.glob("*.Dockerfile")) == sorted(f"{n}.Dockerfile" for n in EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_image_runs_a_real_subcommand_as_non_root_from_a_pinned_base(name: str) -> None:
    text = dockerfile(name)
    command, extra = EXPECTED[name]
    entry = re.findall(r'^ENTRYPOINT \["vigil", "([a-z]+)"\]$', text, re.MULTILINE)
    assert entry == [command]
    assert command == "sidecar" or command in cli.EXTRAS
    if extra is not None:
        assert cli.EXTRAS[command][1] == extra
    base = re.search(r"^ARG PYTHON=(\S+)$", text, re.MULTILINE)
    assert base is not None
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+", base.group(1)), "pin the exact Python release"
    final_stage = text.rsplit("\nFROM ", 1)[1]
    user = re.search(r"^USER (\d+):(\d+)$", final_stage, re.MULTILINE)
    assert user is not None
    assert int(user.group(1)) != 0
    assert int(user.group(2)) != 0
    installs = re.findall(r"pip install --no-cache-dir (\S+)", text)
    assert installs == (["."] if extra is None else [f'".[{extra}]"'])


def test_the_report_image_resolves_its_jars_at_build_time_with_the_setup_pom() -> None:
    text = dockerfile("report")
    assert "python -m vigil_dev.spark.install" in text  # the same resolver and pom as `make setup`
    build_stage, final_stage = text.rsplit("\nFROM ", 1)
    assert "openjdk-17-jdk-headless" in build_stage  # javac compiles the byte readers there
    assert "jdk" not in final_stage.replace("openjdk-17-jre-headless", "")  # the job itself needs only a JRE
    assert text.count("ENV ") >= 2
    assert all("VIGIL_CACHE=/opt/vigil/cache" in line for line in text.splitlines() if line.startswith("ENV VIGIL_"))
    assert "VIGIL_CACHE=/opt/vigil/cache" in final_stage  # the job finds the baked jars, never Maven


def test_the_sidecar_exposes_the_ports_the_webhook_injects() -> None:
    from vigil_operator.domain.injection import InjectionConfig

    cfg = InjectionConfig(operator_namespace="vigil-system")
    exposed = re.search(r"^EXPOSE (.+)$", dockerfile("sidecar"), re.MULTILINE)
    assert exposed is not None
    assert {int(p) for p in exposed.group(1).split()} == {cfg.beacon_port, cfg.health_port}
