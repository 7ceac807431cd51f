"""Start and stop the stack's servers as process groups recorded by pid, so `down` stops only what `up` started."""

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from vigil_dev.errors import DevError


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
    if marker not in " ".join(argv):
        raise ValueError(f"marker {marker!r} must appear in the command line of {name}")
    log_file.parent.mkdir(parents=True, exist_ok=True)
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("ab") as out:
        try:
            proc = subprocess.Popen(
                list(argv),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise DevError(f"cannot start {name}: {argv[0]} not found") from exc
    pid_file.write_text(f"{proc.pid}\n")
    return Managed(name=name, pid_file=pid_file, marker=marker)


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
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return marker in cmdline and _alive(pid)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)
