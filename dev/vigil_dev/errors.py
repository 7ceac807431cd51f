"""One exception type for everything the dev stack cannot do, carrying a single line for the user."""


class DevError(Exception):
    """Something the local stack needs is missing or failed; the message is one line naming it."""
