"""The sidecar's worker thread (`DaemonWorker`): calls run in order on one daemon thread, and a call that never
returns neither blocks shutdown nor the process's exit."""

import subprocess
import sys
import threading
import time

import pytest

from vigil_sidecar.shells.common import DaemonWorker


def test_calls_run_in_order_on_one_daemon_thread_their_errors_to_the_caller() -> None:
    worker = DaemonWorker("w-order")
    seen: list[tuple[int, str, bool]] = []

    def call(n: int) -> int:
        seen.append((n, threading.current_thread().name, threading.current_thread().daemon))
        return n * 10

    futures = [worker.submit(call, n) for n in range(3)]
    failing = worker.submit(int, "not a number")
    assert [f.result(timeout=5) for f in futures] == [0, 10, 20]
    with pytest.raises(ValueError, match="not a number"):
        failing.result(timeout=5)
    assert seen == [(0, "w-order", True), (1, "w-order", True), (2, "w-order", True)]
    worker.shutdown()


def test_shutdown_without_wait_cancels_the_queued_calls_and_leaves_the_running_one() -> None:
    worker = DaemonWorker("w-shutdown")
    running, release = threading.Event(), threading.Event()

    def blocked() -> str:
        running.set()
        release.wait()
        return "done"

    first = worker.submit(blocked)
    queued = worker.submit(str, "never")
    assert running.wait(5)
    worker.shutdown(wait=False, cancel_futures=True)
    assert queued.cancelled()
    assert not first.done()
    with pytest.raises(RuntimeError, match="shut down"):
        worker.submit(str, "late")
    release.set()
    assert first.result(timeout=5) == "done"


def test_a_call_that_never_returns_does_not_hold_the_process_exit() -> None:
    """What SIGTERM met with a ThreadPoolExecutor: Python joined its thread at exit, waiting out the call."""
    child = (
        "import threading\n"
        "from vigil_sidecar.shells.common import DaemonWorker\n"
        "worker, started = DaemonWorker('w-exit'), threading.Event()\n"
        "worker.submit(lambda: (started.set(), threading.Event().wait()))\n"
        "assert started.wait(5)\n"
        "worker.shutdown(wait=False, cancel_futures=True)\n"
        "print('exiting', flush=True)\n"
    )
    begun = time.monotonic()
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=30, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "exiting\n", "")
    print(f"the child exited in {time.monotonic() - begun:.2f}s")
