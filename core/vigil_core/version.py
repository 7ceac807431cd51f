"""The release this code is: the default image tags follow it (the chart's appVersion and the package agree)."""

from typing import Final

VERSION: Final = "0.2.0"
"""Bump with `pyproject.toml`'s version and `charts/vigil/Chart.yaml`'s version and appVersion
(`tests/unit/project/test_version.py` checks they agree)."""
