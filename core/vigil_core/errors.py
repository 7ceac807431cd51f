"""Errors whose message is one line for the user, naming the field or source and what is expected."""


class ConfigError(ValueError):
    """A setting (env var, flag, file, CR field) is missing or invalid."""


def first_line(exc: BaseException) -> str:
    """An exception as one log line: its message's first line (500 characters at most), else its type's name."""
    return (str(exc) or type(exc).__name__).splitlines()[0][:500]
