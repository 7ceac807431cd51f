"""The packaging layout holds: our `operator/` folder never shadows the stdlib module; the shipped wheel
holds the shipped packages only (vigil_dev and the test apps are their own distributions)."""

import importlib
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_import_operator_is_the_stdlib() -> None:
    import operator

    assert operator.__file__ is not None
    assert Path(operator.__file__).parent == Path(sys.modules["os"].__file__ or "").parent
    assert operator.itemgetter(1)([0, 1]) == 1


@pytest.mark.parametrize("folder", ["operator", "tests", "tests/unit", "tests/integration", "tests/e2e"])
def test_no_init_py_where_it_would_shadow_or_package_tests(folder: str) -> None:
    assert not (ROOT / folder / "__init__.py").exists()


@pytest.mark.parametrize(
    "package",
    ["vigil_core", "vigil_sidecar", "vigil_operator", "vigil_spark", "vigil_cli", "vigil_dev", "vigil_testapps"],
)
def test_import_names_resolve_to_their_folders(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__file__ is not None
    assert Path(module.__file__).resolve().is_relative_to(ROOT)


SHIPPED = {"vigil_core", "vigil_sidecar", "vigil_operator", "vigil_spark", "vigil_cli"}


def test_the_kafka_vigil_wheel_finds_only_the_shipped_packages() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    roots = config["packages"]["find"]["where"]
    found = {p.name for root in roots for p in (ROOT / root).iterdir() if (p / "__init__.py").exists()}
    assert found == SHIPPED
    assert set(config["package-data"]) <= SHIPPED


@pytest.mark.parametrize(
    ("folder", "name", "package"),
    [("dev", "vigil-dev", "vigil_dev"), ("dev/testapps", "vigil-testapps", "vigil_testapps")],
)
def test_the_development_packages_are_their_own_distributions(folder: str, name: str, package: str) -> None:
    project = tomllib.loads((ROOT / folder / "pyproject.toml").read_text())["project"]
    assert project["name"] == name
    assert project["version"] == "0"  # never released
    assert (ROOT / folder / package / "__init__.py").exists()
