"""The layout rules of DESIGN §3 hold: our `operator/` folder never shadows the stdlib module."""

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_import_operator_is_the_stdlib() -> None:
    import operator

    assert operator.__file__ is not None
    assert Path(operator.__file__).parent == Path(sys.modules["os"].__file__ or "").parent
    assert operator.itemgetter(1)([0, 1]) == 1


@pytest.mark.parametrize("folder", ["operator", "tests", "tests/unit", "tests/integration", "tests/e2e"])
def test_no_init_py_where_it_would_shadow_or_package_tests(folder: str) -> None:
    assert not (ROOT / folder / "__init__.py").exists()


@pytest.mark.parametrize("package", ["vigil_core", "vigil_sidecar", "vigil_operator", "vigil_spark", "vigil_dev"])
def test_import_names_resolve_to_their_folders(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__file__ is not None
    assert Path(module.__file__).resolve().is_relative_to(ROOT)
