"""How long to wait before the next attempt (pure: the randomness of the jitter is an argument, so tests and bounds
are exact).

The ceiling doubles from `base` up to `cap`; the wait is drawn in its upper half ("equal jitter"): never less than
half the ceiling (a retry storm stays paced), and never the same for two clients with different draws. Without it,
every sidecar of a group whose coordinator moved would retry at the same moments (all of them saw the same failure
at the same time): each retry a burst at the new coordinator.
"""

SPREAD = 0.5
"""The share of the ceiling the jitter spreads over: waits are in [ceiling × (1 − SPREAD), ceiling]."""


def backoff(attempt: int, *, base: float = 0.2, cap: float = 5.0) -> float:
    """The ceiling of the wait after failed attempt number `attempt` (0-based): doubling from `base`, at most `cap`."""
    return float(min(cap, base * 2 ** max(0, attempt)))


def jittered(attempt: int, draw: float, *, base: float = 0.2, cap: float = 5.0) -> float:
    """Seconds to wait after failed attempt number `attempt`: `backoff(attempt)` less a share of it set by `draw`, a
    number in [0, 1) (`random.Random.random()`): in [ceiling × (1 − SPREAD), ceiling]."""
    if not 0.0 <= draw < 1.0:
        raise ValueError(f"draw must be in [0, 1), got {draw!r}")
    ceiling = backoff(attempt, base=base, cap=cap)
    return ceiling * (1.0 - SPREAD * (1.0 - draw))
