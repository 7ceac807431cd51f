"""The ConsumerGroup operator and the sidecar-injection webhook."""
