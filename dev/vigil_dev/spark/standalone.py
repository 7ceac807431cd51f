"""A Spark standalone cluster on loopback — one master, one worker — started from the pyspark distribution's
`spark-class` (no Spark download): what a user's `--master spark://…` meets, for the report's tests."""

import json
import os
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark

from vigil_dev import ports, procs

HOST = "127.0.0.1"


@dataclass(frozen=True)
class Standalone:
    master_url: str
    """spark://127.0.0.1:<port>"""
    ui_url: str

    def state(self) -> dict[str, Any]:
        """The master's own view (its UI's JSON): workers, cores, applications."""
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=5) as answer:  # noqa: S310 - loopback http
            found: dict[str, Any] = json.load(answer)
            return found


def _spark_class() -> Path:
    return Path(pyspark.__file__).parent / "bin" / "spark-class"


@contextmanager
def cluster(state_dir: Path, *, cores: int = 1, memory: str = "1g", timeout: float = 60) -> Iterator[Standalone]:
    """A master and a worker with `cores` cores, both on loopback, stopped on exit; executors run this
    interpreter (they must import vigil_spark)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    master_port, master_ui, worker_ui = ports.free_ports(3)
    conf = state_dir / "spark-standalone.conf"  # its path in both command lines: the marker `procs` checks
    conf.write_text("spark.master.rest.enabled false\nspark.ui.enabled false\nspark.worker.cleanup.enabled false\n")
    env = {**os.environ, "SPARK_LOCAL_IP": HOST, "SPARK_HOME": str(_spark_class().parent.parent),
           "PYSPARK_PYTHON": sys.executable, "SPARK_WORKER_DIR": str(state_dir / "work")}  # fmt: skip
    common = ["--host", HOST, "--properties-file", str(conf)]
    master = procs.start(
        "spark-master",
        [str(_spark_class()), "org.apache.spark.deploy.master.Master", *common, "--port", str(master_port),
         "--webui-port", str(master_ui)],
        pid_file=state_dir / "master.pid", marker=str(conf), log_file=state_dir / "master.log", env=env,
    )  # fmt: skip
    found = Standalone(f"spark://{HOST}:{master_port}", f"http://{HOST}:{master_ui}")
    worker: procs.Managed | None = None
    try:
        procs.wait_until(lambda: _answers(found), timeout=timeout, what="the Spark master",
                         exited=master.exited, log=state_dir / "master.log")  # fmt: skip
        worker = procs.start(
            "spark-worker",
            [str(_spark_class()), "org.apache.spark.deploy.worker.Worker", *common, "--cores", str(cores),
             "--memory", memory, "--webui-port", str(worker_ui), found.master_url],
            pid_file=state_dir / "worker.pid", marker=str(conf), log_file=state_dir / "worker.log", env=env,
        )  # fmt: skip
        procs.wait_until(lambda: found.state().get("aliveworkers") == 1, timeout=timeout,
                         what="the Spark worker registered with its master", exited=worker.exited,
                         log=state_dir / "worker.log")  # fmt: skip
        yield found
    finally:
        if worker is not None:
            worker.stop()
        master.stop()


def _answers(cluster: Standalone) -> bool:
    try:
        cluster.state()
    except OSError:
        return False
    return True
