"""Process control of the dev stack: stop only what we started, fail fast with the server's own reason."""

import os
import sys
import time
from pathlib import Path

import pytest

from vigil_dev import procs
from vigil_dev.errors import DevError


def _sleeper(tmp_path: Path, marker: str) -> procs.Managed:
    return procs.start(
        "sleeper",
        [sys.executable, "-c", "import time; time.sleep(60)", marker],
        pid_file=tmp_path / "pid",
        marker=marker,
        log_file=tmp_path / "out.log",
    )


def test_start_then_stop_by_pid(tmp_path: Path) -> None:
    managed = _sleeper(tmp_path, str(tmp_path / "m1"))
    pid = managed.pid()
    assert pid is not None
    assert managed.running()
    assert managed.stop(grace=5)
    assert not managed.running()
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    assert not managed.stop()  # twice is harmless


def test_a_recycled_pid_is_never_signalled(tmp_path: Path) -> None:
    """The pid file points at a process that is not ours (here: the test runner itself)."""
    (tmp_path / "pid").write_text(f"{os.getpid()}\n")
    foreign = procs.Managed("foreign", tmp_path / "pid", marker=str(tmp_path / "not-in-its-cmdline"))
    assert foreign.pid() is None
    assert not foreign.stop()  # would have killed pytest otherwise


def test_marker_must_be_in_the_command_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="marker"):
        procs.start("x", ["true"], pid_file=tmp_path / "p", marker="/nowhere", log_file=tmp_path / "l")


def test_missing_binary_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(DevError, match="cannot start x: /no/such/bin not found"):
        procs.start("x", ["/no/such/bin", "/m"], pid_file=tmp_path / "p", marker="/m", log_file=tmp_path / "l")


def test_death_during_start_up_quotes_the_server_log(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("[t] INFO starting\n[t] ERROR Fatal error during startup\njava.lang.IllegalArgumentException: bad\n")
    dead = procs.start(
        "dies",
        [sys.executable, "-c", "raise SystemExit(1)", str(tmp_path)],
        pid_file=tmp_path / "pid",
        marker=str(tmp_path),
        log_file=tmp_path / "out.log",
    )
    with pytest.raises(DevError, match=r"exited during start-up: java.lang.IllegalArgumentException: bad"):
        procs.wait_until(lambda: False, timeout=20, what="dies", exited=dead.exited, log=log)


def test_timeout_names_what_was_awaited() -> None:
    with pytest.raises(DevError, match="the thing: not ready after 0s"):
        procs.wait_until(lambda: False, timeout=0.3, what="the thing")


def test_servers_started_by_a_test_run_die_with_it(tmp_path: Path) -> None:
    """A child that starts a server and is then SIGKILLed (no teardown) takes the server with it."""
    marker = str(tmp_path / "orphan-guard")
    script = f"""
import os, sys, time
from pathlib import Path
from vigil_dev import procs
os.environ[procs.DIE_WITH_PARENT_ENV] = str(os.getpid())
m = procs.start("s", [sys.executable, "-c", "import time; time.sleep(60)", {marker!r}],
                pid_file=Path({str(tmp_path / "pid")!r}), marker={marker!r}, log_file=Path({str(tmp_path / "log")!r}))
print(Path({str(tmp_path / "pid")!r}).read_text().strip(), flush=True)
time.sleep(60)
"""
    import signal
    import subprocess

    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    server_pid = int(parent.stdout.readline())
    assert Path(f"/proc/{server_pid}").exists()
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    server = procs.Managed("s", tmp_path / "pid", marker)
    procs.wait_until(server.exited, timeout=10, what="the orphaned server to die")


def test_memory_and_cpu_of_a_process_come_from_proc() -> None:
    rss, anon = procs.memory_mb(os.getpid(), "VmRSS"), procs.memory_mb(os.getpid(), "RssAnon")
    assert 0 < anon < rss
    assert procs.memory_mb(os.getpid(), "NoSuchField") != procs.memory_mb(os.getpid(), "NoSuchField")  # NaN
    private = procs.private_mb(os.getpid())
    assert anon <= private + 1  # anonymous memory is private here (no fork shares it)
    assert private < rss  # the shared libraries aside
    before = procs.cpu_seconds(os.getpid())
    wall_end = time.monotonic() + 5
    while procs.cpu_seconds(os.getpid()) < before + 0.05 and time.monotonic() < wall_end:  # busy: CPU time grows
        pass
    assert procs.cpu_seconds(os.getpid()) >= before + 0.05
