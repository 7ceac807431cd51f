"""Generated Markdown in the docs (the ConsumerGroup reference, the sidecar's settings), so they cannot drift from
their source: a document is hand-written down to its marker line and generated below it; `--check` says when the
generated part is stale, `--write` refreshes it."""

import re
import sys
from collections.abc import Sequence
from pathlib import Path


def cells(values: Sequence[str]) -> str:
    """A table row; `|` escaped in every cell (GitHub needs it even inside code spans)."""
    return "| " + " | ".join(v.replace("|", "\\|") for v in values) + " |"


def one_line(text: object) -> str:
    """One line of Markdown: whitespace collapsed; `<` escaped so `<pod>` is not taken for HTML."""
    return re.sub(r"\s+", " ", str(text or "")).strip().replace("<", "\\<")


def splice(document: str, marker: str, generated: str) -> str:
    """`document` up to and including its `marker` line, then `generated` (the hand-written head is kept)."""
    head, found, _ = document.partition(marker + "\n")
    if not found:
        raise ValueError(f"no marker line {marker!r}: the generator owns only what is below it")
    return f"{head}{marker}\n\n{generated}"


def reference(generated: str, marker: str, *, write: str | None, check: str | None, prog: str, how: str) -> int:
    """Print `generated`, or bring the file `write` up to date below its marker, or exit 1 when the file `check` is
    stale (saying `how` to regenerate it)."""
    path = write or check
    if path is None:
        sys.stdout.write(generated)
        return 0
    try:
        document = Path(path).read_text(encoding="utf-8")
        fresh = splice(document, marker, generated)
    except (OSError, ValueError) as exc:
        print(f"{prog}: {path}: {exc}", file=sys.stderr)
        return 1
    if check is not None and fresh != document:
        print(f"{prog}: {path} is stale (run: {how})", file=sys.stderr)
        return 1
    if write is not None and fresh != document:
        Path(path).write_text(fresh, encoding="utf-8")
    return 0
