"""The chart release an upgrade is tested from (vN), read from the repository's git history; vN+1 is the work tree.

There are no release tags yet, so vN is a commit: the last one whose `charts/vigil` (and `crds/`) differs
meaningfully from what is being released now. `tests/integration/test_chart_upgrade.py` installs it and upgrades to
the work tree the documented way.
"""

import io
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[3]

PREVIOUS_RELEASE: Final = "33ef8552b92005cea740b5d23fc2a35f8ef279f5"
"""vN: the commit that added the chart (chart 0.1.0, before the report CronJob's `--update-status` and the CRD's
`signal: stats`). Move it at each release: set it to the commit the release just shipped was cut from (once tags
exist, `git rev-parse vX.Y.Z^{commit}`), so the next release's upgrade test starts from what users run."""

PATHS: Final = ("charts/vigil", "crds")


class HistoryMissingError(Exception):
    """The commit is not in this clone (shallow, or no git): one line saying how to get it."""


def extract(dest: Path, commit: str = PREVIOUS_RELEASE) -> Path:
    """`git archive <commit> charts/vigil crds` unpacked under `dest`; returns `dest` (the chart is
    `dest/charts/vigil`). HistoryMissingError when git or the commit is missing."""
    git = shutil.which("git")
    if git is None:
        raise HistoryMissingError(f"the chart upgrade test needs git to read commit {commit[:12]} (vN): no git on PATH")
    found = subprocess.run([git, "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"],
                           capture_output=True, check=False)  # fmt: skip
    if found.returncode != 0:
        raise HistoryMissingError(
            f"commit {commit[:12]} (the previous chart release, vN) is not in {ROOT}: the upgrade test needs the"
            " repository's history (a shallow clone? run `git fetch --unshallow`)"
        )
    archive = subprocess.run([git, "-C", str(ROOT), "archive", "--format=tar", commit, *PATHS],
                             capture_output=True, check=False)  # fmt: skip
    if archive.returncode != 0:
        raise HistoryMissingError(f"git archive {commit[:12]} {' '.join(PATHS)}: {archive.stderr.decode().strip()}")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest
