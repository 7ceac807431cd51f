"""Every suite collects: the unit suite runs first, so a test module of a later suite that cannot even be imported
(a moved fixture, a renamed helper) fails here in seconds instead of after the image builds."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_integration_and_e2e_suites_collect_without_errors() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/integration",
            "tests/e2e",
        ],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " collected" in done.stdout.splitlines()[-1]
