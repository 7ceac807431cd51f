"""Where the stack caches downloads and builds: outside the clone, so a fresh clone starts warm."""

import os
from pathlib import Path


def cache_dir() -> Path:
    """`$VIGIL_CACHE`, else `~/.cache/vigil`."""
    configured = os.environ.get("VIGIL_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "vigil"


def default_state_dir() -> Path:
    """Where `vigil dev up` keeps the running stack (data, logs, pids, env file) unless told otherwise."""
    return cache_dir() / "stack"
