"""Pure-Python decoders for `__consumer_offsets` records (stdlib only, no Spark).

The reference the Spark SQL decoder is differentially tested against, and the single-process baseline of
the benchmark: `records.decode_key` / `records.decode_value` turn raw key/value bytes into frozen
dataclasses, and never raise — unknown types or versions become `Unknown`, damaged bytes `Corrupt`.
"""
