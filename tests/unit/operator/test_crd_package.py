"""The package ships the canonical CRD unchanged, and `vigil crd` prints it (or names the extra it needs)."""

import json
import sys
from pathlib import Path

import pytest
import yaml

from vigil_cli import cli
from vigil_operator import crd

ROOT = Path(__file__).resolve().parents[3]
CANONICAL = sorted(p.name for p in (ROOT / "crds").glob("*.yaml"))
PACKAGED = sorted(p.name for p in (ROOT / "operator" / "vigil_operator" / "crds").glob("*.yaml"))


def test_the_package_has_exactly_the_canonical_crds() -> None:
    assert PACKAGED == CANONICAL, "run: make generate-crds"


@pytest.mark.parametrize("name", CANONICAL)
def test_the_packaged_copy_is_byte_identical(name: str) -> None:
    packaged = ROOT / "operator" / "vigil_operator" / "crds" / name
    assert packaged.read_bytes() == (ROOT / "crds" / name).read_bytes(), "run: make generate-crds"


def test_load_reads_the_package_data() -> None:
    loaded = crd.load()
    assert loaded == yaml.safe_load((ROOT / "crds" / "consumergroups.vigil.dev.yaml").read_text())
    assert loaded["metadata"]["name"] == crd.NAME


def test_vigil_crd_prints_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["crd"]) == 0
    assert capsys.readouterr().out == (ROOT / "crds" / "consumergroups.vigil.dev.yaml").read_text()


def test_vigil_crd_output_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["crd", "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == crd.load()


def test_vigil_crd_rejects_an_unknown_format(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["crd", "-o", "toml"])
    assert exit_info.value.code == 2
    assert "usage: vigil crd" in capsys.readouterr().err


def test_without_the_operator_extra_one_line_names_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delitem(sys.modules, "vigil_operator.crd")
    monkeypatch.setitem(sys.modules, "yaml", None)  # as if PyYAML (an operator dependency) were not installed
    assert cli.main(["crd"]) == 2
    err = capsys.readouterr().err
    assert err == "vigil crd: needs the operator extra: pip install 'kafka-vigil[operator]' (no module yaml)\n"
