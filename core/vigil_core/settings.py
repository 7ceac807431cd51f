"""One settings loader for every vigil process: a pydantic model's fields are read from env vars `<PREFIX><NAME>`
and from flags `--<name>` (flags win), validated once, and a bad value is one line naming the variable or the flag
it came from and what is expected (`ConfigError`; the processes exit 2 on it, never with a traceback).

Env vars are read by name: other variables under a prefix are never refused. Kubernetes adds Service-link
variables for every Service in a pod's namespace (`VIGIL_OPERATOR_WEBHOOK_SERVICE_PORT_HTTPS` for a Service
`vigil-operator-webhook`), and a newer webhook may inject a variable an older sidecar does not know.

The model is also the one source of what `--help` and the docs say about a setting (`describe`): its meaning is
the field's docstring (models set `use_attribute_docstrings`), its default the field's (`Unset` says what a None
default means), never a secret's.

Pure: the environment and the parsed flags are passed in (no `os.environ` here).
"""

import argparse
import shutil
import textwrap
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from itertools import groupby
from operator import attrgetter
from types import UnionType
from typing import Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, Secret, SecretBytes, SecretStr, ValidationError
from pydantic.fields import FieldInfo

from vigil_core import markdown
from vigil_core.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Unset:
    """What a field left unset (None) means when that is not simply nothing: a default computed from other settings
    (`Unset("2 × stall timeout")`) or a behaviour (`Unset("the system store")`). `--help` and the docs show it as
    the default: `cooldown_seconds: Annotated[float | None, Unset("2 × stall timeout")] = None`."""

    text: str


@dataclass(frozen=True)
class Setting:
    """A field as `--help` and the docs show it."""

    name: str
    variable: str | None
    """None: not read from the environment (the operator's flags)."""
    flag: str | None
    """None: read from the environment only."""
    metavar: str
    default: str
    literal: bool
    """`default` is a value (code in the docs), not words (`required`, an `Unset`'s text)."""
    meaning: str
    section: str

    def help(self) -> str:
        """The meaning, then the default and the env var (when there is a flag: else it heads the entry)."""
        notes = [self.default if self.default == "required" else f"default: {self.default}"]
        if self.variable and self.flag:
            notes.append(f"env {self.variable}")
        return f"{self.meaning} ({'; '.join(notes)})"


def variable(prefix: str, name: str) -> str:
    """The env var of a field: `VIGIL_` + `stall_timeout_seconds` → `VIGIL_STALL_TIMEOUT_SECONDS`."""
    return f"{prefix}{name.upper()}"


def flag(name: str) -> str:
    """The flag of a field: `stall_timeout_seconds` → `--stall-timeout-seconds`."""
    return "--" + name.replace("_", "-")


def describe(
    model: type[BaseModel], *, prefix: str | None, sections: Mapping[str, str] | None = None, flags: bool = True
) -> list[Setting]:
    """`model`'s fields in declaration order. `prefix`: their env vars' (None: not read from the environment);
    `sections`: a title per field that starts a section (fields are declared section by section); `flags`: False
    when they are read from the environment only."""
    sections = sections or {}
    if unknown := set(sections) - set(model.model_fields):
        raise ValueError(f"sections start at fields {model.__name__} does not have: {sorted(unknown)}")
    found: list[Setting] = []
    section = ""
    for name, field in model.model_fields.items():
        section = sections.get(name, section)
        default, literal = _default(field)
        found.append(
            Setting(
                name=name,
                variable=None if prefix is None else variable(prefix, name),
                flag=flag(name) if flags else None,
                metavar=_metavar(name, field.annotation),
                default=default,
                literal=literal,
                meaning=" ".join((field.description or "").split()),
                section=section,
            )
        )
    return found


def add_flags(
    parser: argparse.ArgumentParser,
    model: type[BaseModel],
    *,
    prefix: str | None = None,
    sections: Mapping[str, str] | None = None,
    switches: bool = False,
) -> None:
    """A flag per field of `model` (`--name VALUE`; `switches`: a boolean field as `--name`/`--no-name`; a tuple or
    list field as a repeatable `--name VALUE`), helped
    by its meaning, default and (`prefix`: the process reads it) env var, in an argument group per section (see
    `describe`); absent flags parse as None, so `load` falls back to the env var."""
    for title, settings in groupby(describe(model, prefix=prefix, sections=sections), key=attrgetter("section")):
        group = parser.add_argument_group(title) if title else parser
        for s in settings:
            text = s.help().replace("%", "%%")  # argparse formats help with %
            annotation = model.model_fields[s.name].annotation
            if switches and annotation is bool:
                group.add_argument(
                    flag(s.name), dest=s.name, action=argparse.BooleanOptionalAction, default=None, help=text
                )
            elif get_origin(annotation) in (tuple, list):
                group.add_argument(
                    flag(s.name), dest=s.name, metavar=s.metavar, action="append", default=None,
                    help=f"{text}; repeatable",
                )  # fmt: skip
            else:
                group.add_argument(flag(s.name), dest=s.name, metavar=s.metavar, help=text)


def add_variables(parser: argparse.ArgumentParser, model: type[BaseModel], *, prefix: str, title: str) -> None:
    """`model`'s settings, read from the environment only, listed in `parser`'s help as an argument group laid out
    like the flags' (no flag parses them); `parser` keeps it as written only with argparse's
    RawDescriptionHelpFormatter."""
    width = max(shutil.get_terminal_size().columns - 4, 40)  # argparse's width (columns - 2), less a group's indent
    indent = " " * 22  # argparse's help column (24), less a group's indent
    lines: list[str] = []
    for s in describe(model, prefix=prefix, flags=False):
        lines += [
            f"{s.variable}={s.metavar}",
            *textwrap.wrap(s.help(), width, initial_indent=indent, subsequent_indent=indent),
        ]
    parser.add_argument_group(title, "\n".join(lines))


def markdown_reference(settings: Sequence[Setting]) -> str:
    """`settings` as Markdown: a table per section, under its title (the docs' settings reference)."""
    parts: list[str] = []
    for title, rows in groupby(settings, key=attrgetter("section")):
        if title:
            parts += [f"### {title[:1].upper()}{title[1:]}", ""]
        parts += ["| variable | flag | default | meaning |", "|---|---|---|---|"]
        for s in rows:
            cells = [
                f"`{s.variable}`" if s.variable else "—",
                f"`{s.flag} {s.metavar}`" if s.flag else "— (env only)",
                f"`{s.default}`" if s.literal else s.default,
                markdown.one_line(s.meaning),
            ]
            parts.append(markdown.cells(cells))
        parts.append("")
    return "\n".join(parts)


def _default(field: FieldInfo) -> tuple[str, bool]:
    """The field's default as words (`required`, an `Unset`'s text, `unset`) or as a value (True); a secret's is
    never shown."""
    if field.is_required():
        return "required", False
    if _is_secret(field.annotation):
        return "not shown (secret)", False
    value = field.get_default(call_default_factory=True)
    if value is None:
        return next((m.text for m in field.metadata if isinstance(m, Unset)), "unset"), False
    if isinstance(value, (tuple, list)):
        return (",".join(str(v) for v in value), True) if value else ("none", False)
    return _literal(value), True


def _literal(value: object) -> str:
    """A default value as the docs show it."""
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    return str(value) if value != "" else '""'


def _metavar(name: str, annotation: object) -> str:
    """What a flag takes: an enum's or a Literal's choices, BOOL, else its name's last word (`SECONDS`, `PORT`)."""
    kinds = _options(annotation)
    if len(kinds) == 1 and get_origin(kinds[0]) is Literal:
        return "{" + ",".join(str(a) for a in get_args(kinds[0])) + "}"
    if len(kinds) == 1 and isinstance(kinds[0], type) and issubclass(kinds[0], Enum):
        return "{" + ",".join(str(m.value) for m in kinds[0]) + "}"
    if kinds == [bool]:
        return "BOOL"
    word = name.rpartition("_")[2]
    return "ADDRESS" if word == "bind" else word.upper()


def _options(annotation: object) -> list[object]:
    """The types a field takes, None left out: `StallAction | None` -> [StallAction]."""
    if get_origin(annotation) in (Union, UnionType):
        return [a for a in get_args(annotation) if a is not type(None)]
    return [annotation]


def _is_secret(annotation: object) -> bool:
    return any(
        isinstance(kind := get_origin(a) or a, type) and issubclass(kind, (Secret, SecretStr, SecretBytes))
        for a in _options(annotation)
    )


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
