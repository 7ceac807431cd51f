"""vigil's container images, as data: one table, read by the planner (`plan.py`) and the builder (`build.py`).

Every image is two layers: a Debian rootfs (`Base`, built once by mmdebstrap and shared by every image on it) and
the app venv `/opt/vigil` (the kafka-vigil wheel with one extra's locked dependencies, installed offline). What
differs between the images is only what this table says.
"""

from dataclasses import dataclass

#: The user every image runs as (distroless' "nonroot"): an entry in /etc/passwd and /etc/group, no login, no
#: password, home /home/vigil; Kubernetes' `runAsNonRoot` accepts it.
UID = 65532
USER = "vigil"
#: The app's virtualenv: the second layer is exactly this directory.
VENV = "/opt/vigil"
#: Where the report image keeps Spark's Kafka source and vigil's byte readers (`$VIGIL_SPARK_JARS`).
JARS_DIR = f"{VENV}/jars"
#: Debian release of every base (its python3 is 3.11, the CPython the lock files are resolved for).
SUITE = "bookworm"
#: Its python3's minor version: the venv's site-packages directory.
PYTHON = "python3.11"


@dataclass(frozen=True)
class Base:
    """A Debian rootfs: mmdebstrap's `essential` variant (dpkg and the Essential: yes set, no apt) plus `packages`."""

    name: str
    packages: tuple[str, ...]
    keeps_shell: bool
    """False: bash, dash, perl-base and debconf are purged after the install (they only ran maintainer scripts);
    the image then has no shell at all, so nothing in it can run `sh -c`. The rest is then cut to what `packages`
    need to run (`plan.prunable`: no coreutils, util-linux, PAM, ...): the distroless idea, from Debian's packages,
    with the dpkg status file saying exactly what is left."""
    why: str


PYTHON_BASE = Base(
    name="python",
    packages=("python3", "ca-certificates"),
    keeps_shell=False,
    why="CPython 3.11 and the CA bundle (TLS to brokers and the Kubernetes API); nothing that needs a shell",
)
JRE_BASE = Base(
    name="python-jre",
    packages=("python3", "ca-certificates", "openjdk-17-jre-headless"),
    keeps_shell=True,
    why=(
        "pyspark starts its JVM through Spark's launcher scripts (pyspark/bin/spark-submit -> spark-class), which "
        "are bash: the report image keeps bash"
    ),
)
BASES = (PYTHON_BASE, JRE_BASE)


@dataclass(frozen=True)
class Image:
    """One image: which base, which extra, which local distributions, how it starts."""

    name: str
    repository: str
    """The repository name the chart pulls (`charts/vigil/values.yaml`); the tag is the release version."""
    base: Base
    lock: str
    """Lock file under `images/` (the extra's dependency set, with hashes)."""
    extra: str | None = None
    testapps: bool = False
    """Also install the `vigil-testapps` distribution (the apps the e2e tests run in pods)."""
    jars: bool = False
    """Bake Spark's Kafka source and vigil's byte readers into `JARS_DIR`."""
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    ports: tuple[int, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    workdir: str = "/"
    description: str = ""

    @property
    def requirement(self) -> str:
        """What pip installs from the wheelhouse, before the lock's pins."""
        return f"kafka-vigil[{self.extra}]" if self.extra else "kafka-vigil"


#: Environment every image has: the venv first on PATH, unbuffered output (container logs), no .pyc writes (the
#: root filesystem is read-only; the pycs are compiled at build time).
COMMON_ENV: tuple[tuple[str, str], ...] = (
    ("PATH", f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
    ("PYTHONUNBUFFERED", "1"),
    ("PYTHONDONTWRITEBYTECODE", "1"),
    ("LANG", "C.UTF-8"),
)

IMAGES: tuple[Image, ...] = (
    Image(
        name="sidecar",
        repository="vigil-sidecar",
        base=PYTHON_BASE,
        lock="base.lock",
        entrypoint=("vigil", "sidecar"),
        ports=(7390, 7391),  # the beacon and health ports the webhook injects
        description="the liveness sidecar: the base install only, it goes into every consumer pod",
    ),
    Image(
        name="operator",
        repository="vigil-operator",
        base=PYTHON_BASE,
        lock="operator.lock",
        extra="operator",
        entrypoint=("vigil", "operator"),
        ports=(8080, 8081, 9443),  # kopf's liveness endpoint, Prometheus /metrics, the admission webhook (TLS)
        description="the ConsumerGroup operator and its admission webhooks",
    ),
    Image(
        name="report",
        repository="vigil-report",
        base=JRE_BASE,
        lock="report.lock",
        extra="report",
        jars=True,
        entrypoint=("vigil", "report"),
        # Spark 4 creates `artifacts/` under the working directory when a session registers Java UDFs (vigil's byte
        # readers): on a read-only root that must be the writable /tmp (an emptyDir in the chart), or the job fails
        workdir="/tmp",  # noqa: S108 - a path inside the image
        env=(
            ("VIGIL_SPARK_JARS", JARS_DIR),
            ("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64"),
        ),
        description="the rebalance report: pyspark, a JRE, Spark's Kafka source and vigil's byte readers",
    ),
    Image(
        name="testapps",
        repository="vigil-testapps",
        base=PYTHON_BASE,
        lock="base.lock",
        testapps=True,
        entrypoint=("python",),
        cmd=("-m", "vigil_testapps.podapp"),
        description="test image: kafka-vigil and vigil_testapps (`python -m vigil_testapps.consumerapp` in e2e pods)",
    ),
)

BY_NAME = {image.name: image for image in IMAGES}


def ref(image: Image, version: str) -> str:
    """`vigil-sidecar:0.2.0`: what the docker archive is tagged, so `ctr -n k8s.io images import` names it
    `docker.io/library/vigil-sidecar:0.2.0`, which is what the chart's repository + appVersion resolve to."""
    return f"{image.repository}:{version}"


def environment(image: Image) -> tuple[tuple[str, str], ...]:
    return COMMON_ENV + image.env
