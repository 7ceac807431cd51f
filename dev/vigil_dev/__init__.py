"""The real local stack for tests and the demo: Kafka from Maven jars, Kubernetes built from Go modules."""
