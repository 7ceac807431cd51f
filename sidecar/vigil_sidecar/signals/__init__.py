"""How the sidecar learns that the app is alive: the beacon, the progress signal (committed offsets)
and the stats signal (librdkafka's statistics)."""
