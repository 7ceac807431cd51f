"""Shared fixtures: the real local stack (see tests/README.md for the rules every test follows)."""

pytest_plugins = ["vigil_dev.testing.fixtures", "vigil_dev.testing.kube_fixtures", "vigil_dev.testing.bridged_group"]
