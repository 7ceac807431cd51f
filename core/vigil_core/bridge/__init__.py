"""The heartbeat bridge: vigil heartbeats for a static member while its app is known to be restarting.

`engine` is the whole decision, pure: `start(...)` gates a bridge on proof that the app ended, and
`step(state, observation, now) -> (state, actions)` runs it; the sidecar (an app container restart) and the operator
(a pod deleted during a coordinated rollout) feed it broker answers and carry out its actions. See README.md for the
rules, the outcomes and why.
"""
