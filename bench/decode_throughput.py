"""Decoding `__consumer_offsets`: the Spark SQL path against a single-process `struct` baseline, same input.

Input: N records in the real binary format (OffsetCommitKey type 1 with OffsetCommitValue v3 as 3.9/4.0 brokers
write it and v4 as 4.1 does, by coordinator partition; a few thousand GroupMetadata records, v3, whose members
carry librdkafka's consumer-protocol bytes; a few offset tombstones) as Parquet with the Kafka source's columns
(key, value, partition, offset, timestamp). Generated once per (N, seed, world) into `--cache-dir`; the generation
time is reported, never timed as part of either path.

Both paths compute the same aggregate: per (group, topic, partition) the clean commits, their max offset and max
commit timestamp, tombstones and problems; per group the GroupMetadata records, distinct and max generation.

- SQL path: `vigil_spark.decode.sql.offset_commits` (the project's decoder, JVM only) for the commits and
  `vigil_spark.ingest.offsets.other_records` → `group_metadata` (key-type filter, then the Python decoder in a
  UDF, as the real job does) for generations; once per set of integer readers (`--readers`: vigil's JVM byte
  readers, the pure-SQL `conv` fallback). Compute = executing both queries, both aggregates collected. Apart
  from it: Spark start-up (the session, then untimed warm-up runs of the same pipeline per reader set, so
  the JIT has compiled the hot code) and planning (building the query in Python: fixed, whatever the input).
- Baseline (the stock way): one Python process, pyarrow batches, precompiled `struct.Struct.unpack_from` for
  the common offset commit (everything else, GroupMetadata included, goes to `records.decode_record`).

Also measured, after the warm-up: what a run costs whatever its input — a trivial Spark action, and the same
pipeline on 0 records — and the driver JVM's peak RSS during each timed run (VmHWM, reset before it through
`/proc/<pid>/clear_refs`; with a local master the driver runs every task).

Issue #21's targets, printed as ratios: at the largest N (100M) ≥ 1.5 M records/s with the JVM readers, the driver's
peak RSS ≤ 1.5 GB, and time(largest)/time(next) ≤ 11 for a 10× larger input (no super-linear growth); the
aggregate equal to the baseline's at every N. (They replace the old "time per record within ±15 % from 1M to 10M",
which asked a run's fixed cost to be ~0.1 s where one trivial Spark action costs more.)

The run fails loudly if the two aggregates differ. Besides wall time it prints CPU seconds (this process for the
baseline, Spark's JVM for the SQL path) and the load average: on a shared machine the CPU figures are the steadier.

    .venv/bin/python bench/decode_throughput.py [--records 10000000 100000000] [--readers jvm] [--driver-memory 1g]
"""

import argparse
import contextlib
import functools
import os
import random
import struct
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vigil_core.consumer_offsets import records as rec

#: Bump when the generated records change: it is part of the cache file name.
FORMAT = 1
#: `__consumer_offsets` partitions (Kafka's default); even ones are led by 4.1 brokers (v4), odd by 4.0 (v3).
OFFSETS_PARTITIONS = 50
START_MS = 1_795_000_000_000  # 2026-11-18T11:06:40Z, where the record clock starts
ROW_GROUP = 250_000  # Parquet row group (and write chunk): lets Spark split even the 1M file over both cores
TOMBSTONE_PER_ROUND = 0.01  # a commit round that deletes one partition's offset instead of committing it
PARTITION_CHOICES = (1, 3, 6, 12, 24)

Planned = tuple[rec.Key, rec.Value | None, int, int, int]
"""What one generated record is meant to be: key, value (None = tombstone), log partition, log offset, ts ms."""

# -- the encoder: Kafka's wire format written from the schemas (not from the decoders) ------------------------

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_V3_HEAD = struct.Struct(">hqih")  # version, offset, leader epoch, metadata length
_V4_HEAD = struct.Struct(">hqi")  # version, offset, leader epoch (then the compact metadata)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _string(s: str) -> bytes:
    b = s.encode()
    return _I16.pack(len(b)) + b


def _nullable_string(s: str | None) -> bytes:
    return _I16.pack(-1) if s is None else _string(s)


def _bytes(b: bytes) -> bytes:
    return _I32.pack(len(b)) + b


def encode_key(key: rec.Key) -> bytes:
    """OffsetCommitKey (type 0/1: group, topic, partition) or GroupMetadataKey (type 2: group)."""
    if isinstance(key, rec.OffsetCommitKey):
        return _I16.pack(key.record_type) + _string(key.group) + _string(key.topic) + _I32.pack(key.partition)
    if isinstance(key, rec.GroupMetadataKey):
        return _I16.pack(2) + _string(key.group)
    raise ValueError(f"not generated: {type(key).__name__}")


def _offset_value(v: rec.OffsetCommitValue) -> bytes:
    meta = v.metadata.encode()
    if v.version == 3:
        return _V3_HEAD.pack(3, v.offset, v.leader_epoch, len(meta)) + meta + _I64.pack(v.commit_timestamp)
    if v.version == 4 and v.topic_id is None:  # flexible: compact string, then an empty tagged-field section
        head = _V4_HEAD.pack(4, v.offset, v.leader_epoch) + _uvarint(len(meta) + 1)
        return head + meta + _I64.pack(v.commit_timestamp) + _uvarint(0)
    raise ValueError(f"not generated: OffsetCommitValue v{v.version} (topic id {v.topic_id!r})")


def _member(m: rec.MemberMetadata) -> bytes:
    return (
        _string(m.member_id)
        + _nullable_string(m.group_instance_id)
        + _string(m.client_id)
        + _string(m.client_host)
        + _I32.pack(m.rebalance_timeout)
        + _I32.pack(m.session_timeout)
        + _bytes(m.subscription)
        + _bytes(m.assignment)
    )


def _group_value(v: rec.GroupMetadataValue) -> bytes:
    if v.version != 3:
        raise ValueError(f"not generated: GroupMetadataValue v{v.version}")
    head = _I16.pack(3) + _string(v.protocol_type) + _I32.pack(v.generation)
    head += _nullable_string(v.protocol) + _nullable_string(v.leader) + _I64.pack(v.current_state_timestamp)
    return head + _I32.pack(len(v.members)) + b"".join(_member(m) for m in v.members)


def encode_value(value: rec.Value) -> bytes:
    """OffsetCommitValue v3/v4 (no tagged topic id) or GroupMetadataValue v3: what 3.9–4.1 brokers write."""
    if isinstance(value, rec.OffsetCommitValue):
        return _offset_value(value)
    if isinstance(value, rec.GroupMetadataValue):
        return _group_value(value)
    raise ValueError(f"not generated: {type(value).__name__}")


def _topic_partitions(tp: rec.TopicPartitions) -> bytes:
    return _string(tp.topic) + _I32.pack(len(tp.partitions)) + b"".join(_I32.pack(p) for p in tp.partitions)


def encode_subscription(s: rec.ConsumerProtocolSubscription) -> bytes:
    """ConsumerProtocolSubscription v3 as librdkafka 2.16 writes it (empty user data and rack, no owned partitions)."""
    if s.version != 3 or s.user_data is None or s.rack_id is None:
        raise ValueError("not generated: only librdkafka's v3 subscription (user data and rack set)")
    topics = _I32.pack(len(s.topics)) + b"".join(_string(t) for t in s.topics)
    owned = _I32.pack(len(s.owned_partitions)) + b"".join(_topic_partitions(tp) for tp in s.owned_partitions)
    return _I16.pack(3) + topics + _bytes(s.user_data) + owned + _I32.pack(s.generation_id) + _string(s.rack_id)


def encode_assignment(a: rec.ConsumerProtocolAssignment) -> bytes:
    """ConsumerProtocolAssignment v0 as librdkafka 2.16 writes it (empty, not null, user data)."""
    if a.version != 0 or a.user_data is None:
        raise ValueError("not generated: only librdkafka's v0 assignment (user data set)")
    parts = _I32.pack(len(a.assigned_partitions)) + b"".join(_topic_partitions(tp) for tp in a.assigned_partitions)
    return _I16.pack(0) + parts + _bytes(a.user_data)


# -- the generated world ------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Group:
    name: str
    keys: list[rec.OffsetCommitKey]  # one per committed partition, reused for every commit (as the bytes are)
    topics: tuple[tuple[str, int], ...]
    log_partition: int
    version: int
    metadata: str
    protocol: str
    offsets: list[int] = field(default_factory=list)
    epochs: list[int] = field(default_factory=list)
    generation: int = 0


def _world(rng: random.Random, groups: int) -> list[_Group]:
    out = []
    for i in range(groups):
        name = f"svc-{i:05d}-{rng.getrandbits(32):08x}"
        topics = tuple((f"topic-{rng.randrange(groups):05d}-t{j}", rng.choice(PARTITION_CHOICES))
                       for j in range(rng.choice((1, 1, 2, 3))))  # fmt: skip
        keys = [rec.OffsetCommitKey(name, t, p, 1) for t, n in topics for p in range(n)]
        log_partition = rng.randrange(OFFSETS_PARTITIONS)
        g = _Group(
            name,
            keys,
            topics,
            log_partition,
            version=4 if log_partition % 2 == 0 else 3,
            metadata="" if rng.random() < 0.9 else f"ckpt-{rng.getrandbits(40):010x}",
            protocol=rng.choice(("range", "cooperative-sticky")),
        )
        g.offsets = [rng.randrange(10**9) for _ in keys]
        g.epochs = [rng.choice((-1, 0, 0, 3, 7)) for _ in keys]
        out.append(g)
    return out


def _generation(rng: random.Random, g: _Group, now: int) -> rec.GroupMetadataValue:
    """The group's next generation: 1–4 members, the partitions dealt round-robin (a Stable group after sync)."""
    g.generation += 1
    size = rng.randint(1, 4)
    clients = [f"{g.name}-c{j}" for j in range(size)]
    ids = [f"{c}-{rng.getrandbits(128):032x}" for c in clients]
    sub = encode_subscription(rec.ConsumerProtocolSubscription(3, tuple(t for t, _ in g.topics), b"", (), -1, ""))
    dealt: list[list[tuple[str, int]]] = [[] for _ in range(size)]
    for i, k in enumerate(g.keys):
        dealt[i % size].append((k.topic, k.partition))
    members = []
    for j in range(size):
        by_topic = tuple(rec.TopicPartitions(t, tuple(p for tt, p in dealt[j] if tt == t)) for t, _ in g.topics)
        assigned = tuple(tp for tp in by_topic if tp.partitions)
        asg = encode_assignment(rec.ConsumerProtocolAssignment(0, assigned, b""))
        host = f"/10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        members.append(rec.MemberMetadata(ids[j], clients[j], host, 45000, sub, asg, None, 300000))
    return rec.GroupMetadataValue(3, "consumer", g.generation, g.protocol, ids[0], tuple(members), now)


def plan(n: int, seed: int, groups: int, generations: int) -> Iterator[Planned]:
    """`n` records as a busy cluster writes them: commit rounds (every partition of one group, one timestamp),
    a GroupMetadata record before the round every `n // (generations + 1)` records, now and then a tombstone."""
    if n <= 0:
        return  # an empty input: the SQL path's fixed cost per run
    rng = random.Random(seed)
    world = _world(rng, groups)
    every = n // (generations + 1) if generations else n + 1
    next_gm, gm_left = every, generations
    log_offsets = [0] * OFFSETS_PARTITIONS
    clock, emitted = START_MS, 0
    while True:
        g = world[rng.randrange(groups)]
        clock += rng.randrange(1, 40)
        lp = g.log_partition
        if gm_left and emitted >= next_gm:
            yield rec.GroupMetadataKey(g.name), _generation(rng, g, clock), lp, log_offsets[lp], clock
            log_offsets[lp] += 1
            emitted, next_gm, gm_left = emitted + 1, next_gm + every, gm_left - 1
            if emitted == n:
                return
        deleted = rng.randrange(len(g.keys)) if rng.random() < TOMBSTONE_PER_ROUND else -1
        for i, key in enumerate(g.keys):
            value = None
            if i != deleted:
                g.offsets[i] += rng.randrange(500)
                value = rec.OffsetCommitValue(g.version, g.offsets[i], g.metadata, clock, g.epochs[i])
            yield key, value, lp, log_offsets[lp], clock
            log_offsets[lp] += 1
            emitted += 1
            if emitted == n:
                return


def encoded(planned: Iterator[Planned]) -> Iterator[tuple[bytes, bytes | None, int, int, int]]:
    """The records as the Kafka source gives them (key and value bytes; each distinct key encoded once)."""
    key_bytes = functools.cache(encode_key)
    for key, value, lp, lo, ts in planned:
        yield key_bytes(key), None if value is None else encode_value(value), lp, lo, ts


# -- the input file -----------------------------------------------------------------------------------------


def ensure_input(cache: Path, n: int, seed: int, groups: int, generations: int) -> tuple[Path, float | None]:
    """The Parquet file of `n` records (generated unless cached) and the generation time (None when cached)."""
    import pyarrow as pa  # type: ignore[import-untyped]  # noqa: PLC0415 - bench-only: its unit test must not need it
    import pyarrow.parquet as pq  # type: ignore[import-untyped]  # noqa: PLC0415

    path = cache / f"decode-n{n}-s{seed}-g{groups}-gen{generations}-f{FORMAT}.parquet"
    if path.exists():
        return path, None
    cache.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("partition", pa.int32()),
                        ("offset", pa.int64()), ("timestamp", pa.timestamp("ms", tz="UTC"))])  # fmt: skip
    started = time.monotonic()
    tmp = path.with_suffix(".tmp")
    with pq.ParquetWriter(tmp, schema) as writer:
        columns: list[list[Any]] = [[], [], [], [], []]
        for row in encoded(plan(n, seed, groups, generations)):
            for column, item in zip(columns, row, strict=True):
                column.append(item)
            if len(columns[0]) == ROW_GROUP:
                writer.write_table(pa.table(columns, schema=schema))
                columns = [[], [], [], [], []]
        if columns[0]:
            writer.write_table(pa.table(columns, schema=schema))
    tmp.rename(path)
    return path, time.monotonic() - started


def _warm_page_cache(path: Path) -> None:
    with path.open("rb") as f:
        while f.read(1 << 24):
            pass


# -- the aggregate both paths compute ---------------------------------------------------------------------

GTP = tuple[str | None, str | None, int | None]


@dataclass(frozen=True)
class Aggregate:
    """Per (group, topic, partition): [commits, max offset, max commit ts, tombstones, problems] (clean commits
    only in the first three); per group: (GroupMetadata records, distinct generations, max generation)."""

    commits: dict[GTP, tuple[int, int | None, int | None, int, int]]
    generations: dict[str, tuple[int, int, int]]

    def differences(self, other: "Aggregate") -> list[str]:
        return _differences("commits", self.commits, other.commits) + _differences(
            "generations", self.generations, other.generations
        )


def _differences(name: str, mine: Mapping[Any, object], theirs: Mapping[Any, object]) -> list[str]:
    keys = sorted(mine.keys() | theirs.keys(), key=repr)
    return [f"{name} {k}: {mine.get(k)} != {theirs.get(k)}" for k in keys if mine.get(k) != theirs.get(k)]


# -- the baseline: one process, pyarrow batches, precompiled struct -------------------------------------------

_LEN = _I16.unpack_from
_PART = _I32.unpack_from
_TS = _I64.unpack_from
_V3 = _V3_HEAD.unpack_from
_V4 = struct.Struct(">hqiB").unpack_from  # ... and the first byte of the compact metadata length


_LOW = -(1 << 64)  # below every int64: "no commit yet" in a running max


def _commit_slot(commits: dict[GTP, list[int]], gtp: GTP) -> list[int]:
    slot = commits.get(gtp)
    if slot is None:
        slot = commits[gtp] = [0, _LOW, _LOW, 0, 0]
    return slot


def _slow_record(key: bytes | None, value: bytes | None, commits: dict[GTP, list[int]],
                 generations: dict[str, list[int]]) -> None:  # fmt: skip
    """Whatever the inline path does not take (GroupMetadata, tombstones, other versions, damage): `records`."""
    record_type = _LEN(key, 0)[0] if key is not None and len(key) >= 2 else None
    k, v = rec.decode_record(key, value)
    if isinstance(k, rec.GroupMetadataKey) and isinstance(v, rec.GroupMetadataValue):
        generations.setdefault(k.group, []).append(v.generation)
    if record_type not in (0, 1):  # the SQL path's split: only key types 0/1 are offset commits
        return
    slot = _commit_slot(commits, (k.group, k.topic, k.partition) if isinstance(k, rec.OffsetCommitKey) else
                        (None, None, None))  # fmt: skip
    if isinstance(k, rec.OffsetCommitKey) and isinstance(v, rec.OffsetCommitValue):
        slot[0] += 1
        slot[1] = max(slot[1], v.offset)
        slot[2] = max(slot[2], v.commit_timestamp)
    elif isinstance(k, rec.OffsetCommitKey) and isinstance(v, rec.Tombstone):
        slot[3] += 1
    else:
        slot[4] += 1


def aggregate_batch(keys: list[Any], values: list[Any], commits: dict[GTP, list[int]],
               generations: dict[str, list[int]]) -> None:  # fmt: skip
    """One batch. The common record (key type 1, value v3 or tagless v4) is decoded inline with precompiled
    structs and checked as strictly as the decoders do (every length must add up to the record's size)."""
    for key, value in zip(keys, values, strict=True):
        try:
            if key[1] == 1 and key[0] == 0 and value[0] == 0:  # a null value raises TypeError: slow path
                glen = _LEN(key, 2)[0]
                tpos = 4 + glen
                tlen = _LEN(key, tpos)[0]
                ppos = tpos + 2 + tlen
                version = value[1]
                ok = glen >= 0 and tlen >= 0 and ppos + 4 == len(key)
                if version == 4:
                    _, offset, _, mlen1 = _V4(value)
                    end = 14 + mlen1
                    ok = ok and 0 < mlen1 < 0x80 and end + 9 == len(value) and value[end + 8] == 0
                elif version == 3:
                    _, offset, _, mlen = _V3(value)
                    end = 16 + mlen
                    ok = ok and mlen >= 0 and end + 8 == len(value)
                else:
                    ok = False
                if ok:
                    gtp = (key[4:tpos].decode("utf-8", "replace"), key[tpos + 2 : ppos].decode("utf-8", "replace"),
                           _PART(key, ppos)[0])  # fmt: skip
                    ts = _TS(value, end)[0]
                    slot = commits.get(gtp)
                    if slot is None:
                        commits[gtp] = [1, offset, ts, 0, 0]
                    else:
                        slot[0] += 1
                        if offset > slot[1]:  # noqa: PLR1730 - cheaper than a max() call, per record
                            slot[1] = offset
                        if ts > slot[2]:  # noqa: PLR1730
                            slot[2] = ts
                    continue
        except (TypeError, IndexError, struct.error):
            pass
        _slow_record(key, value, commits, generations)


def baseline(path: Path) -> Aggregate:
    """Read `path` in pyarrow batches and aggregate in this process, one record at a time."""
    import pyarrow.parquet as pq  # noqa: PLC0415 - bench-only (see ensure_input)

    commits: dict[GTP, list[int]] = {}
    generations: dict[str, list[int]] = {}
    for batch in pq.ParquetFile(path).iter_batches(batch_size=65536, columns=["key", "value"]):
        aggregate_batch(batch.column(0).to_pylist(), batch.column(1).to_pylist(), commits, generations)
    return finish(commits, generations)


def finish(commits: dict[GTP, list[int]], generations: dict[str, list[int]]) -> Aggregate:
    """The running state of `aggregate_batch` as an `Aggregate`."""

    def known(x: int) -> int | None:
        return None if x == _LOW else x

    return Aggregate(
        {k: (a[0], known(a[1]), known(a[2]), a[3], a[4]) for k, a in commits.items()},
        {g: (len(gens), len(set(gens)), max(gens)) for g, gens in generations.items()},
    )


# -- the SQL path -------------------------------------------------------------------------------------------


def sql_path(spark: Any, path: Path, readers: str) -> tuple[Aggregate, float, float, float]:
    """Both aggregates through the project's decoders: (aggregate, plan, commits and generations seconds).

    `readers` names the decoder's integer readers (`vigil_spark.decode.sql.Readers`: "jvm" or "conv").
    """
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - Spark is only needed by this path

    from vigil_spark.decode import sql  # noqa: PLC0415
    from vigil_spark.ingest import offsets  # noqa: PLC0415

    chosen = {r.name: r for r in (sql.JVM, sql.CONV)}[readers]
    started = time.monotonic()
    typed = sql.with_record_type(spark.read.parquet(str(path)), chosen)
    decoded = sql.offset_commits(typed, chosen)
    good = F.col("problem").isNull() & ~F.col("tombstone")
    commits = decoded.groupBy("group", "topic", "partition").agg(
        F.count_if(good).alias("commits"),
        F.max(F.when(good, F.col("committed_offset"))).alias("max_offset"),
        F.max(F.when(good, F.col("commit_timestamp"))).alias("max_commit_ts"),
        F.count_if(F.col("tombstone")).alias("tombstones"),
        F.count_if(F.col("problem").isNotNull()).alias("problems"),
    )
    other = offsets.other_records(typed).persist()  # as `offsets.split` does in the job: one UDF call per record
    gm = offsets.group_metadata(other, "bench").where(~F.col("tombstone"))
    gens = gm.groupBy("group").agg(
        F.count("*").alias("records"), F.count_distinct("generation").alias("distinct"), F.max("generation")
    )
    planned = time.monotonic()
    commit_rows = commits.collect()
    middle = time.monotonic()
    gen_rows = gens.collect()
    ended = time.monotonic()
    other.unpersist()
    aggregate = Aggregate(
        {(r[0], r[1], r[2]): (r[3], r[4], r[5], r[6], r[7]) for r in commit_rows},
        {r[0]: (r[1], r[2], r[3]) for r in gen_rows},
    )
    return aggregate, planned - started, middle - planned, ended - middle


# -- the run ------------------------------------------------------------------------------------------------

_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int | None) -> float:
    """utime + stime of a process (all its threads), from /proc; 0 when there is no such process."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _jvm_pid() -> int | None:
    """Spark's JVM: this process's `java` child (spark-submit execs it)."""
    me = str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            comm, rest = stat.read_text().rsplit(")", 1)
        except OSError:
            continue
        if comm.endswith("(java") and rest.split()[1] == me:
            return int(stat.parent.name)
    return None


def _load() -> float:
    """The 1-minute load average: other work on the machine (2 cores) is part of every figure."""
    return float(Path("/proc/loadavg").read_text().split()[0])


def _reset_peak_rss(pid: int | None) -> None:
    """Start a process's VmHWM afresh (Linux: 5 into clear_refs), so the next peak is the next run's own."""
    if pid is not None:
        with contextlib.suppress(OSError):
            Path(f"/proc/{pid}/clear_refs").write_text("5")


def _peak_rss_mb(pid: int | None) -> float:
    """VmHWM of a process in MB (0 when unknown)."""
    if pid is None:
        return 0.0
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    line = next((x for x in status.splitlines() if x.startswith("VmHWM:")), "VmHWM: 0 kB")
    return int(line.split()[1]) / 1024


@dataclass(frozen=True)
class Measured:
    wall_s: float
    cpu_s: float
    load: float
    peak_rss_mb: float = 0.0


def _measure(pid: int | None, run: Any) -> tuple[Any, Measured]:
    _reset_peak_rss(pid)
    cpu, started = _cpu_s(pid), time.monotonic()
    out = run()
    return out, Measured(time.monotonic() - started, _cpu_s(pid) - cpu, _load(), _peak_rss_mb(pid))


@dataclass(frozen=True)
class Result:
    n: int
    readers: str
    generated_s: float | None
    baseline: Measured
    sql: Measured
    plan_s: float
    commits_s: float
    generations_s: float
    partitions: int
    groups_with_generations: int

    @property
    def compute_s(self) -> float:
        """Executing both queries: what grows with the input (planning is reported with start-up)."""
        return self.commits_s + self.generations_s


@dataclass(frozen=True)
class FixedCost:
    """What a run costs whatever its input: the floor under the SQL path's time per record at small N."""

    trivial_action_s: float  # median of a warm `spark.range(1).count()`: any Spark action's least cost
    empty_run_s: dict[str, float]  # readers -> median compute of the same pipeline on 0 records


def _median(xs: Sequence[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def fixed_costs(spark: Any, empty: Path, readers: Sequence[str], repeats: int = 5) -> FixedCost:
    """Time a trivial action and the pipeline on an empty input, `repeats` times each (after the warm-up)."""
    trivial = [_measure(None, spark.range(1).count)[1].wall_s for _ in range(repeats)]
    runs: dict[str, float] = {}
    for name in readers:
        computes = []
        for _ in range(repeats):
            aggregate, _plan, commits_s, generations_s = sql_path(spark, empty, name)
            if aggregate.commits or aggregate.generations:
                raise SystemExit(f"0 records ({name}): the SQL path found something in an empty input")
            computes.append(commits_s + generations_s)
        runs[name] = _median(computes)
    return FixedCost(_median(trivial), runs)


#: Issue #21's targets at the largest input.
TARGET_RATE = 1.5e6  # records/s, compute, JVM readers
TARGET_RSS_MB = 1536.0  # the driver's peak RSS
TARGET_GROWTH = 11.0  # time(N)/time(N/10)


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds / 1e6:.2f} M/s"


def report(
    results: Sequence[Result],
    start: Measured,
    warmups: Mapping[str, Sequence[Measured]],
    warmup_n: int,
    fixed: FixedCost,
) -> None:
    warm = "; ".join(f"{name} " + ", ".join(f"{m.wall_s:.1f}" for m in runs) + " s" for name, runs in warmups.items())
    print(f"\nSpark start-up (not in compute): session {start.wall_s:.1f} s; warm-up runs of the same pipeline "
          f"({warmup_n:,} records) per reader set: {warm}\n")  # fmt: skip
    print("| records | readers | baseline (CPU) | baseline rate "
          "| SQL: plan; compute = commits + generations (JVM CPU) | SQL rate | SQL / baseline "
          "| SQL + plan + session start / baseline | driver peak RSS | load avg (baseline, SQL) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        b, q = r.baseline, r.sql
        all_in = r.compute_s + r.plan_s + start.wall_s
        print(f"| {r.n:,} | {r.readers} | {b.wall_s:.1f} s ({b.cpu_s:.1f} s) | {_rate(r.n, b.wall_s)} "
              f"| {r.plan_s:.1f} s; {r.compute_s:.1f} s = {r.commits_s:.1f} + {r.generations_s:.1f} ({q.cpu_s:.0f} s) "
              f"| {_rate(r.n, r.compute_s)} | {b.wall_s / r.compute_s:.2f}× "
              f"| {b.wall_s / all_in:.2f}× | {q.peak_rss_mb:.0f} MB | {b.load:.1f}, {q.load:.1f} |")  # fmt: skip
    for readers in dict.fromkeys(r.readers for r in results):
        mine = [r for r in results if r.readers == readers]
        small, large = min(mine, key=lambda r: r.n), max(mine, key=lambda r: r.n)
        if small.n == large.n:
            continue
        marginal = (large.compute_s - small.compute_s) / (large.n - small.n)
        print(f"\ntime per record, {large.n:,} vs {small.n:,} ({readers}): "
              f"SQL {large.compute_s / large.n / (small.compute_s / small.n):.2f}×, "
              f"baseline {large.baseline.wall_s / large.n / (small.baseline.wall_s / small.n):.2f}×; "
              f"SQL marginal {marginal * 1e6:.2f} µs per record ({1 / marginal / 1e6:.2f} M/s) against "
              f"{small.compute_s / small.n * 1e6:.2f} µs at {small.n:,}")  # fmt: skip
        empty = fixed.empty_run_s[readers]
        growth = large.compute_s / small.compute_s
        print(f"fixed cost per run ({readers}): the same pipeline on 0 records {empty * 1e3:.0f} ms, one trivial "
              f"Spark action {fixed.trivial_action_s * 1e3:.0f} ms")  # fmt: skip
        print(f"targets ({readers}, {large.n:,} records): rate {_rate(large.n, large.compute_s)} = "
              f"{large.n / large.compute_s / TARGET_RATE:.2f}× the {TARGET_RATE / 1e6:.1f} M/s target; driver peak RSS "
              f"{large.sql.peak_rss_mb:.0f} MB = {large.sql.peak_rss_mb / TARGET_RSS_MB:.2f}× the "
              f"{TARGET_RSS_MB / 1024:.1f} GB bound; time({large.n:,})/time({small.n:,}) {growth:.2f} for "
              f"{large.n / small.n:.0f}× the input = {growth / (TARGET_GROWTH * large.n / small.n / 10):.2f}× the "
              f"bound {TARGET_GROWTH * large.n / small.n / 10:.1f}")  # fmt: skip
    for r in results:
        if r.readers == results[0].readers:
            print(f"# {r.n:,}: aggregates equal ({r.partitions:,} group/topic/partitions, "
                  f"{r.groups_with_generations:,} groups with generations)")  # fmt: skip


def _positive(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number of records, got {text}")
    return n


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=_positive, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--groups", type=int, default=2000, help="consumer groups committing")
    parser.add_argument("--generations", type=int, default=3000, help="GroupMetadata records per input")
    parser.add_argument(
        "--warmup-records",
        type=_positive,
        default=1_000_000,
        help="the input of the untimed warm-up runs (per reader set), so the JIT has compiled the hot code",
    )
    parser.add_argument(
        "--warmup-runs",
        type=_positive,
        default=4,
        help="warm-up runs per reader set (the time per run settles after about four on the 1M input)",
    )
    parser.add_argument(
        "--readers",
        nargs="+",
        choices=["jvm", "conv"],
        default=["jvm", "conv"],
        help="the decoder's integer readers: vigil's JVM byte readers, the pure-SQL conv fallback",
    )
    parser.add_argument("--master", default="local[*]")
    parser.add_argument(
        "--driver-memory",
        help="the driver JVM's heap (default: the report's own, `vigil_spark.session.build`'s: what `vigil report` "
        "runs with unless told otherwise)",
    )
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "vigil" / "bench")
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Spark's workers must import vigil_spark

    inputs = {}
    for n in dict.fromkeys([0, args.warmup_records, *args.records]):
        print(f"# input: {n:,} records ...", flush=True)
        inputs[n] = ensure_input(args.cache_dir, n, args.seed, args.groups, args.generations)
        if inputs[n][1] is not None:
            print(f"#   generated in {inputs[n][1]:.0f} s (not timed as part of either path)", flush=True)
    baselines = {}
    for n in args.records:
        path = inputs[n][0]
        _warm_page_cache(path)
        print(f"# baseline: {n:,} records ...", flush=True)
        baselines[n] = _measure(os.getpid(), functools.partial(baseline, path))

    from vigil_dev.spark import install  # noqa: PLC0415 - Spark is only needed by this path
    from vigil_spark import session  # noqa: PLC0415

    print("# Spark: session and warm-up ...", flush=True)
    jars = install.ensure_readers(progress=lambda line: print(f"# {line}", flush=True)).parent
    memory = {} if args.driver_memory is None else {"driver_memory": args.driver_memory}
    build = functools.partial(session.build, args.master, jars_dir=jars, app_name="vigil-bench-decode", **memory)
    spark, start = _measure(None, build)
    jvm = _jvm_pid()
    try:
        warmups = {}
        for readers in args.readers:
            run = functools.partial(sql_path, spark, inputs[args.warmup_records][0], readers)
            warmups[readers] = [_measure(jvm, run)[1] for _ in range(args.warmup_runs)]
        print("# fixed cost per run: a trivial action, the pipeline on 0 records ...", flush=True)
        fixed = fixed_costs(spark, inputs[0][0], args.readers)
        results = []
        for n in args.records:
            path = inputs[n][0]
            for readers in args.readers:
                _warm_page_cache(path)
                print(f"# SQL path ({readers} readers): {n:,} records ...", flush=True)
                run = functools.partial(sql_path, spark, path, readers)
                (aggregate, plan_s, commits_s, generations_s), measured = _measure(jvm, run)
                expected, base = baselines[n]
                differences = aggregate.differences(expected)
                if differences:
                    raise SystemExit(f"{n:,} records ({readers}): the SQL path and the baseline disagree "
                                     f"({len(differences)} keys):\n  " + "\n  ".join(differences[:20]))  # fmt: skip
                results.append(Result(n, readers, inputs[n][1], base, measured, plan_s, commits_s, generations_s,
                                      len(expected.commits), len(expected.generations)))  # fmt: skip
    finally:
        spark.stop()
    report(results, start, warmups, args.warmup_records, fixed)


if __name__ == "__main__":
    main()
