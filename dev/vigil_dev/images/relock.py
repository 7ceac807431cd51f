"""Regenerate `images/*.lock` (`make lock`): pip resolves each image's dependency set and reports the files it
chose; nothing is installed. Run on a host whose Python is the images' (CPython 3.11, x86_64 glibc Linux)."""

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from vigil_dev.images import lock
from vigil_dev.images.build import LOCKS, REPO, ImageBuildError, _host_pip_env

HEADER = """images/{name}: {what}.
Every file pinned by hash, for CPython 3.11 on x86_64 glibc Linux (the images' Debian bookworm python3);
installed offline by `make images` (pip --require-hashes). Regenerate: `make lock`.
tests/unit/dev/test_image_locks.py checks it satisfies pyproject.toml."""
WHAT = {
    "base": "kafka-vigil's base dependencies (the vigil-sidecar and vigil-testapps images)",
    "operator": "kafka-vigil[operator]'s dependencies (the vigil-operator image)",
    "report": "kafka-vigil[report]'s dependencies (the vigil-report image)",
    "pip": "the pip that installs the others (run from its wheel: never in an image)",
}


def resolve(requirements: list[str], skip: tuple[str, ...] = ()) -> list[lock.Pin]:
    argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
            "--disable-pip-version-check", "--report", "-", *requirements]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, env=_host_pip_env(), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        raise ImageBuildError(f"lock: pip could not resolve {' '.join(requirements)}: {reason}")
    return lock.pins_from_report(done.stdout, skip=skip)


def relock(progress: Callable[[str], None] = print) -> list[Path]:
    wrong = lock.marker_environment_matches(lock.host_marker_environment())
    if wrong:
        raise ImageBuildError(f"lock: this Python resolves for {', '.join(wrong)}: use CPython 3.11 on x86_64")
    written = []
    for name, extra in lock.SETS.items():
        target = "." if extra is None else f".[{extra}]"
        pins = resolve([target], skip=("kafka-vigil",))
        path = LOCKS / f"{name}.lock"
        path.write_text(lock.render(pins, HEADER.format(name=path.name, what=WHAT[name])))
        progress(f"lock: {path.relative_to(REPO)}: {len(pins)} distributions")
        written.append(path)
    pins = resolve(["pip"])
    path = LOCKS / lock.PIP_LOCK
    path.write_text(lock.render(pins, HEADER.format(name=path.name, what=WHAT["pip"])))
    progress(f"lock: {path.relative_to(REPO)}: {', '.join(f'{p.name}=={p.version}' for p in pins)}")
    return [*written, path]
