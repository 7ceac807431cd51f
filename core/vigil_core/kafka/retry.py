"""How long to wait before the next attempt (pure; no jitter so tests and bounds are exact)."""


def backoff(attempt: int, *, base: float = 0.2, cap: float = 5.0) -> float:
    """Seconds to wait after failed attempt number `attempt` (0-based): doubling from `base`, at most `cap`."""
    return float(min(cap, base * 2 ** max(0, attempt)))
