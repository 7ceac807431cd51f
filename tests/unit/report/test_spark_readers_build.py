"""`vigil_spark.jvm.build`: vigil's byte-reader jar, the report's own build step; the dev cache uses it too."""

import zipfile
from pathlib import Path

import pytest

from vigil_dev.errors import DevError
from vigil_dev.spark import install
from vigil_spark import jvm
from vigil_spark.decode import sql


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VIGIL_CACHE", str(tmp_path))
    return tmp_path


def test_the_jar_holds_every_class_the_decoder_registers_and_is_built_once(tmp_path: Path) -> None:
    lines: list[str] = []
    jar = jvm.build(tmp_path, progress=lines.append)
    assert jar.parent == tmp_path
    with zipfile.ZipFile(jar) as archive:
        names = set(archive.namelist())
    wanted = {cls.replace(".", "/") + ".class" for cls, _ in sql.JVM_FUNCTIONS.values()}
    assert wanted <= names, wanted - names
    assert len(lines) == 1
    assert "compiled" in lines[0]
    again: list[str] = []
    assert jvm.build(tmp_path, progress=again.append) == jar
    assert again == []  # warm: a lookup, no compile


def test_the_jar_is_byte_for_byte_reproducible(tmp_path: Path) -> None:
    first = jvm.build(tmp_path / "a", progress=lambda _: None)
    second = jvm.build(tmp_path / "b", progress=lambda _: None)
    assert first.name == second.name
    assert first.read_bytes() == second.read_bytes()


def test_a_changed_source_is_a_new_jar_and_the_old_one_goes(tmp_path: Path) -> None:
    first = jvm.build(tmp_path, progress=lambda _: None)
    second = jvm.build(tmp_path, progress=lambda _: None, text=jvm.source() + "\n// changed\n")
    assert second != first
    assert second.exists()
    assert not first.exists()


def test_without_javac_the_error_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on it
    with pytest.raises(jvm.BuildError, match=r"javac not found on PATH: .*JDK"):
        jvm.build(tmp_path / "out", progress=lambda _: None)


def test_the_dev_cache_builds_it_with_the_same_step(cache: Path) -> None:
    jar = install.ensure_readers(progress=lambda _: None)
    assert jar.parent == install.jars_dir(jvm.pyspark_jars()[0])
    assert str(jar).startswith(str(cache))
    assert jar.name == jvm.jar_name(jvm.source(), jvm.pyspark_jars()[0])


def test_the_dev_cache_says_what_is_missing_in_its_own_words(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(cache))
    with pytest.raises(DevError, match=r"^spark: javac not found on PATH"):
        install.ensure_readers(progress=lambda _: None)
