"""Where a sidecar's memory goes at import: VmRSS and RssAnon added by each module, imported in turn in this fresh
interpreter (so each figure is what that import adds on top of the ones above it).

The default list follows the sidecar's own import order, libraries first; `__main__` last brings in what is left.
Anonymous memory is what each pod pays alone; the file-backed rest (shared objects) is shared by the sidecars of one
image on a node.

    .venv/bin/python bench/import_memory.py [module ...]
"""

import importlib
import sys
from pathlib import Path

DEFAULT = (
    "asyncio",
    "ssl",
    "pydantic",
    "confluent_kafka",
    "prometheus_client",
    "h11",
    "vigil_core.settings",
    "vigil_core.events",
    "vigil_sidecar.config",
    "vigil_sidecar.runtime",
    "vigil_sidecar.__main__",
)


def memory_mb() -> tuple[float, float]:
    """VmRSS and RssAnon of this process. Not `vigil_dev.procs.memory_mb`: importing it (subprocess, signal, re) would
    move those modules' memory into the interpreter's line."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["RssAnon"].split()[0]) / 1024


def main() -> None:
    modules = sys.argv[1:] or DEFAULT
    rss, anon = memory_mb()
    print("| import | RSS added | anonymous added | RSS total |")
    print("|---|---|---|---|")
    print(f"| (the interpreter) | {rss:.1f} MB | {anon:.1f} MB | {rss:.1f} MB |")
    for name in modules:
        importlib.import_module(name)
        now_rss, now_anon = memory_mb()
        print(f"| {name} | {now_rss - rss:+.1f} MB | {now_anon - anon:+.1f} MB | {now_rss:.1f} MB |")
        rss, anon = now_rss, now_anon


if __name__ == "__main__":
    main()
