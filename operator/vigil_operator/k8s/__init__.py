"""The operator's Kubernetes API calls beyond kopf's own (the only place `kubernetes` is imported)."""
