"""The decode benchmark's input is the real binary format, and its baseline aggregates what the records say.

`bench/decode_throughput.py` writes its records with its own encoder: here that encoder reproduces, byte for
byte, records a Kafka 4.1.1 broker wrote (tests/unit/fixtures/consumer_offsets), and every generated record
decodes — with the project's pure decoder — to exactly the record the generator meant to write.
"""

import importlib.util
import json
import os
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from vigil_core.consumer_offsets import records as rec

ROOT = Path(__file__).resolve().parents[3]
REAL = json.loads((ROOT / "tests/unit/fixtures/consumer_offsets/real_records.json").read_text())["records"]


def _bench() -> ModuleType:
    """bench/ is not a package: load the script as a module (it imports neither Spark nor pyarrow at the top)."""
    spec = importlib.util.spec_from_file_location("_vigil_bench_decode", ROOT / "bench/decode_throughput.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class body runs
    spec.loader.exec_module(module)
    return module


bench = _bench()


def _classic(record: dict[str, str]) -> bool:
    return record["key_type"] in ("OffsetCommitKey", "GroupMetadataKey")


@pytest.mark.parametrize("record", [r for r in REAL if _classic(r)], ids=lambda r: r["what"])
def test_encoder_writes_what_a_real_broker_wrote(record: dict[str, str]) -> None:
    key, value = bytes.fromhex(record["key"]), bytes.fromhex(record["value"])
    k, v = rec.decode_record(key, value)
    assert bench.encode_key(k) == key
    assert bench.encode_value(v) == value
    if isinstance(v, rec.GroupMetadataValue):  # librdkafka's consumer-protocol bytes inside the members
        for m in v.members:
            assert bench.encode_subscription(m.consumer_subscription()) == m.subscription
            assert bench.encode_assignment(m.consumer_assignment()) == m.assignment


def test_the_real_records_cover_what_the_benchmark_writes() -> None:
    """The byte-for-byte check above covers v4 commits and v3 group metadata with members (Kafka 4.1.1)."""
    decoded = [rec.decode_record(bytes.fromhex(r["key"]), bytes.fromhex(r["value"]))[1] for r in REAL if _classic(r)]
    assert {v.version for v in decoded if isinstance(v, rec.OffsetCommitValue)} == {4}
    assert any(isinstance(v, rec.GroupMetadataValue) and v.version == 3 and v.members for v in decoded)


def test_offset_commit_value_v3_bytes_as_3_9_and_4_0_write_them() -> None:
    # no real v3 record in the fixtures: written out by hand from OffsetCommitValue.json
    # version 3, offset 42, leader epoch 7, metadata "md", commit ts 1000
    value = bytes.fromhex("0003000000000000002a00000007" + "00026d64" + "00000000000003e8")
    assert bench.encode_value(rec.OffsetCommitValue(3, 42, "md", 1000, 7)) == value


def test_versions_the_benchmark_does_not_write_are_refused() -> None:
    with pytest.raises(ValueError, match="not generated"):
        bench.encode_value(rec.OffsetCommitValue(1, 42, "", 1000, expire_timestamp=5))
    with pytest.raises(ValueError, match="not generated"):
        bench.encode_key(rec.ConsumerGroupMetadataKey("g"))


N, SEED, GROUPS, GENERATIONS = 6000, 7, 40, 25


def test_generated_records_decode_to_what_was_meant() -> None:
    planned = list(bench.plan(N, SEED, GROUPS, GENERATIONS))
    rows = list(bench.encoded(iter(planned)))
    assert len(rows) == N
    versions: Counter[str] = Counter()
    next_offset: dict[int, int] = {}
    for (key, value, lp, lo, ts), (kb, vb, lp2, lo2, ts2) in zip(planned, rows, strict=True):
        assert (lp, lo, ts) == (lp2, lo2, ts2)
        assert rec.decode_record(kb, vb) == (key, rec.Tombstone(key.record_type) if value is None else value)
        assert lo == next_offset.get(lp, 0)  # log offsets are contiguous per `__consumer_offsets` partition
        next_offset[lp] = lo + 1
        versions[type(value).__name__ + (f" v{value.version}" if value is not None else "")] += 1
    assert versions["GroupMetadataValue v3"] == GENERATIONS
    assert versions["NoneType"] > 0  # tombstones
    assert versions["OffsetCommitValue v3"] > 0
    assert versions["OffsetCommitValue v4"] > 0
    assert versions["OffsetCommitValue v3"] + versions["OffsetCommitValue v4"] > 0.99 * (N - GENERATIONS)


def test_generated_generations_are_consumer_groups_whose_members_share_the_partitions() -> None:
    committed: dict[str, set[tuple[str, int]]] = {}
    last_generation: dict[str, int] = {}
    metadata = []
    for key, value, *_ in bench.plan(N, SEED, GROUPS, GENERATIONS):
        if isinstance(key, rec.OffsetCommitKey):
            committed.setdefault(key.group, set()).add((key.topic, key.partition))
        else:
            metadata.append((key.group, value))
    for group, value in metadata:
        assert isinstance(value, rec.GroupMetadataValue)
        assert value.protocol_type == "consumer"
        assert value.generation == last_generation.get(group, 0) + 1
        last_generation[group] = value.generation
        assert value.leader == value.members[0].member_id
        owned = []
        for m in value.members:
            sub, asg = m.consumer_subscription(), m.consumer_assignment()
            assert isinstance(sub, rec.ConsumerProtocolSubscription)
            assert isinstance(asg, rec.ConsumerProtocolAssignment)
            owned += [(tp.topic, p) for tp in asg.assigned_partitions for p in tp.partitions]
            assert {t for t, _ in owned} <= set(sub.topics)
        assert len(owned) == len(set(owned))
        assert set(owned) >= committed.get(group, set())  # every partition the group commits is assigned


def test_the_same_seed_gives_the_same_records() -> None:
    def head(seed: int) -> list[tuple[bytes, bytes | None, int, int, int]]:
        return list(bench.encoded(bench.plan(500, seed, GROUPS, 5)))

    assert head(SEED) == head(SEED)
    assert head(SEED) != head(SEED + 1)


def _expected(planned: list[tuple[rec.Key, rec.Value | None, int, int, int]]) -> object:
    """The aggregate, straight from what the generator meant to write."""
    commits: dict[tuple[str, str, int], list[int | None]] = {}
    generations: dict[str, list[int]] = {}
    for key, value, *_ in planned:
        if isinstance(key, rec.GroupMetadataKey):
            assert isinstance(value, rec.GroupMetadataValue)
            generations.setdefault(key.group, []).append(value.generation)
            continue
        assert isinstance(key, rec.OffsetCommitKey)
        slot = commits.setdefault((key.group, key.topic, key.partition), [0, None, None, 0, 0])
        if value is None:
            slot[3] = (slot[3] or 0) + 1
        else:
            assert isinstance(value, rec.OffsetCommitValue)
            slot[0] = (slot[0] or 0) + 1
            slot[1] = max(value.offset, slot[1] if slot[1] is not None else value.offset)
            slot[2] = max(value.commit_timestamp, slot[2] if slot[2] is not None else value.commit_timestamp)
    return bench.Aggregate(
        {k: tuple(v) for k, v in commits.items()},
        {g: (len(gens), len(set(gens)), max(gens)) for g, gens in generations.items()},
    )


def _baseline(rows: list[tuple[bytes | None, bytes | None]]) -> object:
    commits: dict[tuple[str | None, str | None, int | None], list[int]] = {}
    generations: dict[str, list[int]] = {}
    bench.aggregate_batch([k for k, _ in rows], [v for _, v in rows], commits, generations)
    return bench.finish(commits, generations)


def test_the_baseline_aggregates_what_the_records_say() -> None:
    planned = list(bench.plan(N, SEED, GROUPS, GENERATIONS))
    got = _baseline([(k, v) for k, v, *_ in bench.encoded(iter(planned))])
    assert got == _expected(planned)


def test_the_baseline_counts_what_the_sql_path_counts_as_problems() -> None:
    key = bench.encode_key(rec.OffsetCommitKey("g", "t", 0, 1))
    tagged = bytes.fromhex("0004000000000000002affffffff0100000000000003e8" + "010010") + bytes(range(16))
    rows = [
        (key, tagged),  # v4 with a tagged topic id: not the inline path, still a clean commit
        (key, bench.encode_value(rec.OffsetCommitValue(3, 7, "", 2000, 1))),
        (key, None),  # tombstone
        (key, bytes.fromhex("0005") + bytes(20)),  # an unknown value version: a problem
        (key, bench.encode_value(rec.OffsetCommitValue(3, 8, "", 3000, 1))[:-1]),  # truncated: a problem
        (key[:-1], bench.encode_value(rec.OffsetCommitValue(3, 9, "", 4000, 1))),  # damaged key
        (bench.encode_key(rec.GroupMetadataKey("g")), None),  # a group tombstone: no generation
    ]
    assert _baseline(rows) == bench.Aggregate(
        {("g", "t", 0): (2, 42, 2000, 1, 2), (None, None, None): (0, None, None, 0, 1)}, {}
    )


def test_an_empty_input_has_no_records() -> None:
    """The bench times the pipeline on 0 records (its fixed cost per run): the generator must stop at once."""
    assert list(bench.plan(0, seed=1, groups=5, generations=3)) == []


def test_the_peak_rss_is_the_next_runs_own() -> None:
    """The bench resets the driver's VmHWM before each timed run: a peak from before must not count."""
    me = os.getpid()
    block = bytearray(b"\x01") * (64 << 20)  # 64 MB written: resident
    high = bench._peak_rss_mb(me)  # noqa: SLF001
    del block
    bench._reset_peak_rss(me)  # noqa: SLF001
    assert bench._peak_rss_mb(me) < high - 40  # noqa: SLF001
    assert bench._peak_rss_mb(None) == 0.0  # noqa: SLF001
