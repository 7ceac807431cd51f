"""How the sidecar learns that the app is alive: the beacon (progress and stats signals come with issue #5)."""
