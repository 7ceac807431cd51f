"""Errors whose message is one line for the user, naming the field or source and what is expected."""


class ConfigError(ValueError):
    """A setting (env var, flag, file, CR field) is missing or invalid."""
