"""Every relative link in the user-facing Markdown leads somewhere: a file that exists and, for `#anchor`, a heading
of that file (GitHub's anchor rule). A moved or renamed document breaks this test, not the reader's click."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCS = sorted(
    [ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("examples/**/*.md"), *ROOT.glob("spark/README.md")]
)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE = re.compile(r"`[^`\n]*`")


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation other than - and _ dropped, spaces to -."""
    text = FENCE.sub("", path.read_text())
    found = set()
    for line in text.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def links(path: Path) -> list[str]:
    return [m.group(1) for m in LINK.finditer(CODE.sub("", FENCE.sub("", path.read_text())))]


def test_there_are_documents_with_links() -> None:
    assert ROOT / "README.md" in DOCS
    assert sum(len(links(p)) for p in DOCS) > 20


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc: Path) -> None:
    broken = []
    for target in links(doc):
        if re.match(r"^[a-z]+:", target):
            continue  # http(s), mailto: not checked offline
        file_part, _, anchor = target.partition("#")
        resolved = (doc.parent / file_part).resolve() if file_part else doc
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading with anchor #{anchor}")
    assert not broken, f"{doc.relative_to(ROOT)}: {broken}"
