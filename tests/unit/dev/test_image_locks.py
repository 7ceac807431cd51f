"""The images' lock files (`images/*.lock`): each satisfies pyproject's requirements for its image, pins every
entry to one version with a hash, and holds neither kafka-vigil itself nor pip (pip has its own lock)."""

import re
import tomllib
from pathlib import Path

import pytest

from vigil_dev.images import lock, spec

ROOT = Path(__file__).resolve().parents[3]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def pins(name: str) -> dict[str, lock.Pin]:
    return lock.parse((ROOT / "images" / name).read_text())


@pytest.mark.parametrize(("name", "extra"), lock.SETS.items())
def test_each_lock_satisfies_pyproject_for_its_image(name: str, extra: str | None) -> None:
    locked = pins(f"{name}.lock")
    assert lock.unsatisfied(locked, lock.requirements(PROJECT, extra)) == []
    assert lock.unsatisfied(locked, lock.requirements(PROJECT, None)) == []  # every image has the base install
    assert not {"kafka-vigil", "pip", "setuptools", "vigil-dev", "vigil-testapps"} & set(locked)


def test_every_image_uses_the_lock_of_its_extra() -> None:
    for image in spec.IMAGES:
        (name,) = [n for n, extra in lock.SETS.items() if extra == image.extra]
        assert image.lock == f"{name}.lock"
        assert (ROOT / "images" / image.lock).exists()


def test_pip_has_its_own_lock_of_one_wheel() -> None:
    (pin,) = pins(lock.PIP_LOCK).values()
    assert pin.name == "pip"
    assert len(pin.hashes) == 1


def test_the_report_locks_the_pyspark_its_jars_are_resolved_for() -> None:
    pom = (ROOT / "dev" / "vigil_dev" / "spark" / "pom.xml").read_text()
    match = re.search(r"<spark\.version>([^<]+)</spark\.version>", pom)
    assert match is not None
    assert pins("report.lock")["pyspark"].version == match.group(1)


def test_a_lock_that_misses_or_breaks_a_requirement_says_which() -> None:
    wanted = lock.requirements(PROJECT, None)
    locked = pins("base.lock")
    kafka_python = locked.pop("kafka-python")
    broken = {**locked, "pydantic": lock.Pin("pydantic", "1.10.0", ("0" * 64,))}
    assert lock.unsatisfied(broken, wanted) == [
        "kafka-python==3.0.12: not in the lock",
        "pydantic<3,>=2.7: locked at 1.10.0",
    ]
    assert kafka_python.version == "3.0.12"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("aiohttp>=3\n", "expected name==version"),
        ("aiohttp==3.1\n", "no --hash"),
        ("aiohttp==3.1 --hash=md5:00\n", "unexpected"),
        (f"a==1 --hash=sha256:{'0' * 64}\nA==2 --hash=sha256:{'1' * 64}\n", "pinned twice"),
    ],
)
def test_malformed_locks_are_refused_naming_the_entry(text: str, message: str) -> None:
    with pytest.raises(lock.LockError, match=message):
        lock.parse(text)


def test_render_and_parse_round_trip() -> None:
    pinned = [lock.Pin("b", "2", ("f" * 64,)), lock.Pin("a", "1", ("e" * 64, "d" * 64))]
    text = lock.render(pinned, "header\n\nmore")
    assert text.startswith("# header\n#\n# more\na==1 \\\n")
    assert lock.parse(text) == {p.name: p for p in pinned}


def test_pins_come_from_pips_report_with_the_chosen_files_hash() -> None:
    report = """{"install": [
      {"metadata": {"name": "Kafka_Vigil", "version": "0.2.0"},
       "download_info": {"url": "file:///src", "dir_info": {}}},
      {"metadata": {"name": "PySpark", "version": "4.0.0"},
       "download_info": {"url": "https://x/pyspark-4.0.0.tar.gz", "archive_info": {"hashes": {"sha256": "%s"}}}}
    ]}""" % ("a" * 64)
    assert lock.pins_from_report(report, skip=["kafka-vigil"]) == [lock.Pin("pyspark", "4.0.0", ("a" * 64,))]
    with pytest.raises(lock.LockError, match="not an index file"):
        lock.pins_from_report(report)
