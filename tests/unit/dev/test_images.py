"""The image definitions (`vigil_dev.images.spec`) and the build plan (`plan`): what each image runs and as whom,
and the commands that make its bytes reproducible, read without building (tests/integration/test_images_build.py
builds them)."""

from pathlib import Path

import pytest
import yaml

from vigil_cli import cli
from vigil_core.version import VERSION
from vigil_dev.images import plan, runc, spec
from vigil_operator.domain.injection import InjectionConfig
from vigil_spark import session

ROOT = Path(__file__).resolve().parents[3]
EPOCH = 1795486335
# image -> (the `vigil` subcommand it runs, the extra it installs: None = the base install only)
EXPECTED = {"sidecar": ("sidecar", None), "operator": ("operator", "operator"), "report": ("report", "report")}


def umoci_config(image: spec.Image) -> list[str]:
    argvs = plan.umoci_argvs(image, "/l", [("/b.tar", "base"), ("/a.tar", "app")], EPOCH, VERSION)
    (config,) = [a for a in argvs if a[:2] == ["umoci", "config"]]
    return config


def test_one_way_to_build_no_dockerfiles_remain() -> None:
    assert not list((ROOT / "images").glob("*Dockerfile*"))
    assert sorted(i.name for i in spec.IMAGES) == ["operator", "report", "sidecar", "testapps"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_image_runs_a_real_subcommand_with_its_extra(name: str) -> None:
    image = spec.BY_NAME[name]
    command, extra = EXPECTED[name]
    assert image.entrypoint == ("vigil", command)
    assert image.extra == extra
    assert command == "sidecar" or cli.EXTRAS[command][1] == extra


def test_the_chart_pulls_these_repositories() -> None:
    values = yaml.safe_load((ROOT / "charts" / "vigil" / "values.yaml").read_text())
    for name in EXPECTED:
        assert values[name]["image"]["repository"] == spec.BY_NAME[name].repository
        assert values[name]["image"]["tag"] == ""  # the chart's appVersion, the release the images are tagged with
    assert spec.ref(spec.BY_NAME["sidecar"], VERSION) == InjectionConfig(operator_namespace="x").sidecar_image


@pytest.mark.parametrize("image", spec.IMAGES, ids=lambda i: i.name)
def test_every_image_runs_as_65532_at_the_epoch_with_the_venv_first_on_path(image: spec.Image) -> None:
    config = umoci_config(image)
    assert "--config.user=65532:65532" in config
    assert f"--created={plan.iso(EPOCH)}" in config
    assert "--config.env=PATH=/opt/vigil/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" in config
    assert f"--config.label=org.opencontainers.image.version={VERSION}" in config
    history = [a for a in plan.umoci_argvs(image, "/l", [("/b", "x")], EPOCH, VERSION) if "add-layer" in a]
    assert all(f"--history.created={plan.iso(EPOCH)}" in argv for argv in history)


def test_the_sidecar_exposes_the_ports_the_webhook_injects() -> None:
    cfg = InjectionConfig(operator_namespace="vigil-system")
    assert set(spec.BY_NAME["sidecar"].ports) == {cfg.beacon_port, cfg.health_port}
    assert {a for a in umoci_config(spec.BY_NAME["sidecar"]) if "exposedports" in a} == {
        f"--config.exposedports={cfg.beacon_port}/tcp",
        f"--config.exposedports={cfg.health_port}/tcp",
    }


def test_the_report_image_finds_its_baked_jars_and_java() -> None:
    report = spec.BY_NAME["report"]
    assert report.jars
    assert dict(report.env)[session.JARS_ENV] == spec.JARS_DIR
    assert spec.JARS_DIR.startswith(spec.VENV + "/")  # in the app layer
    assert "openjdk-17-jre-headless" in report.base.packages
    assert report.workdir == "/tmp"  # Spark writes artifacts/ under the working directory: the chart's emptyDir
    assert not [p for p in report.base.packages if "jdk" in p and "jre" not in p]  # a runtime, no compiler


def test_only_the_report_keeps_a_shell() -> None:
    assert {i.name for i in spec.IMAGES if i.base.keeps_shell} == {"report"}
    assert "bash" in spec.JRE_BASE.why  # the reason: Spark's launcher scripts
    shellless = plan.base_hooks(spec.PYTHON_BASE)
    assert any("dpkg --purge" in h and "bash perl-base debconf" in h for h in shellless)
    assert any("dpkg --purge" in h and h.endswith(" dash") for h in shellless)
    assert not any("dpkg --purge" in h for h in plan.base_hooks(spec.JRE_BASE))


def test_the_bases_are_shared_and_built_from_debian_with_its_security_updates() -> None:
    assert {i.base.name for i in spec.IMAGES} == {"python", "python-jre"}
    argv = plan.mmdebstrap_argv(spec.PYTHON_BASE, "/rootfs", plan.suites())
    assert argv[:3] == ["mmdebstrap", "--mode=root", "--variant=essential"]
    assert "--include=python3,ca-certificates" in argv
    assert "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr" in argv
    assert argv[-3:] == [
        "deb http://deb.debian.org/debian bookworm main",
        "deb http://deb.debian.org/debian bookworm-updates main",
        "deb http://deb.debian.org/debian-security bookworm-security main",
    ]
    assert '--essential-hook=mkdir -p "$1/usr/share/man/man1"' in argv  # openjdk's postinst needs it
    assert any(h.startswith("--customize-hook=echo vigil:x:65532:65532:") and "/etc/passwd" in h for h in argv)
    assert '--customize-hook=rm -f "$1/etc/resolv.conf"' in argv  # never the build host's resolver


def test_pip_runs_from_its_wheel_offline_with_hashes_and_a_clean_environment() -> None:
    venv = plan.venv_argv("/r", EPOCH)
    assert "--without-pip" in venv
    pip = plan.pip_install_argv("/r", EPOCH, "pip-26.3-py3-none-any.whl", "install.txt")
    assert pip[:2] == ["env", "-i"]  # the host's: a shell-less base has no `env` (no coreutils)
    assert pip[pip.index("chroot") + 1] == "/r"
    assert all(argv[0] == "env" for argv in (venv, plan.compile_argv("/r", EPOCH)))
    assert "/wh/pip-26.3-py3-none-any.whl/pip" in pip
    for flag in ("--no-index", "--find-links=/wh", "--require-hashes", "--no-compile", "--no-cache-dir"):
        assert flag in pip
    env = [a for a in pip[4 : pip.index("/opt/vigil/bin/python")]]
    assert not [a for a in env if a.startswith(("PIP_", "SSL_", "REQUESTS_", "HTTP", "http"))]
    assert f"SOURCE_DATE_EPOCH={EPOCH}" in env
    assert "PYTHONHASHSEED=0" in env
    assert plan.install_requirements([("b", "2", "f" * 64), ("a", "1", "e" * 64)]) == (
        f"a==1 --hash=sha256:{'e' * 64}\nb==2 --hash=sha256:{'f' * 64}\n"
    )


def test_pycs_are_compiled_once_without_timestamps() -> None:
    argv = plan.compile_argv("/r", EPOCH)
    assert "--invalidation-mode=unchecked-hash" in argv
    assert argv[-1] == "/opt/vigil/lib"


def test_layer_tars_are_deterministic() -> None:
    argv = plan.tar_argv("/r", "/o.tar", EPOCH, members=["./opt/vigil"], exclude=plan.BASE_EXCLUDES)
    for flag in ("--sort=name", f"--mtime=@{EPOCH}", "--clamp-mtime", "--numeric-owner", "--format=posix"):
        assert flag in argv
    assert "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime" in argv
    assert argv[-1] == "./opt/vigil"
    base = plan.tar_argv("/r", "/b.tar", EPOCH, exclude=plan.BASE_EXCLUDES)
    assert {"--exclude=./opt/vigil", "--exclude=./var/lib/apt", "--exclude=./dev/*"} <= set(base)


def test_the_archives_are_named_for_ctr() -> None:
    oci, docker = plan.skopeo_argvs(
        spec.BY_NAME["sidecar"], "/l", oci_archive="/o.tar", docker_archive="/d.tar", version="0.2.0"
    )
    assert oci[-1] == "oci-archive:/o.tar:0.2.0"  # the bare tag: ctr import --base-name finds nothing otherwise
    assert docker[-1] == "docker-archive:/d.tar:vigil-sidecar:0.2.0"  # -> docker.io/library/vigil-sidecar:0.2.0


def test_the_epoch_is_the_newest_debian_release_date_never_the_clock() -> None:
    texts = ["Origin: Debian\nDate: Sat, 10 May 2025 09:00:00 UTC\n", "Date: Mon, 24 Nov 2026 02:12:15 UTC\n"]
    assert plan.release_epoch(texts) == EPOCH
    assert plan.iso(EPOCH) == "2026-11-24T02:12:15Z"
    with pytest.raises(ValueError, match="Date"):
        plan.release_epoch(["Origin: Debian\n"])


def test_cache_keys_separate_their_parts() -> None:
    assert plan.digest("ab", "c") != plan.digest("a", "bc")
    assert plan.digest("a", b"b") == plan.digest("a", "b")


def test_the_test_image_runs_the_test_apps() -> None:
    testapps = spec.BY_NAME["testapps"]
    assert testapps.testapps
    assert testapps.base is spec.PYTHON_BASE
    assert testapps.entrypoint == ("python",)
    module = testapps.cmd[1]
    assert (ROOT / "dev" / "testapps" / (module.replace(".", "/") + ".py")).exists()


def test_runc_runs_an_image_like_a_locked_down_pod() -> None:
    unpacked = {
        "process": {"terminal": True, "args": ["vigil", "sidecar"], "env": ["PATH=/x"]},
        "root": {"path": "rootfs"},
        "linux": {"namespaces": [{"type": "pid"}, {"type": "network"}, {"type": "mount"}]},
        "mounts": [{"destination": "/proc", "type": "proc"}],
    }
    config = runc.bundle_config(unpacked, args=["vigil", "--help"], env={"A": "1"}, hosts_file="/h")
    assert config["root"] == {"path": "rootfs", "readonly": True}
    assert config["process"]["terminal"] is False
    assert config["process"]["args"] == ["vigil", "--help"]
    assert config["process"]["env"] == ["PATH=/x", "A=1"]
    assert [ns["type"] for ns in config["linux"]["namespaces"]] == ["pid", "mount"]  # the host network
    assert [m["destination"] for m in config["mounts"]] == ["/proc", "/tmp", "/etc/hosts"]
    assert config["mounts"][-1]["source"] == "/h"
    assert config["hostname"] == runc.HOSTNAME
    assert unpacked["process"]["terminal"] is True  # the input is not changed


def test_a_missing_tool_is_named_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vigil_dev.images import build

    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on it
    monkeypatch.setattr(build.os, "geteuid", lambda: 0)
    with pytest.raises(build.ImageBuildError, match=r"^images: mmdebstrap not found on PATH \(Debian: apt-get install"):
        build.ensure_images(progress=lambda _: None, names=["sidecar"])


def test_an_unreachable_mirror_is_named_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from vigil_dev.images import build

    monkeypatch.setenv("VIGIL_DEBIAN_MIRROR", "http://127.0.0.1:9/debian")  # loopback, nothing listens
    with pytest.raises(
        build.ImageBuildError, match=r"^images: Debian mirror unreachable: http://127\.0\.0\.1:9/debian"
    ):
        build.debian_state(progress=lambda _: None)


def test_an_unknown_image_is_refused() -> None:
    from vigil_dev.images import build

    with pytest.raises(build.ImageBuildError, match="no image"):
        build.ensure_images(progress=lambda _: None, names=["nginx"])


def jks(entries: list[tuple[str, int, bytes]]) -> bytes:
    import hashlib
    import struct

    body = struct.pack(">III", 0xFEEDFEED, 2, len(entries))
    for alias, stamp, cert in entries:
        name = alias.encode()
        body += struct.pack(">IH", 2, len(name)) + name + struct.pack(">QH", stamp, 5) + b"X.509"
        body += struct.pack(">I", len(cert)) + cert
    return body + hashlib.sha1("changeit".encode("utf-16-be") + b"Mighty Aphrodite" + body).digest()  # noqa: S324 - JKS


def test_the_java_keystore_loses_its_build_time_stamps() -> None:
    """ca-certificates-java stamps each CA with the clock: two report bases differed by that file alone."""
    first = jks([("debian:a", 1_700_000_000_123, b"cert-a"), ("debian:b", 1_700_000_000_456, b"cert-bb")])
    second = jks([("debian:a", 1_800_000_000_001, b"cert-a"), ("debian:b", 1_800_000_000_002, b"cert-bb")])
    assert first != second
    assert plan.normalize_jks(first, EPOCH) == plan.normalize_jks(second, EPOCH)
    at_epoch = jks([("debian:a", EPOCH * 1000, b"cert-a"), ("debian:b", EPOCH * 1000, b"cert-bb")])
    assert plan.normalize_jks(first, EPOCH) == at_epoch
    with pytest.raises(ValueError, match="not a JKS"):
        plan.normalize_jks(b"\x30\x82" + bytes(30), EPOCH)  # PKCS#12


def test_a_build_directory_is_never_removed_through_a_mount(tmp_path: Path) -> None:
    from vigil_dev.images import build

    assert build.mounts_below(Path("/proc")) == ["/proc"]
    assert build.mounts_below(tmp_path) == []


def _stanza(name: str, depends: str = "", *, status: str = "install ok installed", provides: str = "") -> str:
    lines = [f"Package: {name}", f"Status: {status}", "Architecture: amd64"]
    if provides:
        lines.append(f"Provides: {provides}")
    if depends:
        lines.append(f"Depends: {depends}")
    return "\n".join(lines)


# A dpkg status file shaped like bookworm's essential variant plus python3 and ca-certificates
STATUS = "\n\n".join([
    _stanza("python3", "python3.11 (>= 3.11.2-1~), libpython3-stdlib (= 3.11.2-1+b1)"),
    _stanza("python3.11", "libpython3.11-stdlib:amd64 (= 3.11.2-6), libc6 (>= 2.36)"),
    _stanza("libpython3-stdlib", "libpython3.11-stdlib"),
    _stanza("libpython3.11-stdlib", "libssl3 (>= 3.0.0), mailcap | media-types, libdb5.3"),
    _stanza("media-types"),
    _stanza("libssl3", "libc6 (>= 2.34)"),
    _stanza("libdb5.3", "libc6"),
    _stanza("libc6", "libgcc-s1"),
    _stanza("libgcc-s1", "libc6 (>= 2.35)"),
    _stanza("ca-certificates", "openssl (>= 1.1.1), debconf (>= 0.5) | debconf-2.0"),
    _stanza("openssl", "libssl3 (>= 3.0.9), libc6"),
    _stanza("mawk", provides="awk"),
    _stanza("base-files", "awk"),  # a virtual package, by its provider
    _stanza("base-passwd", "libc6"),
    _stanza("dpkg", "tar (>= 1.28-1), libc6"),
    _stanza("tar", "libc6"),
    _stanza("coreutils", "libc6"),
    _stanza("util-linux", "libsystemd0, libpam0g"),
    _stanza("libsystemd0", "libc6"),
    _stanza("libpam0g", "libc6"),
    _stanza("debianutils", status="install ok triggers-pending"),
    _stanza("bash", status="deinstall ok config-files"),  # purged before: gone, its stanza left as dpkg leaves it
])  # fmt: skip


def test_a_shell_less_base_keeps_exactly_its_packages_runtime_closure() -> None:
    assert plan.prunable(STATUS, spec.PYTHON_BASE) == [
        "coreutils",
        "debianutils",
        "libpam0g",
        "libsystemd0",
        "util-linux",
    ]
    packages = plan.installed_packages(STATUS)
    assert "bash" not in packages  # config-files: its files are gone already
    assert packages["python3.11"].depends == (("libpython3.11-stdlib",), ("libc6",))
    assert packages["libpython3.11-stdlib"].depends[1] == ("mailcap", "media-types")


def test_the_status_file_keeps_only_what_is_there() -> None:
    dropped = plan.prunable(STATUS, spec.PYTHON_BASE)
    left = plan.status_without(STATUS, dropped)
    assert set(plan.installed_packages(left)) == set(plan.installed_packages(STATUS)) - set(dropped)
    assert "Package: bash" in left  # not installed: dpkg's own record of the purge stays
    assert left.endswith("\n")
    assert plan.status_without(left, dropped) == left


def test_nothing_a_kept_package_needs_is_ever_dropped() -> None:
    packages = plan.installed_packages(STATUS)
    dropped = set(plan.prunable(STATUS, spec.PYTHON_BASE))
    for name in set(packages) - dropped:
        for alternatives in packages[name].depends:
            satisfied = [a for a in alternatives if a in packages or any(a in p.provides for p in packages.values())]
            assert not satisfied or any(
                a not in dropped
                and (a in packages or any(a in packages[p].provides for p in packages if p not in dropped))
                for a in satisfied
            ), (name, alternatives)
