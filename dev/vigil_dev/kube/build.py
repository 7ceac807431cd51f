"""Build pinned etcd, kube-apiserver, kube-controller-manager, kubectl, helm and kubeconform from Go modules.

Why: this machine reaches no binary download site (no dl.k8s.io, no GitHub releases, no Docker), only
the Go module proxy. So each tool is compiled once from its published module into the vigil cache and
reused; a stamp file per tool makes the warm path a few file checks with no `go` process at all.

Run it alone with `python -m vigil_dev.kube.build`; `vigil dev up` and the `kube` fixture call
`ensure_kube_binaries` themselves.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from vigil_dev.errors import DevError
from vigil_dev.paths import cache_dir

# Pins. Each was checked against proxy.golang.org (see NOTES.md for the commands and what was refused).
K8S_VERSION = "v1.35.8"
"""Newest 1.35 patch the proxy serves with every staging module it requires (v1.35.9/v1.35.10: 403)."""
ETCD_VERSION = "v3.6.16"
"""etcd server; Kubernetes 1.35 itself pins the 3.6 client line. v3.6.17+ are refused by the proxy."""
HELM_VERSION = "v3.22.0"
"""Newest Helm 3 on the proxy (v3.22.1+ refused); Helm 3 because the charts target it."""
KUBECONFORM_VERSION = "v0.7.0"
GO_MIN = (1, 26)
"""etcd v3.6.16 and helm v3.22.0 declare `go 1.26.0`; k8s v1.35.8 needs 1.25."""
RECIPE = 1
"""Bump when build flags change: every stamp then mismatches and the tools are rebuilt."""
KUBE_RECIPE = 2
"""The Kubernetes binaries' own recipe (2: the node's kubelet, kube-proxy, kube-scheduler; the version file)."""

KUBE_TOOL = "kubernetes"
"""The cache directory of the Kubernetes binaries (`<cache>/kubernetes/<version>/bin`); `kube/` held an earlier
recipe's three binaries, and a checkout of that recipe still uses it, so the two never rebuild each other's."""
VERSION_FILE = "version.json"
"""What the kube binaries were stamped with (`-X ...version.<key>=<value>`), beside their stamp."""

K8S_BINARIES = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kubelet",
    "kube-proxy",
)
"""The control plane, the real node's agents (kubelet, kube-proxy) and kubectl: one `go build`, one cache."""
_HEARTBEAT_S = 60.0
_FALLBACK_GO = Path("/usr/local/go/bin/go")


class KubeBuildError(DevError):
    """A tool could not be built; the message is one line naming what failed and where the log is."""


@dataclass(frozen=True)
class _Tool:
    """One cached tool: where it lives, what it provides, and how to build it into a temp dir."""

    name: str
    version: str
    binaries: tuple[str, ...]
    build: Callable[[_Run, Path, Path], None]  # (run, tool_dir, tmp_bin)
    recipe: int = RECIPE

    def dir(self, root: Path) -> Path:
        return root / self.name / self.version

    def stamp(self) -> dict[str, object]:
        return {"recipe": self.recipe, "tool": self.name, "version": self.version, "binaries": list(self.binaries)}

    def is_built(self, root: Path) -> bool:
        """Warm check: the stamp matches the pins and every binary is an executable file."""
        try:
            recorded = json.loads((self.dir(root) / "stamp.json").read_text())
        except (OSError, ValueError):
            return False
        bin_dir = self.dir(root) / "bin"
        return recorded == self.stamp() and all(
            (bin_dir / b).is_file() and os.access(bin_dir / b, os.X_OK) for b in self.binaries
        )


@dataclass
class _Run:
    """State of one cold build: the progress sink, the go binary and environment, the current log."""

    progress: Callable[[str], None]
    go: str
    env: dict[str, str]
    start: float
    log: Path

    def say(self, message: str) -> None:
        self.progress(f"[{time.monotonic() - self.start:7.1f}s] {message}")


def ensure_kube_binaries(progress: Callable[[str], None]) -> dict[str, Path]:
    """Return {binary name: path} for every pinned tool, building only those not yet stamped in the cache."""
    root = cache_dir()
    tools = _tools()
    if all(t.is_built(root) for t in tools):
        return _paths(root, tools)
    start = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / "build.lock", progress):
        missing = [t for t in tools if not t.is_built(root)]  # another process may have built them meanwhile
        if missing:
            go = _find_go()
            env = _go_env(root)
            run = _Run(progress, go, env, start, root / "build.log")
            _check_disk(root)
            run.say(f"{_check_go(go, env)}; building {', '.join(f'{t.name} {t.version}' for t in missing)}")
            for tool in missing:
                _build_tool(run, root, tool)
            run.say(f"all built; cache {root}")
    return _paths(root, tools)


def stamped_version() -> dict[str, str]:
    """The version fields the cached kube binaries carry (what `/version` reports), as recorded at build time."""
    path = cache_dir() / KUBE_TOOL / K8S_VERSION / VERSION_FILE
    try:
        values = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise KubeBuildError(f"{path}: unreadable ({exc}); rebuild with python -m vigil_dev.kube.build") from exc
    return {str(k): str(v) for k, v in values.items()}


def _tools() -> list[_Tool]:
    return [
        _Tool(KUBE_TOOL, K8S_VERSION, K8S_BINARIES, _build_kube, KUBE_RECIPE),
        _Tool("etcd", ETCD_VERSION, ("etcd",), _build_etcd),
        _Tool("helm", HELM_VERSION, ("helm",), _build_helm),
        _Tool("kubeconform", KUBECONFORM_VERSION, ("kubeconform",), _build_kubeconform),
    ]


def _paths(root: Path, tools: Sequence[_Tool]) -> dict[str, Path]:
    return {b: t.dir(root) / "bin" / b for t in tools for b in t.binaries}


@contextmanager
def _locked(path: Path, progress: Callable[[str], None]) -> Iterator[None]:
    """Hold an exclusive lock so two processes never build into the same cache at once."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"waiting for another build holding {path}")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _build_tool(run: _Run, root: Path, tool: _Tool) -> None:
    """Build into a temp dir beside `bin/`, swap it in, then stamp: a killed build is never taken as done."""
    tool_dir = tool.dir(root)
    tool_dir.mkdir(parents=True, exist_ok=True)
    (tool_dir / "stamp.json").unlink(missing_ok=True)
    for stale in tool_dir.glob("bin.tmp-*"):  # left by a killed build; we hold the lock
        shutil.rmtree(stale, ignore_errors=True)
    run.log = tool_dir / "build.log"
    run.log.write_text(f"# {tool.name} {tool.version}, recipe {tool.recipe}, {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    began = time.monotonic()
    run.say(f"{tool.name} {tool.version}: start (log {run.log})")
    tmp = Path(tempfile.mkdtemp(prefix="bin.tmp-", dir=tool_dir))
    try:
        tool.build(run, tool_dir, tmp)
        absent = [b for b in tool.binaries if not (tmp / b).is_file()]
        if absent:
            raise KubeBuildError(f"{tool.name} {tool.version}: go reported success but produced no {', '.join(absent)}")
        shutil.rmtree(tool_dir / "bin", ignore_errors=True)
        tmp.rename(tool_dir / "bin")
        stamp_tmp = tool_dir / "stamp.json.tmp"
        stamp_tmp.write_text(json.dumps(tool.stamp()) + "\n")
        stamp_tmp.replace(tool_dir / "stamp.json")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    run.say(f"{tool.name} {tool.version}: done in {time.monotonic() - began:.1f}s")


# --- the four recipes -------------------------------------------------------------------------------


def _build_kube(run: _Run, tool_dir: Path, tmp_bin: Path) -> None:
    """k8s.io/kubernetes replaces its staging modules with ./staging paths, so `go install @v` is refused:
    a wrapper module requires the release and maps each staging module to its published v0.Y.Z."""
    info = _download(run, "k8s.io/kubernetes", K8S_VERSION, tool_dir)
    gomod = Path(str(info["GoMod"])).read_text()
    minor, staging = _staging_version(K8S_VERSION)
    required = {args.split()[0] for verb, args in _directives(gomod) if verb == "require"}
    # Only staging modules the release requires (at v0.0.0): sample-cli-plugin and sample-controller are
    # replaced but not required, and the proxy refuses some of their versions.
    replaced = sorted(
        args.split()[0]
        for verb, args in _directives(gomod)
        if verb == "replace" and "=> ./staging/" in args and args.split()[0] in required
    )
    if not replaced:
        raise KubeBuildError(f"k8s.io/kubernetes@{K8S_VERSION}: no ./staging replace lines in go.mod")
    src = _wrapper(
        tool_dir,
        [
            "// Generated by vigil_dev/kube/build.py: k8s.io/kubernetes commands from the Go module proxy.",
            "module vigil.local/kube-build",
            "",
            *_go_and_godebug(gomod),
            f"require k8s.io/kubernetes {K8S_VERSION}",
            "",
            "replace (",
            *(f"\t{m} => {m} {staging}" for m in replaced),
            ")",
        ],
    )
    run.say(f"kube: wrapper module, {len(replaced)} staging modules replaced by {staging}")
    pkgs = [f"k8s.io/kubernetes/cmd/{b}" for b in K8S_BINARIES]
    _download_deps(run, src, pkgs, "kube")
    values = {"gitVersion": K8S_VERSION, "gitMajor": "1", "gitMinor": minor, "gitTreeState": "clean"}
    values["buildDate"] = _release_time(info)
    # The proxy's .info carries the commit (Origin) only on some days: stamp it when known, else an empty
    # gitCommit (never upstream's unexpanded "$Format:%H$"), and record which in version.json.
    values["gitCommit"] = _origin_hash(info)
    if not values["gitCommit"]:
        run.say(f"kube: the module proxy names no commit for k8s.io/kubernetes@{K8S_VERSION}: gitCommit left empty")
    (tool_dir / VERSION_FILE).write_text(json.dumps(values, indent=2, sort_keys=True) + "\n")
    # The same two packages as upstream hack/lib/version.sh; `kubectl version` reads component-base.
    packages = ("k8s.io/client-go/pkg/version", "k8s.io/component-base/version")
    xs = [f"-X {pkg}.{k}={v}" for pkg in packages for k, v in values.items()]
    run.say(f"kube: go build {' '.join(K8S_BINARIES)} (the long step)")
    # Tags as upstream hack/lib/golang.sh for non-debug builds (grpcnotrace lets the linker drop x/net/trace).
    argv = ["build", *_compile_flags(xs, "selinux,notest,grpcnotrace"), "-o", f"{tmp_bin}/", *pkgs]
    _go(run, argv, src, f"building {', '.join(K8S_BINARIES)} {K8S_VERSION}")


def _build_etcd(run: _Run, tool_dir: Path, tmp_bin: Path) -> None:
    """etcd's server module has relative replace lines too (no `go install @v`): a wrapper requires it."""
    info = _download(run, "go.etcd.io/etcd/server/v3", ETCD_VERSION, tool_dir)
    gomod = Path(str(info["GoMod"])).read_text()
    src = _wrapper(
        tool_dir,
        [
            "// Generated by vigil_dev/kube/build.py: the etcd server from the Go module proxy.",
            "module vigil.local/etcd-build",
            "",
            *_go_and_godebug(gomod),
            f"require go.etcd.io/etcd/server/v3 {ETCD_VERSION}",
        ],
    )
    _download_deps(run, src, ["go.etcd.io/etcd/server/v3"], "etcd")
    # etcd's ./build stamps `git rev-parse --short HEAD`; the proxy records no origin for etcd, so say so.
    sha = _origin_hash(info)[:7] or "none-go-module-build"
    xs = [f"-X go.etcd.io/etcd/api/v3/version.GitSHA={sha}"]
    run.say("etcd: go build")
    argv = ["build", *_compile_flags(xs), "-o", str(tmp_bin / "etcd"), "go.etcd.io/etcd/server/v3"]
    _go(run, argv, src, f"building etcd {ETCD_VERSION}")


def _build_helm(run: _Run, tool_dir: Path, tmp_bin: Path) -> None:
    """`go install @v` works for helm; the ldflags are those of helm's Makefile, else it reports "v3.22"
    and renders `.Capabilities.KubeVersion` as v1.20.0."""
    info = _download(run, "helm.sh/helm/v3", HELM_VERSION, tool_dir)
    gomod = Path(str(info["GoMod"])).read_text()
    requires = dict(args.split()[:2] for verb, args in _directives(gomod) if verb == "require")
    base = "helm.sh/helm/v3"
    xs = [
        f"-X {base}/internal/version.version={HELM_VERSION}",
        f"-X {base}/internal/version.gitTreeState=clean",
    ]
    if commit := _origin_hash(info):
        xs.append(f"-X {base}/internal/version.gitCommit={commit}")
    # Makefile: default KubeVersion = (client-go major + 1).(client-go minor).
    if match := re.fullmatch(r"v0\.(\d+)\.\d+", requires.get("k8s.io/client-go", "")):
        for pkg in ("pkg/lint/rules", "pkg/chartutil"):
            xs += [f"-X {base}/{pkg}.k8sVersionMajor=1", f"-X {base}/{pkg}.k8sVersionMinor={match.group(1)}"]
    run.say("helm: go install")
    argv = ["install", *_compile_flags(xs), f"{base}/cmd/helm@{HELM_VERSION}"]
    _go(run, argv, tool_dir, f"installing helm {HELM_VERSION}", extra_env={"GOBIN": str(tmp_bin)})


def _build_kubeconform(run: _Run, tool_dir: Path, tmp_bin: Path) -> None:
    """Plain `go install @v`; `-X main.version` as its goreleaser config, else `-v` says "development"."""
    run.say("kubeconform: go install")
    xs = [f"-X main.version={KUBECONFORM_VERSION}"]
    argv = [
        "install",
        *_compile_flags(xs),
        f"github.com/yannh/kubeconform/cmd/kubeconform@{KUBECONFORM_VERSION}",
    ]
    what = f"installing kubeconform {KUBECONFORM_VERSION}"
    _go(run, argv, tool_dir, what, extra_env={"GOBIN": str(tmp_bin)})


def _compile_flags(xs: Sequence[str], tags: str = "") -> list[str]:
    """-p 2 keeps a 2-core machine usable; -s -w as release builds (smaller binaries, faster link)."""
    return [
        "-p",
        "2",
        "-trimpath",
        *([f"-tags={tags}"] if tags else []),
        "-ldflags",
        " ".join(["-s", "-w", *xs]),
    ]


def _origin_hash(info: Mapping[str, object]) -> str:
    """The release's git commit, as the proxy records it (empty if the proxy did not say)."""
    origin = info.get("Origin")
    return str(origin.get("Hash", "")) if isinstance(origin, dict) else ""


# --- go.mod helpers ---------------------------------------------------------------------------------


def _directives(gomod: str) -> Iterator[tuple[str, str]]:
    """Yield (verb, arguments) for every go.mod directive, flattening `verb ( ... )` blocks."""
    block: str | None = None
    for raw in gomod.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        if block is not None:
            if line == ")":
                block = None
            else:
                yield block, line
            continue
        verb, _, rest = line.partition(" ")
        if rest.strip() == "(":
            block = verb
        else:
            yield verb, rest.strip()


def _go_and_godebug(gomod: str) -> list[str]:
    """The dependency's `go` and `godebug` lines: the main module's set GODEBUG defaults; mirror upstream."""
    out = [f"{verb} {args}" for verb, args in _directives(gomod) if verb in ("go", "godebug")]
    return [*out, ""]


def _staging_version(k8s_version: str) -> tuple[str, str]:
    """v1.35.8 -> ("35", "v0.35.8"): staging modules are published as v0.<minor>.<patch>."""
    match = re.fullmatch(r"v1\.(\d+)\.(\d+)", k8s_version)
    if not match:
        raise KubeBuildError(f"K8S_VERSION {k8s_version!r} is not a v1.Y.Z release")
    return match.group(1), f"v0.{match.group(1)}.{match.group(2)}"


def _wrapper(tool_dir: Path, lines: Sequence[str]) -> Path:
    """Write the wrapper go.mod afresh (go.sum is kept between builds; -mod=mod fills in the rest)."""
    src = tool_dir / "src"
    src.mkdir(exist_ok=True)
    (src / "go.mod").write_text("\n".join(lines) + "\n")
    return src


def _release_time(info: Mapping[str, object]) -> str:
    """The tag's time from the proxy's .info, as buildDate: reproducible, unlike the wall clock."""
    try:
        stamp = json.loads(Path(str(info["Info"])).read_text())["Time"]
    except (OSError, ValueError, KeyError):
        return "1970-01-01T00:00:00Z"
    return str(stamp)


# --- running go ---------------------------------------------------------------------------------------


def _find_go() -> str:
    go = shutil.which("go") or (str(_FALLBACK_GO) if os.access(_FALLBACK_GO, os.X_OK) else None)
    if go is None:
        raise KubeBuildError(f"go not found on PATH: install Go >= {GO_MIN[0]}.{GO_MIN[1]} (https://go.dev/dl)")
    return go


def _go_env(root: Path) -> dict[str, str]:
    """Pin what would make the build depend on the caller's Go setup; keep GOPROXY, GOSUMDB, GONOSUMDB."""
    env = {k: v for k, v in os.environ.items() if k not in ("GOBIN", "GOOS", "GOARCH", "GOEXPERIMENT")}
    go_root = root.absolute() / "go"
    env.update(
        GOMODCACHE=str(go_root / "mod"),
        GOCACHE=str(go_root / "build"),
        # -modcacherw: the module cache stays deletable with plain `rm -rf`; -buildvcs=false: the cache
        # may sit inside a git checkout, whose state must not leak into (or break) the build.
        GOFLAGS="-mod=mod -modcacherw -buildvcs=false",
        CGO_ENABLED="0",
        GOTOOLCHAIN="local",  # never fetch a toolchain behind the user's back; GO_MIN is checked instead
        GOWORK="off",
        GO111MODULE="on",
    )
    return env


def _check_go(go: str, env: Mapping[str, str]) -> str:
    """Fail early with one line if Go is too old, rather than minutes into the build."""
    try:
        out = subprocess.run(
            [go, "env", "GOVERSION"], env=dict(env), capture_output=True, text=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise KubeBuildError(f"`{go} env GOVERSION` failed: {exc}") from exc
    version = out.stdout.strip()
    match = re.search(r"go(\d+)\.(\d+)", version)
    if match is None or (int(match.group(1)), int(match.group(2))) < GO_MIN:
        raise KubeBuildError(
            f"{go} is {version or 'unknown'}: install Go >= {GO_MIN[0]}.{GO_MIN[1]} (etcd/helm pins need it)"
        )
    return f"{version} at {go}"


def _check_disk(root: Path) -> None:
    """A cold build fills ~5 GiB (module cache 1.3, build cache 3.6): say so now, not as a failed link."""
    need = 1 if (root / "go" / "build").is_dir() else 6
    free = shutil.disk_usage(root).free / 2**30
    if free < need:
        hint = "free space or point VIGIL_CACHE elsewhere"
        raise KubeBuildError(f"only {free:.1f} GiB free under {root}: the build needs ~{need} GiB; {hint}")


def _download(run: _Run, module: str, version: str, cwd: Path) -> dict[str, object]:
    """`go mod download -json` one module: its go.mod path, .info path and VCS origin (for ldflags)."""
    out = _go(
        run,
        ["mod", "download", "-json", f"{module}@{version}"],
        cwd,
        f"downloading {module}@{version}",
        capture=True,
    )
    try:
        info = json.loads(out)
    except ValueError:
        raise KubeBuildError(f"`go mod download -json {module}@{version}` printed no JSON (log {run.log})") from None
    if not isinstance(info, dict) or "GoMod" not in info:
        raise KubeBuildError(f"`go mod download -json {module}@{version}` gave no go.mod (log {run.log})")
    return info


def _download_deps(run: _Run, src: Path, pkgs: Sequence[str], name: str) -> None:
    """Resolve and download every module the packages import, as its own timed step (network vs CPU)."""
    run.say(f"{name}: download modules")
    _go(run, ["list", "-deps", *pkgs], src, f"downloading the modules {name} imports")


def _go(
    run: _Run,
    args: list[str],
    cwd: Path,
    what: str,
    *,
    extra_env: Mapping[str, str] | None = None,
    capture: bool = False,
) -> str:
    """Run go with stderr appended to the log (stdout captured or dropped); a heartbeat line every minute."""
    env = {**run.env, **(extra_env or {})}
    with run.log.open("ab") as log:
        log.write(f"\n$ cd {shlex.quote(str(cwd))} && go {shlex.join(args)}\n".encode())
        log.flush()
        offset = log.tell()
        began = time.monotonic()
        try:
            proc = subprocess.Popen(
                [run.go, *args],
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                stderr=log,
            )
        except OSError as exc:
            raise KubeBuildError(f"cannot run {run.go}: {exc}") from exc
        try:
            if capture:
                stdout, _ = proc.communicate()
            else:
                stdout = b""
                while True:
                    try:
                        proc.wait(timeout=_HEARTBEAT_S)
                        break
                    except subprocess.TimeoutExpired:
                        last = (_tail(run.log, offset) or [""])[-1][:100]
                        run.say(f"  ... {what}: {time.monotonic() - began:.0f}s {last}".rstrip())
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        log.write(f"# exit {proc.returncode} after {time.monotonic() - began:.1f}s\n".encode())
    text = stdout.decode(errors="replace")
    if proc.returncode != 0:
        lines = _tail(run.log, offset)
        if capture:  # `go mod download -json` reports errors inside the JSON, not on stderr
            try:
                lines += str(json.loads(text).get("Error", "")).splitlines()
            except (ValueError, AttributeError):
                lines += text.splitlines()[-5:]
        raise KubeBuildError(_diagnose(what, proc.returncode, lines, run.env, run.log))
    return text


def _tail(log: Path, offset: int, limit: int = 40) -> list[str]:
    """The last non-empty lines written to the log since `offset`."""
    with log.open("rb") as f:
        f.seek(offset)
        data = f.read()[-16384:].decode(errors="replace")
    lines = [line.rstrip() for line in data.splitlines() if line.strip() and not line.startswith("# exit ")]
    return lines[-limit:]


_PROXY_URL = re.compile(
    r"reading (https?://\S+?)/(?P<mod>[^@\s]+)/@v/(?P<ver>[^\s/]+?)\.(?:info|mod|zip): (?P<status>\d{3}.*)"
)
_RULES: tuple[tuple[str, str], ...] = (
    # (pattern in go's stderr, one-line message); first match wins. {line} is the last matching line.
    (
        r"checksum mismatch|SECURITY ERROR",
        "checksum mismatch while {what}: {line}; the proxy served other bytes than sum.golang.org "
        "recorded: do not disable the check, try another GOPROXY",
    ),
    (
        r"sum\.golang\.org|GOSUMDB|verifying module",
        "the checksum database is unreachable while {what}: {line}; set GOSUMDB to a reachable mirror, "
        "or GONOSUMDB=<module patterns> for a trusted private proxy",
    ),
    (
        r"dial tcp|no such host|i/o timeout|connection refused|TLS handshake|proxyconnect",
        "cannot reach the Go module proxy (GOPROXY={proxy}) while {what}: {line}",
    ),
    (r"requires go >= ", "{what}: {line}: install a newer Go (GOTOOLCHAIN=local: none is fetched)"),
    (
        r"no space left on device",
        "disk full while {what}: free space under {cache} or point VIGIL_CACHE elsewhere",
    ),
    (
        r"signal: killed",
        "go was killed while {what} (out of memory? the build uses -p 2; close other programs)",
    ),
)


def _diagnose(what: str, code: int, lines: Sequence[str], env: Mapping[str, str], log: Path) -> str:
    """Turn go's stderr into one line naming the cause and a hint; the full text stays in the log."""
    text = "\n".join(lines)
    proxy = env.get("GOPROXY") or "https://proxy.golang.org,direct"
    if match := _PROXY_URL.search(text):
        module = re.sub(r"!([a-z])", lambda m: m.group(1).upper(), match.group("mod"))
        response = next((ln.strip() for ln in lines if "server response:" in ln), "")
        detail = f"{match.group('status')} {response}".strip().rstrip(".")
        return (
            f"the Go module proxy refused {module}@{match.group('ver')}: {detail}; check GOPROXY={proxy} "
            f"(a mirror may lack it) or pin another release in build.py (log {log})"
        )
    if code < 0:  # killed by a signal: go printed nothing about it
        lines = [*lines, f"signal: killed ({-code})"]
    for pattern, template in _RULES:
        if matching := [ln.strip() for ln in lines if re.search(pattern, ln)]:
            message = template.format(what=what, line=matching[-1], proxy=proxy, cache=env.get("GOCACHE", ""))
            return f"{message} (log {log})"
    last = lines[-1].strip() if lines else f"exit status {code}"
    return f"go failed while {what}: {last} (log {log})"


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main() -> int:
    """Build everything (if needed) and print `name<TAB>path` lines."""
    signal.signal(signal.SIGTERM, _interrupt)  # so a TERM also stops the go child and removes the temp dir
    try:
        paths = ensure_kube_binaries(lambda line: print(line, flush=True))
    except KubeBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: nothing half-built is kept; run again to resume", file=sys.stderr)
        return 130
    for name, path in paths.items():
        print(f"{name}\t{path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
