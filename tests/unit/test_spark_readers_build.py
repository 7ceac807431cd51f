"""`vigil_dev.spark.install.ensure_readers`: vigil's byte-reader jar compiled once into the jars directory."""

import zipfile
from pathlib import Path

import pytest

from vigil_dev.errors import DevError
from vigil_dev.spark import install
from vigil_spark.decode import sql


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VIGIL_CACHE", str(tmp_path))
    return tmp_path


def test_the_jar_holds_every_class_the_decoder_registers_and_is_built_once(cache: Path) -> None:
    lines: list[str] = []
    jar = install.ensure_readers(progress=lines.append)
    assert jar.parent == install.jars_dir(install.pyspark_jars()[0])
    assert str(jar).startswith(str(cache))
    with zipfile.ZipFile(jar) as archive:
        names = set(archive.namelist())
    wanted = {cls.replace(".", "/") + ".class" for cls, _ in sql.JVM_FUNCTIONS.values()}
    assert wanted <= names, wanted - names
    assert len(lines) == 1
    assert "compiled" in lines[0]
    again: list[str] = []
    assert install.ensure_readers(progress=again.append) == jar
    assert again == []  # warm: a lookup, no compile


def test_a_changed_source_is_a_new_jar_and_the_old_one_goes(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = install.ensure_readers(progress=lambda _: None)
    source = install.readers_source()
    monkeypatch.setattr(install, "readers_source", lambda: source + "\n// changed\n")
    second = install.ensure_readers(progress=lambda _: None)
    assert second != first
    assert second.exists()
    assert not first.exists()


def test_without_javac_the_error_names_it(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(cache))  # nothing on it
    with pytest.raises(DevError, match=r"javac not found on PATH: .*JDK"):
        install.ensure_readers(progress=lambda _: None)
