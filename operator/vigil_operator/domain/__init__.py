"""The operator's pure domain: spec and status models, reconcile decisions, the injection patch. No I/O."""
