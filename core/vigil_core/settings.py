"""One settings loader for every vigil process: a pydantic model's fields are read from env vars `<PREFIX><NAME>`
and from flags `--<name>` (flags win), validated once, and a bad value is one line naming the variable or the flag
it came from and what is expected (`ConfigError`; the processes exit 2 on it, never with a traceback).

Env vars are read by name: other variables under a prefix are never refused. Kubernetes adds Service-link
variables for every Service in a pod's namespace (`VIGIL_OPERATOR_WEBHOOK_SERVICE_PORT_HTTPS` for a Service
`vigil-operator-webhook`), and a newer webhook may inject a variable an older sidecar does not know.

Pure: the environment and the parsed flags are passed in (no `os.environ` here).
"""

import argparse
from collections.abc import Collection, Mapping
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from vigil_core.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


def variable(prefix: str, name: str) -> str:
    """The env var of a field: `VIGIL_` + `stall_timeout_seconds` → `VIGIL_STALL_TIMEOUT_SECONDS`."""
    return f"{prefix}{name.upper()}"


def flag(name: str) -> str:
    """The flag of a field: `stall_timeout_seconds` → `--stall-timeout-seconds`."""
    return "--" + name.replace("_", "-")


def add_flags(parser: argparse.ArgumentParser, model: type[BaseModel], *, switches: bool = False) -> None:
    """A flag per field of `model` (`--name VALUE`, its docstring as help; `switches`: a boolean field as
    `--name`/`--no-name`); absent flags parse as None, so `load` falls back to the env var."""
    for name, field in model.model_fields.items():
        if switches and field.annotation is bool:
            parser.add_argument(
                flag(name), dest=name, action=argparse.BooleanOptionalAction, default=None, help=field.description
            )
        else:
            parser.add_argument(flag(name), dest=name, metavar="VALUE", help=field.description)


def load(
    model: type[M],
    *,
    prefix: str,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, object] | None = None,
    keep_empty: Collection[str] | bool = False,
) -> M:
    """`model` from `flags` (by field name; None: not given) over `env` (by variable name); ConfigError (one line)
    if invalid. An empty value is an unset one (the default applies), except for the fields in `keep_empty` (True:
    every field), where it is a value (e.g. "" turns the events topic off)."""
    env, flags = env or {}, flags or {}
    values: dict[str, object] = {}
    from_flags: set[str] = set()
    for name in model.model_fields:
        value = flags.get(name)
        given = value is not None
        if not given:
            value = env.get(variable(prefix, name))
        kept = keep_empty is True or (not isinstance(keep_empty, bool) and name in keep_empty)
        if value is None or (value == "" and not kept):
            continue
        values[name] = value
        if given:
            from_flags.add(name)
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(_named(describe_validation_error(exc, prefix=prefix), prefix, from_flags)) from None


def _named(problem: str, prefix: str, from_flags: Collection[str]) -> str:
    """`problem` naming the flag instead of the variable when the value it blames came from a flag (a rule across
    fields starts its message with the variable it blames)."""
    name = problem.partition(":")[0].removeprefix(prefix).lower()
    if name not in from_flags:
        return problem
    return problem.replace(variable(prefix, name), flag(name), 1)


def describe_validation_error(exc: ValidationError, *, prefix: str = "") -> str:
    """The first problem of a pydantic error as one line: `NAME: what is wrong`."""
    first = exc.errors()[0]
    location = "".join(str(part) for part in first["loc"][:1])
    message = first["msg"].removeprefix("Value error, ")
    if not location:  # a rule across fields: its message names them
        return message
    if first["type"] == "missing":
        message = "required, not set"
    elif first["type"] == "enum":
        message = f"{message}, got {first['input']!r}"
    return f"{prefix}{location.upper()}: {message}"
