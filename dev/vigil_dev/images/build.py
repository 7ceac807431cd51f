"""Run the plan: bases, wheelhouse, app layers, archives; each step cached under `$VIGIL_CACHE/images`, keyed on its
inputs, so a warm `make images` with nothing changed is a few reads and one small HTTP request per Debian suite.

Layout of the cache (`root` = `$VIGIL_CACHE/images` unless `out_dir` is given; downloads always in the former):
- `wheels/pypi/<name>-<version>-<hash>/`: one locked wheel each (sdists verified by hash, then built here);
  `wheels/local/<dist>-<digest>/`: kafka-vigil and vigil-testapps built from the working tree;
- `readers/`: vigil's byte-reader jar (`vigil_spark.jvm`);
- `<root>/base/<base>-<key>/`: `layer.tar`, `dpkg.txt`, `epoch`;
- `<root>/layer/<image>-<key>/layer.tar`: the `/opt/vigil` layer;
- `<root>/out/<image>/`: `<repository>-<version>.oci.tar`, `.docker.tar`, `dpkg.txt`, `manifest.json`.
"""

import contextlib
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from vigil_core.version import VERSION
from vigil_dev import paths
from vigil_dev.errors import DevError
from vigil_dev.images import lock, plan, spec

Progress = Callable[[str], None]
REPO = Path(__file__).resolve().parents[3]
LOCKS = REPO / "images"
#: The wheel's inputs: what setuptools reads to build kafka-vigil (tracked and untracked-not-ignored files).
VIGIL_SOURCES = ("pyproject.toml", "README.md", "LICENSE", "core", "sidecar", "operator", "spark", "cli")
TESTAPPS_SOURCES = ("dev/testapps",)
#: Host pip settings that would change where wheels come from; dropped (the hashes decide what is accepted anyway).
_HOST_PIP_DROPPED = ("PIP_FIND_LINKS", "PIP_CONSTRAINT", "PIP_NO_BINARY", "PIP_ONLY_BINARY", "PIP_REQUIRE_VIRTUALENV")
_TOOLS = {
    "mmdebstrap": "mmdebstrap",
    "umoci": "umoci",
    "skopeo": "skopeo",
    "tar": "tar",
    "chroot": "coreutils",
    "git": "git",
}


class ImageBuildError(DevError):
    """An image cannot be built; the message is one line naming what is missing or what failed."""


@dataclass(frozen=True)
class BuiltImage:
    """One image's outputs. `digest` is the OCI manifest's (the docker archive gets a new one when imported)."""

    name: str
    ref: str
    docker_archive: Path
    oci_archive: Path
    digest: str
    compressed_bytes: int
    uncompressed_bytes: int
    dpkg_list: Path
    manifest: Path


def ensure_images(
    progress: Progress = print, names: Sequence[str] | None = None, *, out_dir: Path | None = None
) -> dict[str, BuiltImage]:
    """Build (or find cached) the named images, all four by default. `out_dir` replaces the cache's bases, layers
    and outputs (not its downloads): a second, independent build of the same inputs, for the reproducibility test."""
    unknown = set(names or ()) - set(spec.BY_NAME)
    if unknown:
        raise ImageBuildError(f"images: no image {sorted(unknown)} (known: {', '.join(spec.BY_NAME)})")
    wanted = [spec.BY_NAME[n] for n in names] if names else list(spec.IMAGES)
    _preflight(wanted)
    cache = paths.cache_dir() / "images"
    root = out_dir or cache
    debian = debian_state(progress)
    recipe = _recipe()
    built = {}
    for image in wanted:
        built[image.name] = _ensure_image(
            image, root=root, cache=cache, debian=debian, recipe=recipe, progress=progress
        )
    return built


# -- inputs ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DebianState:
    in_release: tuple[str, ...]
    epoch: int
    sources: tuple[plan.Suite, ...]


def _preflight(images: Sequence[spec.Image]) -> None:
    if os.geteuid() != 0:
        raise ImageBuildError("images: must run as root (mmdebstrap --mode=root and chroot build the rootfs)")
    for tool, package in _TOOLS.items():
        if shutil.which(tool) is None:
            raise ImageBuildError(f"images: {tool} not found on PATH (Debian: apt-get install {package})")
    if any(i.jars for i in images):
        for tool, package in (("javac", "openjdk-17-jdk-headless"), ("mvn", "maven")):
            if shutil.which(tool) is None:
                raise ImageBuildError(f"images: {tool} not found on PATH, the report image needs it ({package})")
    wrong = lock.marker_environment_matches(lock.host_marker_environment())
    if wrong or platform.libc_ver()[0] != "glibc":
        raise ImageBuildError(f"images: this Python resolves wheels for {', '.join(wrong) or 'non-glibc'}: run with "
                              "CPython 3.11 on x86_64 glibc Linux (the images' interpreter)")  # fmt: skip


def debian_state(progress: Progress) -> DebianState:
    mirror = os.environ.get("VIGIL_DEBIAN_MIRROR", plan.DEFAULT_MIRROR).rstrip("/")
    security = os.environ.get("VIGIL_DEBIAN_SECURITY_MIRROR", plan.DEFAULT_SECURITY_MIRROR).rstrip("/")
    sources = plan.suites(mirror, security)
    texts = []
    for suite in sources:
        try:
            with urllib.request.urlopen(suite.in_release_url, timeout=30) as response:  # noqa: S310 - http(s) only
                texts.append(response.read().decode("utf-8", "replace"))
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ImageBuildError(f"images: Debian mirror unreachable: {suite.in_release_url}: {reason}") from exc
    epoch = plan.release_epoch(texts)
    progress(f"images: Debian {spec.SUITE} as of {plan.iso(epoch)} (SOURCE_DATE_EPOCH={epoch})")
    return DebianState(tuple(texts), epoch, sources)


def _recipe() -> str:
    """The builder's own code is an input: a changed recipe rebuilds (the modules that shape the bytes only)."""
    here = Path(__file__).parent
    return plan.digest(*((here / name).read_bytes() for name in ("spec.py", "plan.py", "build.py")))


def _source_files(prefixes: Sequence[str]) -> list[str]:
    """The working tree's files under `prefixes`: tracked and untracked-not-ignored (a developer's change counts)."""
    done = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *prefixes],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise ImageBuildError(f"images: git ls-files failed in {REPO}: {done.stderr.decode().strip()[:200]}")
    names = sorted({n for n in done.stdout.decode().split("\0") if n and (REPO / n).is_file()})
    return [n for n in names if "__pycache__" not in n]


def _sources_digest(files: Sequence[str]) -> str:
    parts: list[str | bytes] = []
    for name in files:
        path = REPO / name
        parts += [name, oct(path.stat().st_mode & 0o111), path.read_bytes()]
    return plan.digest(*parts)


# -- the image --------------------------------------------------------------------------------------------------------


def _ensure_image(
    image: spec.Image, *, root: Path, cache: Path, debian: DebianState, recipe: str, progress: Progress
) -> BuiltImage:
    lock_text = (LOCKS / image.lock).read_text()
    pip_text = (LOCKS / lock.PIP_LOCK).read_text()
    vigil_files = _source_files(VIGIL_SOURCES)
    testapps_files = _source_files(TESTAPPS_SOURCES) if image.testapps else []
    vigil_digest = _sources_digest(vigil_files)
    testapps_digest = _sources_digest(testapps_files) if testapps_files else ""
    base_key = plan.digest(recipe, repr(image.base), *debian.in_release)
    jars = _report_jars(cache, progress) if image.jars else []
    jar_digests = [f"{j.name}:{_sha256(j)}" for j in jars]
    key = plan.digest(base_key, repr(image), VERSION, lock_text, pip_text, vigil_digest, testapps_digest, *jar_digests)
    out = root / "out" / image.name
    stem = f"{image.repository}-{VERSION}"
    built = _cached_output(image, out, stem, key)
    if built is not None:
        progress(f"images: {built.ref} cached ({built.digest[:19]}, {built.compressed_bytes / 1e6:.1f} MB)")
        return built
    started = time.monotonic()
    base_dir = _ensure_base(image.base, base_key, root=root, debian=debian, progress=progress)
    layer = _ensure_app_layer(
        image,
        key,
        root=root,
        cache=cache,
        base_dir=base_dir,
        epoch=debian.epoch,
        wheels=(lock_text, pip_text, vigil_files, vigil_digest, testapps_files, testapps_digest),
        jars=jars,
        progress=progress,
    )
    return _assemble(
        image,
        key,
        base_dir=base_dir,
        layer=layer,
        out=out,
        stem=stem,
        debian=debian,
        started=started,
        progress=progress,
    )


def _cached_output(image: spec.Image, out: Path, stem: str, key: str) -> BuiltImage | None:
    manifest = out / "manifest.json"
    try:
        data = json.loads(manifest.read_text())
    except (OSError, ValueError):
        return None
    built = _built(image, out, stem, data)
    if data.get("key") != key or not (built.oci_archive.exists() and built.docker_archive.exists()):
        return None
    return built


def _built(image: spec.Image, out: Path, stem: str, data: dict[str, object]) -> BuiltImage:
    return BuiltImage(
        name=image.name,
        ref=spec.ref(image, VERSION),
        docker_archive=out / f"{stem}.docker.tar",
        oci_archive=out / f"{stem}.oci.tar",
        digest=str(data.get("digest", "")),
        compressed_bytes=int(str(data.get("compressed_bytes", 0))),
        uncompressed_bytes=int(str(data.get("uncompressed_bytes", 0))),
        dpkg_list=out / "dpkg.txt",
        manifest=out / "manifest.json",
    )


# -- base ---------------------------------------------------------------------------------------------------------


def _ensure_base(base: spec.Base, key: str, *, root: Path, debian: DebianState, progress: Progress) -> Path:
    final = root / "base" / f"{base.name}-{key[:16]}"
    if (final / "layer.tar").exists():
        return final
    work = final.with_name(final.name + ".partial")
    _rmtree(work)
    work.mkdir(parents=True)
    rootfs = work / "rootfs"
    progress(f"images: base {base.name}: mmdebstrap {spec.SUITE} + {' '.join(base.packages)} (a minute or two) ...")
    started = time.monotonic()
    log = work / "mmdebstrap.log"
    argv = plan.mmdebstrap_argv(base, str(rootfs), debian.sources)
    env = plan.clean_env(debian.epoch) | {k: v for k, v in os.environ.items() if k.lower().endswith("_proxy")}
    with log.open("w") as sink:
        done = subprocess.run(argv, env=env, stdout=sink, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise ImageBuildError(f"images: mmdebstrap failed for base {base.name}: {_last_error(log)} (log: {log})")
    if not base.keeps_shell:
        dropped = _prune_to_runtime(rootfs, base)
        progress(f"images: base {base.name}: {len(dropped)} packages outside the runtime dropped")
    dpkg = subprocess.run(plan.dpkg_list_argv(str(rootfs)), capture_output=True, text=True, check=False)
    if dpkg.returncode != 0:
        raise ImageBuildError(f"images: dpkg-query failed in base {base.name}: {dpkg.stderr.strip()[:200]}")
    (work / "dpkg.txt").write_text(dpkg.stdout)
    cacerts = rootfs / plan.JAVA_CACERTS
    if cacerts.exists():
        try:
            cacerts.write_bytes(plan.normalize_jks(cacerts.read_bytes(), debian.epoch))
        except ValueError as exc:
            raise ImageBuildError(f"images: base {base.name}: {cacerts}: {exc}") from exc
    _run(plan.tar_argv(str(rootfs), str(work / "layer.tar"), debian.epoch, exclude=plan.BASE_EXCLUDES), "tar (base)")
    (work / "epoch").write_text(f"{debian.epoch}\n")
    _rmtree(rootfs)
    _rmtree(final)
    work.rename(final)
    _prune(final)
    size = (final / "layer.tar").stat().st_size
    progress(f"images: base {base.name}: {size / 1e6:.0f} MB in {time.monotonic() - started:.0f}s")
    return final


def _prune_to_runtime(rootfs: Path, base: spec.Base) -> list[str]:
    """Remove the files of every package outside the base's runtime closure (plan.prunable) and their dpkg records,
    then plan.RUNTIME_UNUSED. Done from the host, as dpkg cannot: it needs the coreutils it would remove."""
    info = rootfs / "var/lib/dpkg/info"
    status_file = rootfs / "var/lib/dpkg/status"
    status = status_file.read_text()
    dropped = plan.prunable(status, base)
    kept = set(plan.installed_packages(status)) - set(dropped)

    def records(pkg: str) -> list[Path]:
        return sorted({*info.glob(f"{pkg}.*"), *info.glob(f"{pkg}:*.*")})

    def listed(pkg: str) -> set[str]:
        return {line for r in records(pkg) if r.suffix == ".list" for line in r.read_text().splitlines() if line}

    still_owned = set().union(*(listed(pkg) for pkg in kept))
    root = rootfs.resolve()
    for pkg in dropped:
        for name in sorted(listed(pkg) - still_owned):
            path = Path(os.path.realpath(rootfs / name.lstrip("/").rsplit("/", 1)[0])) / name.rsplit("/", 1)[-1]
            if not path.is_relative_to(root):
                raise ImageBuildError(f"images: base {base.name}: {pkg} lists {name}, which leads out of the rootfs")
            if path.is_symlink() or path.is_file():
                path.unlink()
        for record in records(pkg):
            record.unlink()
    for relative in plan.RUNTIME_UNUSED:
        shutil.rmtree(rootfs / relative, ignore_errors=True)
    for directory in ("usr/bin", "usr/sbin", "etc/alternatives"):  # links to what was removed
        for link in sorted((rootfs / directory).iterdir()):
            if link.is_symlink() and _dangling(link, root):
                link.unlink()
    status_file.write_text(plan.status_without(status, dropped))
    return dropped


def _dangling(link: Path, root: Path) -> bool:
    """Whether a symlink in the rootfs `root` leads nowhere, its absolute targets read inside the rootfs (never on
    the build host)."""
    for _ in range(16):
        target = os.readlink(link)
        link = root / target.lstrip("/") if target.startswith("/") else link.parent / target
        if not link.is_symlink():
            return not link.exists()
    return True


def _last_error(log: Path) -> str:
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("E:", "mmdebstrap: error", "dpkg: error"))]
    return ((errors or lines or ["no output"])[-1])[:300]


# -- wheelhouse ----------------------------------------------------------------------------------------------------


def _host_pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _HOST_PIP_DROPPED}
    env.setdefault("PIP_CACHE_DIR", str(paths.cache_dir() / "pip"))
    return env


def _locked_wheels(pins: Sequence[lock.Pin], cache: Path, progress: Progress) -> dict[str, Path]:
    """One wheel per pin, downloaded with `--require-hashes` (sdists verified, then built to a wheel here)."""
    home = cache / "wheels" / "pypi"
    found: dict[str, Path] = {}
    missing = []
    for pin in pins:
        wheel = _only_wheel(home / f"{pin.name}-{pin.version}-{pin.hashes[0][:16]}")
        if wheel is None:
            missing.append(pin)
        else:
            found[pin.name] = wheel
    if not missing:
        return found
    progress(f"images: wheelhouse: {len(missing)} locked distribution(s) to fetch and verify ...")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="vigil-wheels-", dir=_mkdir(cache / "tmp")) as tmp:
        req = Path(tmp) / "requirements.txt"
        req.write_text("".join(pin.line() + "\n" for pin in missing))
        staging = Path(tmp) / "out"
        argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--require-hashes", "--disable-pip-version-check",
                "--progress-bar=off", "-q", "-r", str(req), "-w", str(staging)]  # fmt: skip
        done = subprocess.run(argv, env=_host_pip_env(), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            reason = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
            raise ImageBuildError(f"images: pip could not fetch the locked wheels: {reason}")
        by_name = {_wheel_name(w): w for w in staging.glob("*.whl")}
        for pin in missing:
            wheel = by_name.get(pin.name)
            if wheel is None:
                raise ImageBuildError(f"images: pip produced no wheel for {pin.name}=={pin.version}")
            target = _mkdir(home / f"{pin.name}-{pin.version}-{pin.hashes[0][:16]}")
            shutil.move(str(wheel), target / wheel.name)
            found[pin.name] = target / wheel.name
    progress(f"images: wheelhouse: {len(missing)} fetched in {time.monotonic() - started:.0f}s")
    return found


def _local_wheel(
    dist: str, project: str, *, files: Sequence[str], digest: str, cache: Path, progress: Progress
) -> Path:
    """`dist` built from the working tree's `files` (copied out: the build never sees ignored or stray files)."""
    home = cache / "wheels" / "local" / f"{dist}-{digest[:16]}"
    wheel = _only_wheel(home)
    if wheel is not None:
        return wheel
    progress(f"images: building the {dist} wheel from the working tree ...")
    with tempfile.TemporaryDirectory(prefix="vigil-src-", dir=_mkdir(cache / "tmp")) as tmp:
        for name in files:
            target = Path(tmp) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, target)
        staging = Path(tmp) / "wheel-out"
        argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-q",
                "-w", str(staging), str(Path(tmp) / project)]  # fmt: skip
        done = subprocess.run(argv, env=_host_pip_env(), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            reason = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
            raise ImageBuildError(f"images: could not build the {dist} wheel: {reason}")
        built = list(staging.glob("*.whl"))
        if len(built) != 1:
            raise ImageBuildError(f"images: building {dist} gave {len(built)} wheels, expected one")
        _rmtree(home)
        _mkdir(home)
        shutil.move(str(built[0]), home / built[0].name)
    return home / built[0].name


def _only_wheel(directory: Path) -> Path | None:
    wheels = list(directory.glob("*.whl")) if directory.is_dir() else []
    return wheels[0] if len(wheels) == 1 else None


def _wheel_name(wheel: Path) -> str:
    return canonicalize_name(wheel.name.split("-", 1)[0])


def _wheel_version(wheel: Path) -> str:
    return wheel.name.split("-")[1]


def _report_jars(cache: Path, progress: Progress) -> list[Path]:
    """Spark's Kafka source (the Maven resolution `make setup` uses) and vigil's byte readers (`vigil_spark.jvm`,
    the report's own build step), both for the pyspark this venv has, which must be the report lock's."""
    from vigil_dev.spark import install as spark_install  # noqa: PLC0415 - only the report image needs Maven
    from vigil_spark import jvm  # noqa: PLC0415

    locked = lock.parse((LOCKS / "report.lock").read_text()).get("pyspark")
    installed, _ = jvm.pyspark_jars()
    if locked is None or locked.version != installed:
        raise ImageBuildError(f"images: report.lock pins pyspark {locked and locked.version} but this venv has "
                              f"{installed}: the jars must match the image's pyspark (make setup)")  # fmt: skip
    connector = spark_install.ensure_spark_kafka(progress)
    try:
        readers = jvm.build(cache / "readers", progress)
    except jvm.BuildError as exc:
        raise ImageBuildError(f"images: {exc}") from exc
    return [*sorted(j for j in connector.glob("*.jar") if not j.name.startswith(jvm.PREFIX)), readers]


# -- app layer -------------------------------------------------------------------------------------------------------


def _ensure_app_layer(
    image: spec.Image,
    key: str,
    *,
    root: Path,
    cache: Path,
    base_dir: Path,
    epoch: int,
    wheels: tuple[str, str, list[str], str, list[str], str],
    jars: Sequence[Path],
    progress: Progress,
) -> Path:
    final = root / "layer" / f"{image.name}-{key[:16]}" / "layer.tar"
    if final.exists():
        return final
    lock_text, pip_text, vigil_files, vigil_digest, testapps_files, testapps_digest = wheels
    pins = list(lock.parse(lock_text).values())
    locked = _locked_wheels(pins, cache, progress)
    (pip_pin,) = lock.parse(pip_text).values()
    pip_wheel = _locked_wheels([pip_pin], cache, progress)[pip_pin.name]
    local = [_local_wheel("kafka-vigil", ".", files=vigil_files, digest=vigil_digest, cache=cache, progress=progress)]
    if image.testapps:
        local.append(
            _local_wheel(
                "vigil-testapps",
                "dev/testapps",
                files=testapps_files,
                digest=testapps_digest,
                cache=cache,
                progress=progress,
            )
        )
    progress(f"images: {image.name}: installing {image.requirement} offline into {spec.VENV} ...")
    started = time.monotonic()
    with _scratch(root / "tmp" / image.name) as rootfs:
        _run(["tar", "-C", str(rootfs), "--numeric-owner", "-xpf", str(base_dir / "layer.tar")], "tar -x (base)")
        wh = _mkdir(rootfs / "wh")
        for wheel in [*locked.values(), pip_wheel, *local]:
            shutil.copy2(wheel, wh / wheel.name)
        requirement = [(str(_wheel_name(w)), _wheel_version(w), _sha256(w)) for w in locked.values()]
        requirement.append((image.requirement, _wheel_version(local[0]), _sha256(local[0])))
        if image.testapps:
            requirement.append(("vigil-testapps", _wheel_version(local[1]), _sha256(local[1])))
        (wh / "install.txt").write_text(plan.install_requirements(requirement))
        _run(plan.venv_argv(str(rootfs), epoch), "python3 -m venv (chroot)")
        _run(plan.pip_install_argv(str(rootfs), epoch, pip_wheel.name, "install.txt"), "pip install (chroot)")
        for script in (rootfs / spec.VENV.lstrip("/") / "bin").glob("[Aa]ctivate*"):
            script.unlink()  # nobody activates a venv in a container; the shell-less images could not run them
        if jars:
            jars_dir = _mkdir(rootfs / spec.JARS_DIR.lstrip("/"))
            for jar in jars:
                shutil.copyfile(jar, jars_dir / jar.name)
                (jars_dir / jar.name).chmod(0o644)
        _run(plan.compile_argv(str(rootfs), epoch), "compileall (chroot)")
        _mkdir(final.parent)
        partial = final.with_suffix(".partial")
        _run(plan.tar_argv(str(rootfs), str(partial), epoch, members=[f".{spec.VENV}"]), "tar (app)")
        partial.rename(final)
    _prune(final.parent)
    progress(f"images: {image.name}: {final.stat().st_size / 1e6:.0f} MB venv in {time.monotonic() - started:.0f}s")
    return final


# -- assembly --------------------------------------------------------------------------------------------------------


def _assemble(
    image: spec.Image,
    key: str,
    *,
    base_dir: Path,
    layer: Path,
    out: Path,
    stem: str,
    debian: DebianState,
    started: float,
    progress: Progress,
) -> BuiltImage:
    progress(f"images: {image.name}: packing (umoci, gzip) and exporting (skopeo) ...")
    with _scratch(out.parent.parent / "tmp" / f"{image.name}-oci") as tmp:
        layout = str(tmp / "oci")
        installed = f"pip install --no-index --require-hashes {image.requirement} -> {spec.VENV}"
        layers = [(str(base_dir / "layer.tar"), plan.layer_description(image.base)), (str(layer), installed)]
        for argv in plan.umoci_argvs(image, layout, layers, debian.epoch, VERSION):
            _run(argv, argv[1])
        digest, compressed = _layout_digest(Path(layout), VERSION)
        _rmtree(out)
        _mkdir(out)
        built = _built(image, out, stem, {})
        for argv in plan.skopeo_argvs(
            image, layout, oci_archive=str(built.oci_archive), docker_archive=str(built.docker_archive), version=VERSION
        ):
            _run(argv, "skopeo copy")
    uncompressed = (base_dir / "layer.tar").stat().st_size + layer.stat().st_size
    shutil.copyfile(base_dir / "dpkg.txt", out / "dpkg.txt")
    data = {
        "image": image.name,
        "ref": spec.ref(image, VERSION),
        "digest": digest,
        "compressed_bytes": compressed,
        "uncompressed_bytes": uncompressed,
        "source_date_epoch": debian.epoch,
        "created": plan.iso(debian.epoch),
        "debian": {
            s.in_release_url: hashlib.sha256(t.encode()).hexdigest()
            for s, t in zip(debian.sources, debian.in_release, strict=True)
        },
        "lock": image.lock,
        "key": key,
    }
    (out / "manifest.json").write_text(json.dumps(data, indent=2) + "\n")
    built = _built(image, out, stem, data)
    progress(f"images: {built.ref} built in {time.monotonic() - started:.0f}s: {digest[:19]}, "
             f"{compressed / 1e6:.1f} MB compressed, {uncompressed / 1e6:.1f} MB uncompressed")  # fmt: skip
    return built


def _layout_digest(layout: Path, tag: str) -> tuple[str, int]:
    """The manifest digest of `tag` in an OCI layout and the compressed size (config + layers)."""
    index = json.loads((layout / "index.json").read_text())
    for entry in index.get("manifests", []):
        if entry.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag:
            algo, hexdigest = entry["digest"].split(":", 1)
            manifest = json.loads((layout / "blobs" / algo / hexdigest).read_text())
            size = sum(int(layer["size"]) for layer in manifest["layers"]) + int(manifest["config"]["size"])
            return str(entry["digest"]), size
    raise ImageBuildError(f"images: umoci wrote no tag {tag} in {layout}")


# -- helpers ---------------------------------------------------------------------------------------------------------


def _run(argv: Sequence[str], what: str) -> None:
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False, umask=0o022)
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["no output"])[-1][:300]
        raise ImageBuildError(f"images: {what} failed: {reason}")


@contextlib.contextmanager
def _scratch(path: Path) -> Iterator[Path]:
    _rmtree(path)
    path.mkdir(parents=True)
    try:
        yield path
    finally:
        _rmtree(path)


def _prune(current: Path) -> None:
    """Drop the older builds beside `current` (`<name>-<key>`): a Debian update or a change makes a new one, and
    bases and layers are 90-700 MB each."""
    name = current.name.rsplit("-", 1)[0]
    for sibling in current.parent.glob(f"{name}-*"):
        if sibling != current and sibling.name.rsplit("-", 1)[0] == name:
            _rmtree(sibling)


def _rmtree(path: Path) -> None:
    """Remove a build directory, never through a mount: an interrupted mmdebstrap may leave the host's /proc, /sys
    or /dev mounted in its rootfs, and deleting through those would delete host files."""
    if not path.exists():
        return
    for mount in mounts_below(path):
        subprocess.run(["umount", "--recursive", "--lazy", mount], capture_output=True, check=False)
    left = mounts_below(path)
    if left:
        raise ImageBuildError(f"images: {left[0]} is still mounted: unmount it, then remove {path}")
    shutil.rmtree(path, ignore_errors=True)


def mounts_below(path: Path) -> list[str]:
    """Mount points under `path`, deepest first (from /proc/self/mountinfo; octal escapes decoded)."""
    root = str(path.resolve())
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])
        if point == root or point.startswith(root + "/"):
            points.append(point)
    return sorted(points, key=len, reverse=True)


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
