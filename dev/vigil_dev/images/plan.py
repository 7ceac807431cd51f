"""What a build runs, decided without running it: cache keys, the epoch, and every argv (mmdebstrap, chroot, tar,
umoci, skopeo). Pure: `build.py` executes these; `tests/unit/dev/test_images.py` reads them.

Reproducibility comes from here:
- SOURCE_DATE_EPOCH is fixed by the inputs: the newest `Date:` of the Debian suites' InRelease files the base is
  built from (never the wall clock, never a git commit time: an unchanged tree gives the same image after any
  commit). Every tar mtime is clamped to it, and it is the image's `created` and each layer's history date.
- tar: names sorted, owners numeric, atime/ctime dropped, PAX headers named without the pid.
- pycs: compiled once, after pip (`--no-compile`), with `compileall --invalidation-mode unchecked-hash` and
  PYTHONHASHSEED=0: no source mtime inside, no set ordering that moves between runs. Unchecked, not checked-hash
  (what pip's own compile would produce, as py_compile defaults to checked-hash when SOURCE_DATE_EPOCH is set):
  the image is immutable, so nothing is gained by hashing every source again at each import.
- The chroot runs with `env -i`: no host PIP_*, proxy or CA settings reach pip inside, and it never goes online
  (`--no-index`, a local wheelhouse, `--require-hashes`).
"""

import hashlib
import re
import shlex
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from vigil_dev.images import spec

DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SECURITY_MIRROR = "http://deb.debian.org/debian-security"
#: dpkg path filters: no man pages, docs (copyright files stay: the licences), info pages or translations.
DPKG_EXCLUDES = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/lintian/*",
)
#: Purged from shell-less bases after every maintainer script has run (they were only needed for those).
SHELL_PACKAGES = ("bash", "perl-base", "debconf")
#: What a shell-less base keeps besides its packages' runtime closure: the files the system is described by
#: (/etc/passwd's base, os-release) and dpkg, whose status file is what image scanners read.
RUNTIME_ROOTS = ("base-files", "base-passwd", "dpkg")
#: Paths a shell-less base drops although a kept package ships them: glibc's iconv modules (CPython has its own
#: codecs and never calls iconv), Python's `help()` topics. Relative to the rootfs.
RUNTIME_UNUSED = ("usr/lib/x86_64-linux-gnu/gconv", "usr/lib/python3.11/pydoc_data")
CHROOT_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
#: The image's /etc/hosts when nothing mounts one (Kubernetes does): loopback names only.
HOSTS = "127.0.0.1\\tlocalhost\\n::1\\tlocalhost ip6-localhost ip6-loopback\\n"


@dataclass(frozen=True)
class Suite:
    """One apt source: its InRelease file fixes what the base is built from."""

    mirror: str
    suite: str

    @property
    def in_release_url(self) -> str:
        return f"{self.mirror}/dists/{self.suite}/InRelease"

    @property
    def source_line(self) -> str:
        return f"deb {self.mirror} {self.suite} main"


def suites(mirror: str = DEFAULT_MIRROR, security: str = DEFAULT_SECURITY_MIRROR) -> tuple[Suite, ...]:
    """The release, its stable updates and its security updates: an image users run gets Debian's fixes."""
    return (
        Suite(mirror, spec.SUITE),
        Suite(mirror, f"{spec.SUITE}-updates"),
        Suite(security, f"{spec.SUITE}-security"),
    )


def digest(*parts: str | bytes) -> str:
    """A cache key: sha256 over length-prefixed parts (so `("ab", "c")` and `("a", "bc")` differ)."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()


def release_epoch(in_release: Iterable[str]) -> int:
    """SOURCE_DATE_EPOCH: the newest `Date:` among the suites' InRelease files."""
    dates = []
    for text in in_release:
        match = re.search(r"^Date: (.+)$", text, re.MULTILINE)
        if match is None:
            raise ValueError("an InRelease file without a Date: field")
        dates.append(int(parsedate_to_datetime(match.group(1)).timestamp()))
    if not dates:
        raise ValueError("no InRelease file")
    return max(dates)


def iso(epoch: int) -> str:
    """RFC 3339 in UTC, as OCI's `created` wants it."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def clean_env(epoch: int, **extra: str) -> dict[str, str]:
    """The whole environment of every command that shapes an image's bytes (host variables never leak in)."""
    return {
        "PATH": CHROOT_PATH,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "SOURCE_DATE_EPOCH": str(epoch),
        "PYTHONHASHSEED": "0",
        **extra,
    }


def _env_argv(env: dict[str, str]) -> list[str]:
    return ["env", "-i", *(f"{k}={v}" for k, v in env.items())]


def base_hooks(base: spec.Base) -> list[str]:
    """mmdebstrap --customize-hook commands (host shell, `$1` the rootfs): the vigil user, then the shell purge."""
    user = f"{spec.USER}:x:{spec.UID}:{spec.UID}:{spec.USER}:/home/{spec.USER}:/usr/sbin/nologin"
    hooks = [
        f'echo {shlex.quote(user)} >> "$1/etc/passwd"',
        f'echo {shlex.quote(f"{spec.USER}:x:{spec.UID}:")} >> "$1/etc/group"',
        f'echo {shlex.quote(f"{spec.USER}:!:1::::::")} >> "$1/etc/shadow"',
        f'mkdir -p "$1/home/{spec.USER}" && chown {spec.UID}:{spec.UID} "$1/home/{spec.USER}"',
    ]
    if not base.keeps_shell:
        purge = "dpkg --purge --force-remove-essential --force-depends"
        hooks += [
            f'chroot "$1" {purge} {" ".join(SHELL_PACKAGES)}',
            # dash last: its postrm is a /bin/sh script that does nothing on removal (it only handles downgrades),
            # and with dash gone there is no /bin/sh to run it; the debianutils trigger (update-shells) likewise
            'rm -f "$1/var/lib/dpkg/info/dash.postrm"',
            f'chroot "$1" {purge} --no-triggers dash',
        ]
    hooks += [
        'rm -rf "$1/var/cache/debconf" "$1/var/log/"*.log "$1/var/lib/dpkg/"*-old',
        # mmdebstrap copies the build host's resolv.conf and hostname in (its resolver's address, its name) and
        # leaves them: the image would differ per build host. The runtime provides all three (kubelet mounts them).
        'rm -f "$1/etc/resolv.conf"',
        'echo localhost > "$1/etc/hostname" && chmod 644 "$1/etc/hostname"',
        f'printf {shlex.quote(HOSTS)} > "$1/etc/hosts" && chmod 644 "$1/etc/hosts"',
    ]
    return hooks


def mmdebstrap_argv(base: spec.Base, target: str, sources: Sequence[Suite]) -> list[str]:
    """The base rootfs into directory `target` (root mode: this runs as root; no user namespaces needed).

    merged-usr hook: otherwise apt picks `usrmerge` and with it perl (189 MB instead of 141 MB, measured). The
    essential hook creates man1 because openjdk's postinst registers man pages with update-alternatives, which fails
    when the dpkg filter dropped the directory.
    """
    return [
        "mmdebstrap",
        "--mode=root",
        "--variant=essential",
        f"--include={','.join(base.packages)}",
        "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
        *(f"--dpkgopt={opt}" for opt in DPKG_EXCLUDES),
        '--essential-hook=mkdir -p "$1/usr/share/man/man1"',
        *(f"--customize-hook={hook}" for hook in base_hooks(base)),
        spec.SUITE,
        target,
        *(s.source_line for s in sources),
    ]


def dpkg_list_argv(rootfs: str) -> list[str]:
    """The installed packages and versions (Debian cannot be pinned by date here: this list is the record)."""
    return ["chroot", rootfs, "dpkg-query", "-W", "-f=${Package}\t${Version}\t${db:Status-Abbrev}\n"]


def tar_argv(
    root: str, out: str, epoch: int, members: Sequence[str] = (".",), exclude: Sequence[str] = ()
) -> list[str]:
    """A deterministic layer tar of `members` (relative to `root`)."""
    return [
        "tar",
        "-C",
        root,
        "--sort=name",
        f"--mtime=@{epoch}",
        "--clamp-mtime",
        "--numeric-owner",
        "--format=posix",
        "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime",
        *(f"--exclude={pattern}" for pattern in exclude),
        "-cf",
        out,
        *members,
    ]


#: What the base layer never holds: the kernel's and the runtime's mount points' contents, the wheelhouse, and apt's
#: directories (no apt in the essential variant; mmdebstrap recreates them after every hook, `partial/` owned by
#: _apt or root depending on whether _apt could reach the build directory: two caches, two digests otherwise).
BASE_EXCLUDES = (
    "./dev/*",
    "./proc/*",
    "./sys/*",
    "./run/*",
    "./tmp/*",
    "./wh",
    f".{spec.VENV}",
    "./var/lib/apt",
    "./var/cache/apt",
)


def venv_argv(rootfs: str, epoch: int) -> list[str]:
    """A venv without pip: `--without-pip` skips ensurepip, so pip never lands in the image."""
    return [
        *_env_argv(clean_env(epoch)),  # the host's env: a shell-less base has none (no coreutils)
        "chroot",
        rootfs,
        "/usr/bin/python3",
        "-m",
        "venv",
        "--without-pip",
        spec.VENV,
    ]


def pip_install_argv(rootfs: str, epoch: int, pip_wheel: str, requirements: str) -> list[str]:
    """pip run from its wheel (zipimport) by the venv's python: installs into the venv, offline, hashes required."""
    return [
        *_env_argv(clean_env(epoch, HOME="/nonexistent")),
        "chroot",
        rootfs,
        f"{spec.VENV}/bin/python",
        f"/wh/{pip_wheel}/pip",
        "install",
        "--no-index",
        "--find-links=/wh",
        "--require-hashes",
        "--no-compile",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "--no-warn-script-location",
        "--quiet",
        "-r",
        f"/wh/{requirements}",
    ]


def compile_argv(rootfs: str, epoch: int) -> list[str]:
    return [
        *_env_argv(clean_env(epoch)),
        "chroot",
        rootfs,
        f"{spec.VENV}/bin/python",
        "-m",
        "compileall",
        "-q",
        "--invalidation-mode=unchecked-hash",
        f"{spec.VENV}/lib",
    ]


def install_requirements(pins: Sequence[tuple[str, str, str]]) -> str:
    """The chroot's requirements file: each (name, version, sha256 of the wheel in the wheelhouse). The hashes are
    of the wheels actually installed (an sdist's locked hash was checked when its wheel was built)."""
    return "".join(f"{name}=={version} --hash=sha256:{sha}\n" for name, version, sha in sorted(pins))


def umoci_argvs(
    image: spec.Image, layout: str, layers: Sequence[tuple[str, str]], epoch: int, version: str
) -> list[list[str]]:
    """Assemble the OCI image in `layout` from uncompressed layer tars [(path, created_by)], then its config.

    `umoci new` stamps the wall clock; `config --created` and `--history.created` replace every such date.
    """
    created = iso(epoch)
    target = f"{layout}:{version}"
    argvs = [["umoci", "init", "--layout", layout], ["umoci", "new", "--image", target]]
    for path, created_by in layers:
        argvs.append(
            [
                "umoci",
                "raw",
                "add-layer",
                "--image",
                target,
                f"--history.created={created}",
                f"--history.created_by={created_by}",
                path,
            ]
        )
    config = [
        "umoci",
        "config",
        "--image",
        target,
        "--no-history",
        f"--created={created}",
        f"--config.user={spec.UID}:{spec.UID}",
        f"--config.workingdir={image.workdir}",
        *(f"--config.entrypoint={part}" for part in image.entrypoint),
        *(f"--config.cmd={part}" for part in image.cmd),
        *(f"--config.env={k}={v}" for k, v in spec.environment(image)),
        *(f"--config.exposedports={port}/tcp" for port in image.ports),
        f"--config.label=org.opencontainers.image.title={image.repository}",
        f"--config.label=org.opencontainers.image.version={version}",
        f"--config.label=org.opencontainers.image.description={image.description}",
        "--config.label=org.opencontainers.image.licenses=Apache-2.0",
    ]
    argvs += [config, ["umoci", "gc", "--layout", layout]]
    return argvs


def skopeo_argvs(
    image: spec.Image, layout: str, oci_archive: str, docker_archive: str, version: str
) -> list[list[str]]:
    """The two archives. The OCI archive's ref is the bare tag (`ctr import --base-name` finds nothing otherwise);
    the docker archive is tagged `repository:version` (ctr names it `docker.io/library/<that>`)."""
    copy = ["skopeo", "--insecure-policy", "copy", "--quiet"]
    return [
        [*copy, f"oci:{layout}:{version}", f"oci-archive:{oci_archive}:{version}"],
        [*copy, f"oci:{layout}:{version}", f"docker-archive:{docker_archive}:{spec.ref(image, version)}"],
    ]


def layer_description(base: spec.Base) -> str:
    return f"mmdebstrap {spec.SUITE} essential + {' '.join(base.packages)}" + ("" if base.keeps_shell else " - shells")


#: The JRE's CA keystore (ca-certificates-java writes it in JKS format, password "changeit", from the system CAs).
JAVA_CACERTS = "etc/ssl/certs/java/cacerts"
#: Debian's keystore password: public, it only guards the file's integrity digest.
JAVA_STOREPASS = "changeit"
_JKS_MAGIC = 0xFEEDFEED
_JKS_TRUSTED_CERT = 2


def normalize_jks(data: bytes, epoch: int, password: str = JAVA_STOREPASS) -> bytes:
    """The same keystore with every entry's creation date set to `epoch` and its integrity digest recomputed.

    ca-certificates-java stamps each entry with the wall clock when it builds the keystore, the one file that made
    two report bases differ. JKS has no salt: the trailing SHA-1 over (password as UTF-16BE, "Mighty Aphrodite",
    the body) is all there is to redo. Only trusted-certificate entries are expected (ValueError otherwise).
    """
    magic, version, count = struct.unpack_from(">III", data, 0)
    if magic != _JKS_MAGIC or version != 2:
        raise ValueError("not a JKS keystore (version 2)")
    out = bytearray(data[:12])
    pos = 12
    for _ in range(count):
        (tag,) = struct.unpack_from(">I", data, pos)
        if tag != _JKS_TRUSTED_CERT:
            raise ValueError(f"JKS entry of type {tag}: only trusted certificates are expected")
        (alias_len,) = struct.unpack_from(">H", data, pos + 4)
        stamp = pos + 6 + alias_len
        (type_len,) = struct.unpack_from(">H", data, stamp + 8)
        (cert_len,) = struct.unpack_from(">I", data, stamp + 10 + type_len)
        end = stamp + 14 + type_len + cert_len
        out += data[pos:stamp] + struct.pack(">Q", epoch * 1000) + data[stamp + 8 : end]
        pos = end
    if len(data) - pos != 20:
        raise ValueError("JKS keystore: unexpected bytes after the entries")
    digest = hashlib.sha1(password.encode("utf-16-be") + b"Mighty Aphrodite" + bytes(out))  # noqa: S324 - JKS's own
    return bytes(out) + digest.digest()


# -- the runtime closure of a shell-less base ------------------------------------------------------------------


@dataclass(frozen=True)
class Installed:
    """One installed package of a dpkg status file."""

    name: str
    depends: tuple[tuple[str, ...], ...]
    """Depends and Pre-Depends: each a list of alternatives (names only; versions and architectures dropped)."""
    provides: tuple[str, ...]
    stanza: str


def installed_packages(status: str) -> dict[str, Installed]:
    """The installed packages of a dpkg status file, by name."""
    out: dict[str, Installed] = {}
    for stanza in status.strip("\n").split("\n\n"):
        fields: dict[str, str] = {}
        key = ""
        for line in stanza.splitlines():
            if line.startswith((" ", "\t")) and key:
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if "Package" not in fields or fields.get("Status", "").rsplit(" ", 1)[-1] in _ABSENT:
            continue
        relations = ",".join(fields.get(f, "") for f in ("Pre-Depends", "Depends"))
        depends = tuple(
            names for alternatives in relations.split(",") if (names := tuple(_names(alternatives.split("|"))))
        )
        provides = tuple(_names(fields.get("Provides", "").split(",")))
        out[fields["Package"]] = Installed(fields["Package"], depends, provides, stanza)
    return out


_ABSENT = {"not-installed", "config-files", ""}
"""dpkg states whose files are not there; any other (installed, triggers-pending, ...) has them."""


def _names(relations: Iterable[str]) -> Iterator[str]:
    for relation in relations:
        name = re.split(r"[\s(:]", relation.strip(), maxsplit=1)[0]
        if name:
            yield name


def runtime_closure(packages: dict[str, Installed], roots: Iterable[str]) -> set[str]:
    """`roots` and every package they need to run (Depends, Pre-Depends; an alternative or a virtual package by the
    first installed package that satisfies it)."""
    providers: dict[str, str] = {}
    for pkg in sorted(packages):
        for virtual in packages[pkg].provides:
            providers.setdefault(virtual, pkg)
    keep: set[str] = set()
    todo = [r for r in roots if r in packages]
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.add(name)
        for alternatives in packages[name].depends:
            found = next((a if a in packages else providers[a] for a in alternatives if a in packages or a in
                          providers), None)  # fmt: skip
            if found is not None:
                todo.append(found)
    return keep


def prunable(status: str, base: spec.Base) -> list[str]:
    """The packages a shell-less base drops: every installed one outside its packages' runtime closure (the
    Essential set — coreutils, util-linux, login, PAM, ... — only ran the installation)."""
    packages = installed_packages(status)
    return sorted(set(packages) - runtime_closure(packages, (*base.packages, *RUNTIME_ROOTS)))


def status_without(status: str, dropped: Iterable[str]) -> str:
    """The dpkg status file with the `dropped` packages' stanzas removed (what scanners then read is what is there)."""
    gone = set(dropped)
    stanzas = [s for s in status.strip("\n").split("\n\n") if installed_packages(s).keys().isdisjoint(gone)]
    return "\n\n".join(stanzas) + "\n"
