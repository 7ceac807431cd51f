"""One version: the package, the chart (version and appVersion: the default image tags), the Java library and the
code agree."""

import importlib.metadata
import re
import tomllib
import xml.etree.ElementTree as ET
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


def test_the_java_library_is_this_version_under_the_coordinates_java_md_gives() -> None:
    pom = ET.parse(ROOT / "java" / "pom.xml").getroot()  # noqa: S314 - this checkout's own file
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    coordinates = tuple(pom.findtext(f"m:{key}", namespaces=ns) for key in ("groupId", "artifactId", "version"))
    assert coordinates == ("dev.vigil", "vigil-kafka-clients", VERSION)
    doc = (ROOT / "sidecar" / "vigil_sidecar" / "JAVA.md").read_text()
    assert f"**`{':'.join(coordinates)}`**" in doc
    block = re.search(r"```xml\n(.*?)```", doc, re.S)
    assert block is not None
    dependency = ET.fromstring(block.group(1))  # noqa: S314 - this checkout's own file
    assert tuple(dependency.findtext(key) for key in ("groupId", "artifactId", "version")) == coordinates
