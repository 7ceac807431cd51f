"""The fakelet's host side: container processes, probes, the pod-address lock, leftovers after a crash.

Each container is a `procs` process group with a pid file under `<fakelet dir>/containers/`. Its command line
is the pod's, so the stack's marker travels in its environment (`VIGIL_FAKELET_CONTAINER=<pid file>`,
checked in /proc/<pid>/environ): `stop_leftovers` can then stop, by pid, what a killed fakelet left behind,
and never anything else.
"""

import asyncio
import contextlib
import fcntl
import os
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

import aiohttp

from vigil_dev import procs
from vigil_dev.errors import DevError
from vigil_dev.kube.fakelet import network
from vigil_dev.kube.fakelet.spec import Container, Exec, HttpGet, Probe, TcpSocket, Unsupported

MARKER_ENV = "VIGIL_FAKELET_CONTAINER"
BLOCK_LOCKS = Path(tempfile.gettempdir()) / "vigil-fakelet-blocks"
"""Machine-wide (not per cache): two stacks with different VIGIL_CACHE still share the loopback range."""


class ContainerProcess:
    """One run of a container: its own process group, output appended to the container's log file."""

    def __init__(self, managed: procs.Managed, popen: "subprocess.Popen[bytes]") -> None:
        self.managed = managed
        self.popen = popen

    @property
    def pid(self) -> int:
        return self.popen.pid

    def signal(self, sig: signal.Signals) -> None:
        """Signal the whole group (a container's processes share its fate); never after it was reaped."""
        if self.popen.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)

    def has_exited(self) -> bool:
        """True once the process has ended; does not reap it (WNOWAIT), so its group id stays ours."""
        if self.popen.returncode is not None:
            return True
        try:
            return os.waitid(os.P_PID, self.popen.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    async def wait(self) -> int:
        """Wait for the process to exit (a pidfd: no polling), then `reap` it."""
        loop = asyncio.get_running_loop()
        fd = os.pidfd_open(self.popen.pid)
        exited: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not exited.done():
                exited.set_result(None)

        loop.add_reader(fd, readable)
        try:
            await exited
        finally:
            loop.remove_reader(fd)
            os.close(fd)
        return self.reap()

    def reap(self) -> int:
        """Kill what the exited process left in its group (a container's processes die with it), reap it."""
        self.signal(signal.SIGKILL)  # the leader is a zombie until reaped, so the group id is still ours
        code = self.popen.wait()
        self.managed.pid_file.unlink(missing_ok=True)
        return code


def spawn(c: Container, *, pid_file: Path, log_file: Path, cwd: Path) -> ContainerProcess:
    """Start a container's command; DevError (one line) if its program does not exist."""
    env = {**dict(c.env), MARKER_ENV: str(pid_file)}
    workdir = Path(c.working_dir) if c.working_dir and Path(c.working_dir).is_dir() else cwd
    managed, popen = procs.spawn(
        c.name, c.argv, pid_file=pid_file, marker=f"{MARKER_ENV}={pid_file}", log_file=log_file, env=env, cwd=workdir
    )
    return ContainerProcess(managed, popen)


def stop_leftovers(fakelet_dir: Path, grace: float = 5.0) -> list[str]:
    """Stop container processes recorded under `fakelet_dir` that are still running (by pid + marker)."""
    stopped = []
    for pid_file in sorted((fakelet_dir / "containers").glob("*/*.pid")):
        managed = procs.Managed(pid_file.stem, pid_file, f"{MARKER_ENV}={pid_file}")
        if managed.stop(grace=grace):
            stopped.append(f"{pid_file.parent.name}/{pid_file.stem}")
    return stopped


async def probe(p: Probe, env: Mapping[str, str], cwd: Path, session: aiohttp.ClientSession) -> bool | None:
    """Run one probe: True success, False failure, None unknown (an undeclared named port)."""
    action = p.action
    try:
        if isinstance(action, HttpGet):
            return await _http(action, p.timeout, session)
        if isinstance(action, TcpSocket):
            if action.port is None:
                return None
            _, writer = await asyncio.wait_for(asyncio.open_connection(action.host, action.port), p.timeout)
            writer.close()
            return True
        if isinstance(action, Exec):
            return await _exec(action.command, env, cwd, p.timeout)
    except (OSError, aiohttp.ClientError, TimeoutError):
        return False
    assert isinstance(action, Unsupported)
    return True


async def _http(action: HttpGet, timeout: float, session: aiohttp.ClientSession) -> bool | None:
    """Success is a status in [200, 400), as for the kubelet (redirects followed)."""
    if action.port is None:
        return None
    url = f"{action.scheme.lower()}://{action.host}:{action.port}{action.path}"
    headers = {"User-Agent": "kube-probe/fakelet", "Accept": "*/*", **dict(action.headers)}
    limit = aiohttp.ClientTimeout(total=timeout)
    async with session.get(url, headers=headers, timeout=limit, ssl=False) as resp:
        return 200 <= resp.status < 400


async def _exec(command: tuple[str, ...], env: Mapping[str, str], cwd: Path, timeout: float) -> bool:
    proc = await asyncio.create_subprocess_exec(
        *command,
        env=dict(env),
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        return await asyncio.wait_for(proc.wait(), timeout) == 0
    except TimeoutError:
        return False
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()


def claim_block(seed: str, lock_dir: Path = BLOCK_LOCKS) -> tuple[int, int]:
    """Lock a free 127.<block>.0.0/16 for this fakelet's pods; returns (block, lock fd to keep open).

    The lock is released when the process dies, however it dies.
    """
    lock_dir.mkdir(parents=True, exist_ok=True)
    for block in network.blocks(seed):
        fd = os.open(lock_dir / f"127.{block}.lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return block, fd
    raise DevError(f"no free 127.x.0.0/16 block for pod addresses (locks in {lock_dir})")
