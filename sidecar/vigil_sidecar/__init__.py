"""The liveness sidecar: the consumer's HeartbeatThread taken out of the process."""
