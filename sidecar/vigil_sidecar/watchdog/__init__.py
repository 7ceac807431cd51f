"""The watchdog: the consumer's HeartbeatThread taken out of the process, as pure decisions.

`decide(state, observation, now) -> (state, actions)` is the whole of it; the asyncio process that feeds it
observations (beacons, describe results, coordinator lookups, action results, ticks) and carries out its actions
lives elsewhere. Nothing in this package does I/O or reads a clock: `now` is monotonic seconds, always passed in.

- `timers`: deadlines shaped like the Java client's `Heartbeat` (poll timer, session view, check timer with backoff);
- `state`: the configuration, observations, actions and the immutable state with its `with_*` transitions;
- `decide`: the decision, in `HeartbeatThread.run`'s order;
- `progress_rules`: Burrow-style named predicates judging liveness from committed offsets (the progress signal).
"""
