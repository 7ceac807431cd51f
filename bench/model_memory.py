"""What a validation library costs a sidecar: pydantic (what vigil's models use) against msgspec (a lighter one), each
in a fresh interpreter that first imports what a sidecar loads anyway (asyncio, confluent-kafka, prometheus_client,
h11), then the library, then `--models` generated models shaped like vigil's events (nested, constrained, optional
fields, a datetime), each validated once.

Issue #20 asks for 35/40 MB of RSS; pydantic and vigil's models on it are the largest part left above the kept
libraries. msgspec is not a vigil dependency: install it beside pydantic to compare (`pip install msgspec`); without it
the pydantic rows alone are printed, and msgspec's are said to be missing.

    .venv/bin/python bench/model_memory.py [--models 30]
"""

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

SIDECAR_FLOOR = ("asyncio", "confluent_kafka", "prometheus_client", "h11")

PYDANTIC = """
from datetime import datetime
from typing import Annotated
from pydantic import BaseModel, Field
class Base(BaseModel):
    pass
def validate(model, data):
    return model.model_validate(data)
constrained = "Annotated[int, Field(ge=0, le=100)]"
"""

MSGSPEC = """
from datetime import datetime
from typing import Annotated
import msgspec
from msgspec import Meta
class Base(msgspec.Struct):
    pass
def validate(model, data):
    return msgspec.convert(data, model)
constrained = "Annotated[int, Meta(ge=0, le=100)]"
"""

MODEL = """
class M{i}(Base):
    group: str
    generation: int = 0
    lag: float | None = None
    partitions: list[str] = []
    percent: {constrained} = 5
    offsets: dict[str, int] = {{}}
    time: datetime | None = None
    inner: {inner}
validate(M{i}, {{"group": "g", "time": "2026-11-29T10:00:00Z"}})
"""

PROBE = """
import importlib, sys
from pathlib import Path
def memory():
    f = dict(l.split(":", 1) for l in Path("/proc/self/status").read_text().splitlines() if ":" in l)
    return int(f["VmRSS"].split()[0]) / 1024, int(f["RssAnon"].split()[0]) / 1024
floor, library, count = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3])
for name in floor:
    importlib.import_module(name)
before = memory()
scope = {{}}
exec({library}, scope)
loaded = memory()
for i in range(count):
    inner = f"M{{i - 1}} | None = None" if i else "str = ''"
    exec({model}.format(i=i, inner=inner, constrained=scope["constrained"]), scope)
done = memory()
print(*before, *loaded, *done)
"""


def measure(library: str, models: int) -> tuple[float, ...]:
    """(RSS, anonymous) after the floor, after the library, after the models: MB, in a fresh interpreter."""
    source = {"pydantic": PYDANTIC, "msgspec": MSGSPEC}[library]
    probe = PROBE.format(library=repr(source), model=repr(MODEL))
    out = subprocess.run(
        [sys.executable, "-c", probe, ",".join(SIDECAR_FLOOR), library, str(models)],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    return tuple(float(x) for x in out.split())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=30, help="generated models (default 30, about vigil's count)")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {Path(sys.executable)}; floor: {', '.join(SIDECAR_FLOOR)}")
    print("| library | floor RSS | library RSS (anonymous) | models RSS (anonymous) | library + models | / pydantic |")
    print("|---|---|---|---|---|---|")
    stock: float | None = None
    for library in ("pydantic", "msgspec"):
        if importlib.util.find_spec(library) is None:
            print(f"| {library} | not installed: `{sys.executable} -m pip install {library}` to compare | | | | |")
            continue
        floor, floor_anon, lib, lib_anon, done, done_anon = measure(library, args.models)
        added = done - floor
        stock = added if library == "pydantic" else stock
        ratio = f"{added / stock:.2f}×" if stock else "—"
        print(f"| {library} | {floor:.1f} MB | +{lib - floor:.1f} MB (+{lib_anon - floor_anon:.1f}) |"
              f" +{done - lib:.1f} MB (+{done_anon - lib_anon:.1f}) | +{added:.1f} MB | {ratio} |")  # fmt: skip


if __name__ == "__main__":
    main()
