"""One version: the package, the chart (version and appVersion: the default image tags) and the code agree."""

import importlib.metadata
import tomllib
from pathlib import Path

import yaml

from vigil_core.version import VERSION
from vigil_operator.domain.injection import InjectionConfig
from vigil_operator.settings import OperatorSettings

ROOT = Path(__file__).resolve().parents[3]


def test_package_chart_and_code_agree() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((ROOT / "charts" / "vigil" / "Chart.yaml").read_text())
    assert (project, chart["version"], chart["appVersion"]) == (VERSION, VERSION, VERSION)


def test_the_installed_distribution_is_this_version() -> None:
    assert importlib.metadata.version("kafka-vigil") == VERSION, "reinstall: pip install -e .[dev]"


def test_the_default_sidecar_image_follows_the_release() -> None:
    assert InjectionConfig(operator_namespace="x").sidecar_image == f"vigil-sidecar:{VERSION}"
    assert OperatorSettings().sidecar_image == f"vigil-sidecar:{VERSION}"
