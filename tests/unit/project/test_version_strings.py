"""Every image tag and chart version written in README.md, docs/, charts/ and images/ is this release
(`vigil_core.version.VERSION`): a quickstart that pulls `:0.1.0` while the chart deploys 0.2.0 fails here."""

import re
from pathlib import Path

from vigil_core.version import VERSION

ROOT = Path(__file__).resolve().parents[3]
#: `vigil-sidecar:0.2.0`, `REGISTRY/vigil-report:0.2.0`, `vigil-operator-0.2.0.docker.tar`, `vigil-0.2.0.tgz`
IMAGE_TAG = re.compile(r"\bvigil(?:-(?:sidecar|operator|report|testapps))?[:-]v?(\d+\.\d+\.\d+)\b")
#: `version: 0.2.0`, `appVersion: "0.2.0"`, `--version 0.2.0`, `VERSION=0.2.0`
VERSION_FIELD = re.compile(r"(?:\bversion:|\bappVersion:|--version|\bVERSION=)\s*\"?v?(\d+\.\d+\.\d+)\b")


def documents() -> list[Path]:
    files = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "images").iterdir()]
    files += [p for p in (ROOT / "charts").rglob("*") if p.is_file() and "crds" not in p.parts]
    files += list((ROOT / ".github" / "workflows").glob("*.y*ml"))
    return sorted(p for p in files if p.is_file() and p.suffix not in {".lock", ".tgz"})


def test_every_written_version_is_this_release() -> None:
    found: list[tuple[str, str]] = []
    for path in documents():
        text = path.read_text()
        for pattern in (IMAGE_TAG, VERSION_FIELD):
            found += [(f"{path.relative_to(ROOT)}: {m.group(0)}", m.group(1)) for m in pattern.finditer(text)]
    assert found, "no versions found: the patterns no longer match the docs"
    wrong = [where for where, version in found if version != VERSION]
    assert wrong == [], f"not {VERSION}"


def test_the_quickstart_pulls_the_images_of_this_release() -> None:
    readme = (ROOT / "README.md").read_text()
    for repository in ("vigil-sidecar", "vigil-operator", "vigil-report"):
        assert f"{repository}:{VERSION}" in readme
