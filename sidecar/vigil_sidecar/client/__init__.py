"""The app helper: `from vigil_sidecar.client import Consumer` instead of confluent-kafka's, and every poll
tells the sidecar the app is alive. Without a sidecar (no `VIGIL_BEACON_ADDR`) it is a plain Consumer."""

from vigil_sidecar.client.consumer import Consumer

__all__ = ["Consumer"]
