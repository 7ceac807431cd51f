"""One way to read and write vigil's own JSON formats (the bridge state, the budget ledger, librdkafka's statistics as
the sidecar reads them, the dev stack's layout files): a pydantic model or `TypeAdapter` states the shape once;
`decode` reads a document into it or says its first problem in one line, naming the field and what is expected.

Reading is strict JSON: an integer field takes no `"5"`, `true` or `5.0`; a number field takes an integer (and, in
a `Record`, no NaN or infinity); a string field takes no number. Fields a reader does not know are ignored (a
`Record` keeps them, so a rewrite does not erase a newer writer's additions). Writing goes through the standard
library's `json`, as the formats were written before they had models, so the bytes are the same.

Pure: no I/O.
"""

import json
from typing import Annotated, Any, ClassVar, Final, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    model_serializer,
)

T = TypeVar("T")

Version = Annotated[int, Field(ge=1)]
"""A format's `v`: the writer's version; readers take any, additive evolution keeps them readable."""


class Record(BaseModel):
    """An object of a persisted or exchanged format: strict types, finite numbers. Fields a newer writer added are
    kept (`extra`) and written back ahead of the known ones, where they were read; the fields named in
    `OMITTED_WHEN_EMPTY` are left out when None or empty (as their format always wrote them)."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="allow", frozen=True)
    OMITTED_WHEN_EMPTY: ClassVar[frozenset[str]] = frozenset()

    @property
    def extra(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        known: dict[str, Any] = handler(self)
        omitted = {k for k in self.OMITTED_WHEN_EMPTY if known.get(k) in (None, [], (), {})}
        return {**self.extra, **{k: v for k, v in known.items() if k not in omitted}}


class Versioned(BaseModel):
    """Only the version of a document (the rest is read by the format's own model)."""

    model_config = ConfigDict(strict=True, extra="ignore")
    v: Version


def decode(adapter: TypeAdapter[T], data: str | bytes, what: str, error: type[Exception] = ValueError) -> T:
    """`data` read into `adapter`'s type; `error("<what>: <problem>")` (one line, `problem`) if it is not one."""
    try:
        return adapter.validate_json(data, strict=True)
    except ValidationError as exc:
        raise error(f"{what}: {problem(exc)}") from None


_ANY: Final[TypeAdapter[Any]] = TypeAdapter(Any)


def is_json(data: str | bytes) -> bool:
    """Whether `data` is JSON at all (of any shape)."""
    try:
        _ANY.validate_json(data)
    except ValidationError:
        return False
    return True


def dumps(doc: Any, *, indent: int | None = None, ensure_ascii: bool = True) -> str:
    """A document as the formats write it: compact (or indented), no NaN or infinity (ValueError)."""
    separators = (",", ":") if indent is None else None
    return json.dumps(doc, indent=indent, separators=separators, ensure_ascii=ensure_ascii, allow_nan=False)


_EXPECTED: Final = {
    "int_type": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "dict_type": "an object",
    "model_type": "an object",
    "dataclass_type": "an object",
    "list_type": "a list",
    "tuple_type": "a list",
    "finite_number": "a finite number",
}
_OBJECT: Final = frozenset({"dict_type", "model_type", "dataclass_type", "model_attributes_type"})


def problem(exc: ValidationError) -> str:
    """The first problem of a decoding error as one line: `where is missing`, `where must be <expected>, got
    <input>`, `where: <a rule's own message>`, `not JSON: ...` or `not a JSON object`."""
    first = exc.errors(include_url=False)[0]
    kind, given = first["type"], first.get("input")
    message = first["msg"]
    if kind == "json_invalid":
        return "not JSON: " + message.removeprefix("Invalid JSON: ")
    where = path(first["loc"])
    if not where:
        return f"not a JSON object, got {short(given)}" if kind in _OBJECT else message.removeprefix("Value error, ")
    if kind == "missing":
        return f"{where} is missing"
    if kind in ("value_error", "assertion_error"):
        return f"{where}: {message.removeprefix('Value error, ').removeprefix('Assertion failed, ')}"
    expected = _EXPECTED.get(kind) or message.removeprefix("Input should be ")
    return f"{where} must be {expected}, got {short(given)}"


def path(loc: tuple[int | str, ...]) -> str:
    """`members.orders-0.age`, `permits[0].pod`; a key that would not read back (a dot, a bracket, a quote, white
    space) as `["a key"]`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part and part.isprintable() and not any(c in part for c in ' .[]"'):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part)}]"
    return out


def short(value: object) -> str:
    """A value as JSON, cut to 40 characters."""
    text = json.dumps(value, default=repr)
    return text if len(text) <= 40 else text[:37] + "..."
