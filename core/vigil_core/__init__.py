"""What the sidecar, the operator and the report share: the group client, rules, events, identity, the bridge
engine and the eviction budget, and the contracts between them (`crd`, `liveness`, `sidecar_contract`)."""
