"""`make images` for real: the four images built from Debian's mirror without Docker, the sidecar built a second
time from the same inputs with none of the first build's outputs to the same digest, and each image run with runc
(read-only root, host network, its own uid 65532) the way a pod would run it.

Needs root, Debian's mirror and (for the report) a JDK and Maven. Cold: a few minutes (docs/development.md#images);
warm, the first build is a cache lookup and only the second sidecar build costs (about 40 s).
"""

import json
import os
from pathlib import Path

import pytest

from vigil_core.version import VERSION
from vigil_dev import paths
from vigil_dev.images import BuiltImage, ensure_images, runc, spec

pytestmark = [pytest.mark.integration, pytest.mark.images, pytest.mark.timeout(1800)]

#: Run inside an image: what it must not hold (pip, vigil_dev, a shell) and who it runs as.
PROBE = """
import importlib.util, json, os, shutil
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(),
    "pip": importlib.util.find_spec("pip") is not None,
    "vigil_dev": importlib.util.find_spec("vigil_dev") is not None,
    "testapps": importlib.util.find_spec("vigil_testapps") is not None,
    "shells": sorted(p for p in ("/bin/sh", "/bin/bash", "/bin/dash", "/usr/bin/perl") if os.path.exists(p)),
    "on_path": sorted(s for s in ("sh", "bash", "dash", "perl", "pip", "pip3", "ls", "cat", "env", "login", "mount")
                      if shutil.which(s)),
}))
"""


@pytest.fixture(scope="module")
def built() -> dict[str, BuiltImage]:
    return ensure_images(progress=lambda line: print(line, flush=True))


def probe(image: BuiltImage) -> dict[str, object]:
    done = runc.run(image.oci_archive, ["python", "-c", PROBE])
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_every_image_is_tagged_for_the_chart_and_within_its_size(built: dict[str, BuiltImage]) -> None:
    assert set(built) == {"sidecar", "operator", "report", "testapps"}
    for name, image in built.items():
        assert image.ref == f"{spec.BY_NAME[name].repository}:{VERSION}"
        assert image.docker_archive.exists()
        assert image.oci_archive.exists()
        assert image.digest.startswith("sha256:")
        manifest = json.loads(image.manifest.read_text())
        assert manifest["digest"] == image.digest
        assert "python3\t" in image.dpkg_list.read_text()
    assert built["sidecar"].compressed_bytes <= 40_000_000  # issue #20: the layers in bench/RESULTS.md


def test_the_same_inputs_give_the_same_digest(
    built: dict[str, BuiltImage], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second build shares nothing with the first but pip's download cache: an empty $VIGIL_CACHE, so a new base
    by mmdebstrap, the kafka-vigil wheel built again, the locked wheels fetched and verified again, new archives."""
    monkeypatch.setenv("PIP_CACHE_DIR", os.environ.get("PIP_CACHE_DIR") or str(paths.cache_dir() / "pip"))
    monkeypatch.setenv("VIGIL_CACHE", str(tmp_path))
    again = ensure_images(progress=lambda line: print(line, flush=True), names=["sidecar"])
    first, second = built["sidecar"], again["sidecar"]
    assert second.oci_archive.parent.is_relative_to(tmp_path)
    assert second.digest == first.digest
    assert second.docker_archive.read_bytes() == first.docker_archive.read_bytes()


def test_the_sidecar_refuses_a_missing_setting_in_one_line(built: dict[str, BuiltImage]) -> None:
    done = runc.run(built["sidecar"].oci_archive)  # its entrypoint, `vigil sidecar`, with no VIGIL_* at all
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == ["vigil sidecar: VIGIL_GROUP_ID: required, not set"]


@pytest.mark.parametrize("name", ["sidecar", "operator", "testapps"])
def test_no_pip_no_vigil_dev_no_shell(built: dict[str, BuiltImage], name: str) -> None:
    seen = probe(built[name])
    assert seen == {
        "uid": 65532,
        "gid": 65532,
        "pip": False,
        "vigil_dev": False,
        "testapps": name == "testapps",
        "shells": [],
        "on_path": [],
    }
    shell = runc.run(built[name].oci_archive, ["sh", "-c", "true"])
    assert shell.returncode != 0
    assert "executable file not found" in shell.stderr


def test_the_operator_image_has_its_extra(built: dict[str, BuiltImage]) -> None:
    done = runc.run(built["operator"].oci_archive, ["vigil", "crd", "-o", "json"])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["metadata"]["name"] == "consumergroups.vigil.dev"


def test_the_test_image_runs_the_test_apps(built: dict[str, BuiltImage]) -> None:
    done = runc.run(built["testapps"].oci_archive, ["python", "-m", "vigil_testapps.consumerapp", "--help"])
    assert done.returncode == 0, done.stderr
    assert "--group" in done.stdout


def test_the_report_starts_spark_with_its_baked_jars(built: dict[str, BuiltImage]) -> None:
    """The report keeps bash (Spark's launcher scripts need it) and runs Spark locally with the Kafka source and
    vigil's byte readers from `$VIGIL_SPARK_JARS`, on a read-only root with only /tmp writable (as in the chart)."""
    seen = probe(built["report"])
    assert seen["uid"] == 65532
    assert seen["pip"] is False
    assert seen["vigil_dev"] is False
    assert "/bin/bash" in seen["shells"]  # type: ignore[operator]
    script = (
        "from vigil_spark import session\n"
        "from vigil_spark.decode import sql\n"
        "s = session.build('local[1]')\n"
        "conf = s._jsparkSession.sessionState().conf()\n"  # the lookup `format('kafka')` does, in Spark's loader
        "kafka = s._jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource('kafka', conf)\n"
        "print(s.range(5).count(), sql.readers_for(s) is sql.JVM, kafka.getName())\n"
    )
    done = runc.run(built["report"].oci_archive, ["python", "-c", script], env={"HOME": "/tmp"}, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["5", "True", "org.apache.spark.sql.kafka010.KafkaSourceProvider"]
