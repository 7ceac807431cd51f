"""Real clients and pytest fixtures for suites and the demo: never mocks (tests/README.md)."""
