"""The Kafka edge: connection settings and the group control-plane client."""
