"""Pure-Python decoders for `__consumer_offsets` records (stdlib only).

`records.decode_key` / `records.decode_value` turn raw key/value bytes into frozen dataclasses and never raise:
unknown types or versions become `Unknown`, damaged bytes `Corrupt`. The report's reference decoder (its Spark SQL
decoder is differentially tested against it) and the operator's generation feed (classic groups' rebalances).
"""
