"""Start and stop the stack's servers as process groups recorded by pid, so `down` stops only what `up` started."""

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from vigil_dev.errors import DevError

_KLOG_FATAL = re.compile(r"[EF]\d{4} ")


@dataclass(frozen=True)
class Managed:
    """A server started by the stack: its pid file, and a marker its command line must contain.

    The marker (a path unique to this stack) guards against a recycled pid: `stop` never signals a
    process whose command line lacks it.
    """

    name: str
    pid_file: Path
    marker: str

    def pid(self) -> int | None:
        """The recorded pid if that process is still ours and alive."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if _cmdline_has(pid, self.marker) else None

    def running(self) -> bool:
        return self.pid() is not None

    def exited(self) -> bool:
        """True once the recorded process is gone. Ignores the marker: the java launcher re-execs itself,
        so right after start its command line can briefly be another one."""
        try:
            return not _alive(int(self.pid_file.read_text().strip()))
        except (OSError, ValueError):
            return True

    def stop(self, grace: float = 15.0) -> bool:
        """SIGTERM the process group, wait `grace` seconds, then SIGKILL; True if something was stopped."""
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.1)
        if _alive(pid):
            _signal_group(pid, signal.SIGKILL)
            while _alive(pid):
                time.sleep(0.05)
        self.pid_file.unlink(missing_ok=True)
        return True

    def freeze(self) -> None:
        """SIGSTOP the process group: alive, sockets open, answering nothing (a GC pause, a hung host)."""
        pid = self.pid()
        if pid is not None:
            _signal_group(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT after `freeze`."""
        pid = self.pid()
        if pid is not None:
            _signal_group(pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL at once: for tests that simulate a crash."""
        pid = self.pid()
        if pid is not None:
            _signal_group(pid, signal.SIGKILL)
            while _alive(pid):
                time.sleep(0.05)


def start(
    name: str,
    argv: Sequence[str],
    *,
    pid_file: Path,
    marker: str,
    log_file: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Managed:
    """Start `argv` in a new session (its own process group) with stdout+stderr appended to `log_file`."""
    return spawn(name, argv, pid_file=pid_file, marker=marker, log_file=log_file, env=env, cwd=cwd)[0]


def spawn(
    name: str,
    argv: Sequence[str],
    *,
    pid_file: Path,
    marker: str,
    log_file: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> tuple[Managed, "subprocess.Popen[bytes]"]:
    """`start`, also returning the Popen: for a parent that waits for the exit status.

    The marker must be in the command line, or be a `KEY=value` of `env` (for commands that cannot carry
    one, like a pod's container: the environment is checked too, in /proc/<pid>/environ).
    """
    in_env = env is not None and any(marker == f"{k}={v}" for k, v in env.items())
    if marker not in " ".join(argv) and not in_env:
        raise ValueError(f"marker {marker!r} must appear in the command line or environment of {name}")
    if shutil.which(argv[0]) is None:  # checked here: behind the setpriv wrapper it would be setpriv's error
        reason = "is not executable" if Path(argv[0]).exists() else "not found"
        raise DevError(f"cannot start {name}: {argv[0]} {reason}")
    log_file.parent.mkdir(parents=True, exist_ok=True)
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    prefix = _die_with_parent_prefix()
    with log_file.open("ab") as out:
        try:
            proc = subprocess.Popen(
                [*prefix, *argv],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise DevError(f"cannot start {name}: {argv[0]} not found") from exc
        except PermissionError as exc:
            raise DevError(f"cannot start {name}: {argv[0]} is not executable") from exc
    _await_exec(proc.pid, wrapper=prefix[0] if prefix else None)
    pid_file.write_text(f"{proc.pid}\n")
    return Managed(name=name, pid_file=pid_file, marker=marker), proc


#: Set to a pid by the test fixtures: servers that process starts die with it, even if it is SIGKILLed before
#: its teardown runs (a killed test run must never leave brokers behind). `vigil dev up` leaves it unset.
DIE_WITH_PARENT_ENV = "VIGIL_DEV_DIE_WITH_PARENT"


def _die_with_parent_prefix() -> list[str]:
    """`setpriv --pdeathsig KILL --` when this process asked for it (util-linux; no unsafe preexec_fn)."""
    if os.environ.get(DIE_WITH_PARENT_ENV) != str(os.getpid()):
        return []
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


def _await_exec(pid: int, wrapper: str | None = None, timeout: float = 2.0) -> None:
    """Popen returns once the child is in execve, but (vfork) its new command line and environment appear in
    /proc a moment later: until then the marker check would not recognise our own process. Behind the
    setpriv wrapper, also wait until it has exec'd the real program (so its death signal is armed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if cmdline and (wrapper is None or not cmdline.startswith(wrapper.encode() + b"\0")):
                return
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return  # already exited (not reaped: its parent still gets the status)
        except (OSError, ChildProcessError):
            return
        time.sleep(0.001)


def cpu_seconds(pid: int) -> float:
    """CPU time a process has used (utime + stime, all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_mb(pid: int, key: str) -> float:
    """One memory figure of a process in MB (`key`: a kB field of /proc/PID/status: VmRSS, VmHWM, RssAnon); NaN if
    it is not there."""
    match = re.search(rf"^{key}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M)
    return int(match.group(1)) / 1024 if match else float("nan")


def private_mb(pid: int) -> float:
    """The memory only this process holds, in MB (Private_Clean + Private_Dirty of /proc/PID/smaps_rollup): what one
    more such process adds to a machine where the others already hold the shared pages (its libraries' code)."""
    text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    return sum(int(kb) for kb in re.findall(r"^Private_(?:Clean|Dirty):\s+(\d+) kB", text, re.M)) / 1024


def kill_pid(pid: int) -> None:
    """SIGKILL one process that is not ours by pid file (a container's shim left by a killed node) and reap it."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)


def wait_until(
    check: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    exited: Callable[[], bool] | None = None,
    log: Path | None = None,
) -> None:
    """Poll `check` until true; fail with one line after `timeout` or as soon as `exited` says it died."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        if exited is not None and exited():
            raise DevError(f"{what}: the process exited during start-up{_last_error(log)}")
        if time.monotonic() > deadline:
            raise DevError(f"{what}: not ready after {timeout:.0f}s")
        time.sleep(0.2)


def _last_error(log: Path | None) -> str:
    """`: <the last ERROR line's message>` from a server log, to say why it died; empty if none."""
    if log is None:
        return ""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    for index in range(len(lines) - 1, -1, -1):
        if _KLOG_FATAL.match(lines[index]):  # Go servers (klog): the error is on its own line
            return f": {lines[index].strip()[:300]}"
        if " ERROR " in lines[index] or lines[index].startswith("Exception"):
            cause = lines[index + 1] if index + 1 < len(lines) else lines[index]
            return f": {cause.strip()[:300]}"
    return ""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    if state == "Z":
        _reap(pid)
        return False
    return True


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _cmdline_has(pid: int, marker: str) -> bool:
    """The process runs and its command line contains the marker, or its environment has it as an entry."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    if marker not in raw.replace(b"\0", b" ").decode(errors="replace"):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            return False
        if marker.encode() not in environ:
            return False
    return _alive(pid)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)
