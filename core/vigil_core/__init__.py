"""What the sidecar, the operator and the report share: the group client, rules, events, identity."""
