"""`vigil report`: ingest `__consumer_offsets` and vigil's events incrementally, then build the report.

Stages, one progress line each on stderr: check the cluster (before any JVM starts, so a wrong address fails in
seconds), start Spark, ingest each topic (only what is new since the last run), then the model and outputs
(`vigil_spark.model.build`, when installed), and with `--update-status` each matching `ConsumerGroup`'s
`status.report` (`vigil_spark.outputs.status`; the apiserver is checked before Spark starts too).
Any failure is one line and a non-zero exit: 2 for bad flags or
settings, 1 for everything else (unreachable broker, missing Kafka source jars, a failed query); `--verbose`
adds the traceback. One run at a time per `--out` (`vigil_spark.run_lock`): a run that finds another one's lock
says so and exits 0 without touching anything.

Also runs as `python -m vigil_spark` and under spark-submit (`spark-submit … vigil_spark/__main__.py --out DIR`):
there the master and jars are spark-submit's unless `--master` / `--jars` are given.
"""

import argparse
import importlib
import importlib.util
import json
import os
import platform
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from vigil_core.errors import ConfigError
from vigil_core.events import EVENTS_TOPIC_DEFAULT
from vigil_core.kafka.security import KafkaConnection
from vigil_spark import failure, run_lock
from vigil_spark.location import Location

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from vigil_spark.outputs.status import KafkaCluster, Writer
    from vigil_spark.outputs.summary import GroupSummary

    Summaries = tuple[list[GroupSummary], datetime]
    """A run's per-group summaries and their report time."""
    KubeStatus = tuple[Writer, KafkaCluster]

PROG: Final = "vigil report"
OFFSETS_TOPIC: Final = "__consumer_offsets"
MODEL_MODULE: Final = "vigil_spark.model"
#: The default group id is this plus the cluster name: Spark caches its Kafka consumers by (group id, partition),
#: so two clusters read in one JVM with one group id would collide on `__consumer_offsets-<n>`.
GROUP_ID_PREFIX: Final = "vigil-report"
#: Cluster names become part of paths and partition values: keep them plain.
CLUSTER_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
#: Set in the Python driver that spark-submit starts (it then owns master and jars).
SPARK_SUBMIT_ENV: Final = "PYSPARK_GATEWAY_PORT"
#: The interpreter Spark starts for Python workers.
PYTHON_ENV: Final = "PYSPARK_PYTHON"
#: The arguments pyspark passes to spark-submit when it starts the driver JVM itself.
SUBMIT_ARGS_ENV: Final = "PYSPARK_SUBMIT_ARGS"
_QUIET_LOG4J: Final = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
"""


class UsageError(Exception):
    """A flag or setting is wrong (exit 2)."""


class OutputBusyError(Exception):
    """Another run holds the output's lock: this one skips (exit 0); the message says who and until when."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument(
        "--out",
        required=True,
        type=_location,
        metavar="DIR",
        help="output directory, a path or any Hadoop-compatible URI (hdfs://, s3a://, ...; a path without a scheme is"
        " on the cluster's default filesystem): tables/ (ingested history), the model's tables and the report",
    )
    p.add_argument(
        "--cluster",
        default="default",
        metavar="NAME",
        help="name of the Kafka cluster in every row, and of its checkpoints (default: default)",
    )
    p.add_argument(
        "--master", default=None, help="Spark master (default: local[*]; spark-submit's own when run by spark-submit)"
    )
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        type=_spark_conf,
        metavar="KEY=VALUE",
        help="a Spark property for the session this run starts, as spark-submit's --conf (repeatable), e.g. the "
        "executors of a k8s:// master: spark.kubernetes.container.image=vigil-report:TAG",
    )
    p.add_argument(
        "--events-topic",
        default=EVENTS_TOPIC_DEFAULT,
        metavar="TOPIC",
        help=f"vigil's events topic; skipped when it does not exist (default: {EVENTS_TOPIC_DEFAULT})",
    )
    p.add_argument(
        "--checkpoint",
        type=_location,
        default=None,
        metavar="DIR",
        help="streaming checkpoints: what was already ingested (default: <out>/checkpoints)",
    )
    p.add_argument(
        "--jars",
        default=None,
        metavar="DIR",
        help="Spark's Kafka source jars (default: $VIGIL_SPARK_JARS, which the report image sets)",
    )
    p.add_argument(
        "--group-id",
        default=None,
        metavar="ID",
        help="group.id of Spark's Kafka consumers: no group is joined and nothing committed, but under an "
        f"authorizer they need DESCRIBE on it (default: {GROUP_ID_PREFIX}-<cluster>)",
    )
    p.add_argument(
        "--max-records-per-batch",
        type=int,
        default=None,
        metavar="N",
        help="cap a micro-batch at N records (a big backlog is then ingested in several batches)",
    )
    p.add_argument(
        "--connect-timeout",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="how long to wait for the cluster's metadata (default: 15)",
    )
    p.add_argument(
        "--broker-logs",
        nargs="+",
        default=[],
        metavar="GLOB",
        help="broker log files (plain or .gz; e.g. '/logs/kafka-*/server.log*'): the causes of rebalances. Read"
        " whole each run (they rotate): the table broker_log is replaced",
    )
    p.add_argument(
        "--broker-log-pattern",
        default=None,
        metavar="REGEX",
        help="the log line layout: a regex with named groups ts, level, message (default: Kafka's log4j layout)",
    )
    p.add_argument(
        "--broker-log-timezone",
        default="UTC",
        metavar="ZONE",
        help="the zone of the logs' timestamps when they carry none (default: UTC)",
    )
    p.add_argument("--ingest-only", action="store_true", help="stop after the ingest (no model, no report)")
    p.add_argument(
        "--update-status",
        action="store_true",
        help="also write each matching ConsumerGroup's status.report (server-side apply, field manager "
        "vigil-report; needs list on consumergroups and patch on consumergroups/status). A failure to list or "
        "apply fails the run (exit 1), after report.html and summary.json are written",
    )
    p.add_argument(
        "--kubeconfig",
        type=Path,
        default=None,
        metavar="PATH",
        help="with --update-status: the kubeconfig (default: in-cluster, else $KUBECONFIG or ~/.kube/config)",
    )
    p.add_argument(
        "--namespace",
        default=None,
        metavar="NS",
        help="with --update-status: only ConsumerGroups in this namespace (default: all namespaces)",
    )
    p.add_argument(
        "--lock-stale-after",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help=f"a run skips while another holds <out>/{run_lock.LOCK_NAME}; a lock older than this is a killed run's "
        "and is taken over: the longest a run may take (the chart passes its activeDeadlineSeconds; default: 3600)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="print the traceback of a failure")
    return p


def _spark_conf(value: str) -> tuple[str, str]:
    key, sep, setting = value.partition("=")
    if not sep or not key.strip() or key != key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (a Spark property), got {value!r}")
    return key, setting


def _location(value: str) -> Location:
    try:
        return Location.of(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


_SECRET: Final = re.compile(r'(password=)("(?:[^"\\]|\\.)*"|\S+)', re.IGNORECASE)


def redact(text: str) -> str:
    """`text` with every `password=...` value masked (Spark quotes the Kafka client's JAAS line in its errors)."""
    return _SECRET.sub(r"\1***", text)


def say(line: str) -> None:
    """One progress or error line on stderr."""
    print(f"{PROG}: {line}", file=sys.stderr, flush=True)


def check_args(args: argparse.Namespace) -> None:
    if not CLUSTER_NAME.match(args.cluster):
        raise UsageError(f"--cluster: expected letters, digits, '.', '_' or '-' (at most 100), got {args.cluster!r}")
    if args.max_records_per_batch is not None and args.max_records_per_batch < 1:
        raise UsageError(f"--max-records-per-batch: expected a positive number, got {args.max_records_per_batch}")
    if args.connect_timeout <= 0:
        raise UsageError(f"--connect-timeout: expected a positive number of seconds, got {args.connect_timeout}")
    if args.lock_stale_after <= 0:
        raise UsageError(f"--lock-stale-after: expected a positive number of seconds, got {args.lock_stale_after}")
    for flag in ("kubeconfig", "namespace"):
        if getattr(args, flag) is not None and not args.update_status:
            raise UsageError(f"--{flag}: only with --update-status")


def default_jars(env: Mapping[str, str]) -> str | None:
    """`$VIGIL_SPARK_JARS` (the report image sets it; a development checkout's tools set it to the jars cache `make
    setup` fills), else none: Spark's own classpath decides. Never a development cache found behind the user's back:
    `vigil_spark` does not know about `vigil_dev`."""
    from vigil_spark import session  # noqa: PLC0415 - keeps pyspark out of `--help`

    return env.get(session.JARS_ENV) or None


def _quiet_jvm_options() -> list[str]:
    """Driver JVM options for the session this run starts: log4j at ERROR while it starts (Spark's default
    profile prints its banner and a few WARN lines on every start, noise for a CronJob's log)."""
    config = Path(tempfile.gettempdir()) / f"vigil-report-log4j2-{os.getuid()}.properties"
    try:
        config.write_text(_QUIET_LOG4J)
    except OSError:
        return []  # Spark's own logging: nothing lost but quiet
    return [f"-Dlog4j2.configurationFile=file:{config}"]


def _master(args: argparse.Namespace, env: Mapping[str, str]) -> str:
    if args.master:
        return str(args.master)
    if env.get(SPARK_SUBMIT_ENV):
        from pyspark import SparkConf  # noqa: PLC0415

        return str(SparkConf().get("spark.master", "local[*]"))
    return "local[*]"


def _start_spark(args: argparse.Namespace, env: Mapping[str, str]) -> tuple["SparkSession", bool]:
    """The session and whether this run started it (a caller's session is reused and left running)."""
    from pyspark.sql import SparkSession  # noqa: PLC0415 - keeps pyspark out of `--help`

    from vigil_spark import session  # noqa: PLC0415
    from vigil_spark.decode import sql  # noqa: PLC0415

    under_submit = bool(env.get(SPARK_SUBMIT_ENV))
    jars = args.jars if args.jars is not None else (None if under_submit else default_jars(env))
    master = _master(args, env)
    if master.startswith("local") and not env.get(PYTHON_ENV):
        # local Python workers must import vigil_spark (the decoders run in them): use this interpreter, not
        # whatever `python3` is first on PATH
        os.environ[PYTHON_ENV] = sys.executable
    started = time.monotonic()
    existing = SparkSession.getActiveSession()
    quiet = existing is None and not under_submit and not args.verbose and not env.get(SUBMIT_ARGS_ENV)
    spark = session.build(
        master, jars_dir=jars, java_options=_quiet_jvm_options() if quiet else (), conf=dict(args.conf)
    )
    if existing is None and not args.verbose:
        spark.sparkContext.setLogLevel("OFF")  # failures are reported as one line; --verbose shows Spark's log
    say(f"spark {spark.version} on {master} started in {time.monotonic() - started:.1f}s")
    if sql.readers_for(spark) is not sql.JVM:
        say("warning: vigil's byte readers jar is not on the classpath: offset commits decode in pure SQL, about 3x "
            "slower (build it: python -m vigil_spark.jvm DIR, and add DIR to --jars)")  # fmt: skip
    return spark, existing is None


def _broker_logs(spark: "SparkSession", args: argparse.Namespace, tables_dir: Location) -> None:
    """The broker logs the globs match, parsed into tables_dir/broker_log (replaced: the files are the history)."""
    from vigil_spark.parse import broker_log  # noqa: PLC0415 - keeps pyspark out of `--help`
    from vigil_spark.sources import broker_logs  # noqa: PLC0415

    started = time.monotonic()
    fmt = broker_log.LogFormat(timezone=args.broker_log_timezone)
    if args.broker_log_pattern:
        fmt = broker_log.LogFormat(line_pattern=args.broker_log_pattern, timezone=args.broker_log_timezone)
    try:
        broker_log.check_format(fmt)
    except ValueError as exc:
        raise UsageError(f"--broker-log-{str(exc).replace('line_pattern', 'pattern')}") from None
    files = broker_logs.expand(args.broker_logs)
    frame = broker_logs.read(spark, args.broker_logs, cluster=args.cluster, fmt=fmt).cache()
    frame.write.mode("overwrite").parquet(str(tables_dir / "broker_log"))
    events, unparsed = frame.count(), broker_logs.unparsed_count(frame)
    frame.unpersist()
    say(f"broker logs: {len(files)} file(s), {events} coordinator lines ({unparsed} not understood) in"
        f" {time.monotonic() - started:.1f}s")  # fmt: skip


def _model(spark: "SparkSession", args: argparse.Namespace, tables_dir: Location) -> "Summaries | None":
    """The model and outputs; the summaries and their report time (None when there is no model)."""
    if args.ingest_only:
        say("model: skipped (--ingest-only)")
    elif importlib.util.find_spec(MODEL_MODULE) is None:
        say(f"model: skipped ({MODEL_MODULE} is not installed yet)")
    else:
        started = time.monotonic()
        from vigil_spark import session  # noqa: PLC0415 - keeps pyspark out of `--help`

        fitted = session.fit_shuffle_partitions(spark)
        if fitted is not None:
            say(f"model: {fitted} shuffle partitions (the cluster's cores)")
        model = importlib.import_module(MODEL_MODULE)
        model.build(spark, tables_dir, args.out)
        say(f"model: done in {time.monotonic() - started:.1f}s ({args.out})")
        return _outputs(spark, args.out)
    return None


def _outputs(spark: "SparkSession", out: Location) -> "Summaries":
    """report.html and summary.json beside the model (through the same filesystem layer as Spark's files), and the
    short summary on stdout."""
    from vigil_spark.outputs import html, summary  # noqa: PLC0415 - keeps pyspark out of `--help`

    def rows(name: str) -> list[dict[str, Any]]:
        where = out / "model" / name / "parquet"
        if not where.exists(spark):
            return []
        return [{k: _aware(v) for k, v in r.asDict().items()} for r in spark.read.parquet(str(where)).collect()]

    now = datetime.now(UTC)
    rebalances, members, stalls = rows("rebalances"), rows("members"), rows("stalls")
    summaries = summary.summarize(rebalances, now)
    page = html.render(now, summaries, rebalances, members, stalls, prevented=rows("prevented"))
    (out / "report.html").write_text(spark, page)
    (out / "summary.json").write_text(spark, json.dumps(summary.as_json(summaries, now), indent=2, default=str) + "\n")
    print(summary.text(summaries, now), flush=True)
    say(f"report: {out / 'report.html'}, {out / 'summary.json'} ({len(summaries)} group(s))")
    return summaries, now


def _kube(args: argparse.Namespace, env: Mapping[str, str], conn: KafkaConnection) -> "KubeStatus | None":
    """With --update-status: the apiserver and the Kafka cluster's identity, checked before Spark starts (a wrong
    kubeconfig or missing RBAC fails in seconds, not after the job)."""
    if not args.update_status:
        return None
    if args.ingest_only:
        say("kubernetes: skipped (--ingest-only: no summaries to write)")
        return None
    from vigil_spark.outputs import status  # noqa: PLC0415

    started = time.monotonic()
    try:
        writer = status.Writer.connect(args.kubeconfig, env, args.namespace, timeout=args.connect_timeout)
    except status.KubeConfigError as exc:
        raise UsageError(str(exc)) from None
    try:
        targets = writer.targets()
        found = len(targets)
        cluster = status.KafkaCluster(
            name=args.cluster,
            cluster_id=status.kafka_cluster_id(conn, timeout=args.connect_timeout),
            bootstrap=status.addresses(conn.bootstrap_servers),
        )
        writer.check_patch(t.namespace for t in targets if status.same_cluster(t, cluster))
    except BaseException:
        writer.close()
        raise
    say(f"kubernetes at {writer.server}: {found} ConsumerGroup(s) in {writer.scope}; Kafka cluster id"
        f" {cluster.cluster_id or 'not given'} ({time.monotonic() - started:.1f}s)")  # fmt: skip
    return writer, cluster


def _update_status(kube: "KubeStatus", summaries: "Summaries") -> None:
    """Each matching ConsumerGroup's status.report (the CRs are listed again: the job may have run for long)."""
    from vigil_spark.outputs import status  # noqa: PLC0415

    writer, cluster = kube
    started = time.monotonic()
    done = status.plan(summaries[0], writer.targets(), cluster, summaries[1])
    applied, gone = status.write(writer, done.updates)
    notes = [f"{len(done.without_cr)} group(s) without a matching ConsumerGroup"]
    if done.other_cluster:
        notes.append(f"{len(done.other_cluster)} ConsumerGroup(s) of another cluster: {', '.join(done.other_cluster)}")
    if gone:
        notes.append(f"{len(gone)} deleted meanwhile: {', '.join(gone)}")
    say(f"status: report of {applied} ConsumerGroup(s) applied for {done.summarized} group(s) of cluster"
        f" {cluster.name} ({'; '.join(notes)}) in {time.monotonic() - started:.1f}s")  # fmt: skip


def _aware(value: Any) -> Any:
    """Spark hands timestamps to Python as naive local times: make them aware (UTC)."""
    return value.astimezone(UTC) if isinstance(value, datetime) and value.tzinfo is None else value


def run(args: argparse.Namespace, env: Mapping[str, str]) -> None:
    """The stages; raises on failure (main turns that into one line and an exit code)."""
    from vigil_spark.sources import kafka  # noqa: PLC0415 - keeps pyspark out of `--help`

    check_args(args)
    try:
        conn = KafkaConnection.from_env(env)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None

    started = time.monotonic()
    offsets_partitions = kafka.partitions(conn, OFFSETS_TOPIC, timeout=args.connect_timeout)
    events_partitions = kafka.partitions(conn, args.events_topic, timeout=args.connect_timeout)
    found = {t: f"{len(p)} partitions" if p else "not found" for t, p in
             ((OFFSETS_TOPIC, offsets_partitions), (args.events_topic, events_partitions))}  # fmt: skip
    topics = ", ".join(f"{t} {state}" for t, state in found.items())
    say(f"cluster {args.cluster} at {conn.bootstrap_servers}: {topics} ({time.monotonic() - started:.1f}s)")
    kube = _kube(args, env, conn)
    try:
        summaries = _spark_stages(args, env, conn, offsets_partitions, events_partitions)
        if kube is not None:
            if summaries is None:
                say("status: skipped (no model, no summaries)")
            else:
                _update_status(kube, summaries)
    finally:
        if kube is not None:
            kube[0].close()


def _spark_stages(
    args: argparse.Namespace,
    env: Mapping[str, str],
    conn: KafkaConnection,
    offsets_partitions: list[int],
    events_partitions: list[int],
) -> "Summaries | None":
    """Spark: the ingest, the model and the outputs; the summaries (None without a model)."""
    from vigil_spark import tables  # noqa: PLC0415 - keeps pyspark out of `--help`
    from vigil_spark.ingest import stream  # noqa: PLC0415

    out: Location = args.out
    tables_dir = out / "tables"
    checkpoints: Location = args.checkpoint or out / "checkpoints"
    spark, owned = _start_spark(args, env)
    lock_file = out / run_lock.LOCK_NAME
    lock: run_lock.Holder | None = None
    try:
        out.mkdirs(spark)
        lock = _take_lock(spark, lock_file, timedelta(seconds=args.lock_stale_after))
        if offsets_partitions:
            stage = stream.ingest_offsets(
                spark, conn, partitions=offsets_partitions, tables_dir=tables_dir, checkpoints=checkpoints,
                cluster=args.cluster, group_id=group_id(args), max_records_per_batch=args.max_records_per_batch,
            )  # fmt: skip
        else:
            stage = stream.Stage(OFFSETS_TOPIC, skipped="topic not found: no group has committed on this cluster yet")
        say(stream.describe(stage))
        stage = stream.ingest_events(
            spark, conn, topic=args.events_topic, partitions=events_partitions, tables_dir=tables_dir,
            checkpoints=checkpoints, cluster=args.cluster, group_id=group_id(args),
            max_records_per_batch=args.max_records_per_batch,
        )  # fmt: skip
        say(stream.describe(stage))
        if args.broker_logs:
            _broker_logs(spark, args, tables_dir)
        totals = {name: tables.read(spark, tables_dir, name).count() for name in tables.SCHEMAS}
        say("tables: " + ", ".join(f"{name} {count}" for name, count in totals.items()) + f" rows in {tables_dir}")
        return _model(spark, args, tables_dir)
    finally:
        if lock is not None:
            _release_lock(spark, lock_file, lock)
        if owned:  # stop only a session this run started (tests and notebooks keep theirs)
            spark.stop()


def _take_lock(spark: "SparkSession", where: Location, stale_after: timedelta) -> run_lock.Holder:
    """This run's hold on the output, or OutputBusyError while another run's lock is fresh."""
    mine = run_lock.Holder(f"{os.environ.get('HOSTNAME') or platform.node()} pid {os.getpid()}", datetime.now(UTC))
    if where.create_new(spark, mine.encode()):
        return mine
    holder = run_lock.decode(where.read_text(spark) or "")
    now = datetime.now(UTC)
    if holder is not None and not run_lock.is_stale(holder, now, stale_after):
        raise OutputBusyError(run_lock.busy(str(where), holder, now, stale_after))
    held = f"{holder.who} since {holder.since:%Y-%m-%dT%H:%M:%SZ}" if holder else "an unreadable lock"
    say(f"lock: taking over {where} from {held} (older than --lock-stale-after: a run that was killed)")
    where.write_text(spark, mine.encode())
    return mine


def _release_lock(spark: "SparkSession", where: Location, mine: run_lock.Holder) -> None:
    """Delete the lock if it is still this run's (a run that took it over after a stale-after keeps it). Never
    raises: a run's own failure, not the lock's, is the one line it ends with."""
    try:
        if run_lock.decode(where.read_text(spark) or "") == mine:
            where.delete(spark)
    except Exception as exc:  # noqa: BLE001 - e.g. the JVM gone with the failure being reported
        say(
            f"lock: {where} not released ({failure.one_line(exc)}): the next run takes it over after --lock-stale-after"
        )


def group_id(args: argparse.Namespace) -> str:
    """`--group-id`, else `vigil-report-<cluster>`."""
    return str(args.group_id) if args.group_id else f"{GROUP_ID_PREFIX}-{args.cluster}"


def describe_error(exc: BaseException) -> str:
    """One line for any failure (`failure.one_line`: why, not which call), secrets masked, capped."""
    first = redact(failure.one_line(exc))
    return first if len(first) <= 400 else first[:397] + "..."


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    environ = os.environ if env is None else env
    try:
        run(args, environ)
    except UsageError as exc:
        say(str(exc))
        return 2
    except OutputBusyError as exc:
        say(str(exc))
        return 0
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    except Exception as exc:  # noqa: BLE001 - the contract is one line per failure, whatever failed
        if args.verbose:
            traceback.print_exc()
        say(describe_error(exc))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
