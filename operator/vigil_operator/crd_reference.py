"""The ConsumerGroup reference (docs/consumergroup.md) rendered from the CRD itself, so the docs cannot drift.

Pure: the loaded CRD in, Markdown out (`vigil crd reference` prints it). A table per top-level section (the
scalar fields of `spec`, each object under `spec`, `status`), the CEL rules whose node lies in the section, and
the printer columns. Schema order is kept, so the output is a function of the file alone.
"""

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from vigil_core import markdown

#: The line in docs/consumergroup.md above which the text is hand-written; everything below it is generated.
MARKER = "<!-- generated below by `vigil crd reference` (make generate-crds); do not edit by hand -->"

Schema = Mapping[str, Any]

_HEADER = "| Field | Type | Default | Allowed values | Required | Description |\n|---|---|---|---|---|---|"


@dataclass(frozen=True)
class Row:
    """A field: its path (`status.members[].pod`), its schema, and whether its parent requires it."""

    path: str
    schema: Schema
    required: bool


@dataclass(frozen=True)
class Rule:
    """A CEL rule: the field it names (its node plus `fieldPath`) and the message the apiserver answers with."""

    where: str
    message: str


def render(crd: Mapping[str, Any]) -> str:
    """The reference of the CRD's storage version (this CRD serves one)."""
    spec = crd["spec"]
    version = next((v for v in spec["versions"] if v.get("storage")), spec["versions"][0])
    root: Schema = version["schema"]["openAPIV3Schema"]
    names = spec["names"]
    title = f"{names['kind']} `{spec['group']}/{version['name']}`"
    parts = [f"# {title}", ""]
    if root.get("description"):
        parts += [markdown.one_line(root["description"]), ""]
    parts += [_printer_columns(version.get("additionalPrinterColumns") or [], names), ""]
    for heading, rows, rules in sections(root):
        parts += [f"## `{heading}`", "", _HEADER, *(_row(r) for r in rows), ""]
        if rules:
            parts += [
                f"Validation rules (CEL) of `{heading}`: the apiserver refuses the resource with the message.",
                "",
            ]
            parts += [
                "| Where | Message |",
                "|---|---|",
                *(markdown.cells([f"`{r.where}`", markdown.one_line(r.message)]) for r in rules),
            ]
            parts.append("")
    return "\n".join(parts).rstrip("\n") + "\n"


def sections(root: Schema) -> list[tuple[str, list[Row], list[Rule]]]:
    """(heading, rows, CEL rules): `spec` with its scalar fields, one per object field of `spec`, `status`."""
    required = set(root.get("required") or ())
    props: Mapping[str, Schema] = root.get("properties") or {}
    out: list[tuple[str, list[Row], list[Rule]]] = []
    if "spec" in props:
        spec = props["spec"]
        spec_required = set(spec.get("required") or ())
        fields: Mapping[str, Schema] = spec.get("properties") or {}
        nested = [name for name, s in fields.items() if s.get("type") == "object" and "properties" in s]
        rows = [Row("spec", spec, "spec" in required)]
        rows += [Row(f"spec.{n}", s, n in spec_required) for n, s in fields.items() if n not in nested]
        out.append(("spec", rows, _all_rules(rows)))
        for name in nested:
            rows = list(walk(fields[name], f"spec.{name}", name in spec_required))
            out.append((f"spec.{name}", rows, _all_rules(rows)))
    if "status" in props:
        rows = list(walk(props["status"], "status", "status" in required))
        out.append(("status", rows, _all_rules(rows)))
    return out


def walk(schema: Schema, path: str, required: bool) -> Iterator[Row]:
    """This field, then its properties depth first (an array's items as `path[]`)."""
    yield Row(path, schema, required)
    if schema.get("type") == "array" and isinstance(schema.get("items"), Mapping):
        schema, path = schema["items"], f"{path}[]"
    needed = set(schema.get("required") or ())
    for name, child in (schema.get("properties") or {}).items():
        yield from walk(child, f"{path}.{name}", name in needed)


def _rules(schema: Schema, path: str) -> list[Rule]:
    """The CEL rules on this node: where = the node, or the field its `fieldPath` names."""
    return [
        Rule(path + str(v.get("fieldPath") or ""), str(v.get("message") or v["rule"]))
        for v in schema.get("x-kubernetes-validations") or ()
    ]


def _all_rules(rows: list[Row]) -> list[Rule]:
    """The rules of every row's node (an array's rules live on its items: `path[]`)."""
    out = []
    for row in rows:
        items = row.schema.get("items")
        if row.schema.get("type") == "array" and isinstance(items, Mapping):
            out += _rules(items, f"{row.path}[]")
        else:
            out += _rules(row.schema, row.path)
    return out


def _row(row: Row) -> str:
    s = row.schema
    default = f"`{_value(s['default'])}`" if "default" in s else ""
    return markdown.cells(
        [
            f"`{row.path}`",
            type_of(s),
            default,
            allowed(s),
            "yes" if row.required else "",
            markdown.one_line(s.get("description")),
        ]
    )


def type_of(s: Schema) -> str:
    """The field's type as a reader writes it: `[]string`, `map[string]int-or-string`, `string (date-time)`."""
    if s.get("x-kubernetes-int-or-string"):
        return "int-or-string"
    kind = str(s.get("type") or "any")
    if kind == "array":
        items = s.get("items")
        return "[]" + (type_of(items) if isinstance(items, Mapping) else "any")
    if kind == "object" and isinstance(s.get("additionalProperties"), Mapping):
        return "map[string]" + type_of(s["additionalProperties"])
    if kind == "object" and s.get("x-kubernetes-preserve-unknown-fields"):
        return "object (any fields)"
    return f"{kind} ({s['format']})" if "format" in s else kind


def allowed(s: Schema) -> str:
    """Enum, bounds, lengths, entry count and pattern, `; `-separated (a map's value constraints prefixed)."""
    parts = []
    if "enum" in s:
        parts.append(", ".join(f"`{_value(v)}`" for v in s["enum"]))
    bounds = _bounds(s)
    if bounds:
        parts.append(bounds)
    lengths = _range(s.get("minLength"), s.get("maxLength"))
    if lengths:
        parts.append(f"length {lengths}")
    entries = _range(s.get("minProperties"), s.get("maxProperties"))
    if entries:
        parts.append(f"entries {entries}")
    if "pattern" in s:
        parts.append(f"pattern `{s['pattern']}`")
    values = s.get("additionalProperties")
    if isinstance(values, Mapping) and allowed(values):
        parts.append(f"values: {allowed(values)}")
    return "; ".join(parts)


def _bounds(s: Schema) -> str:
    """`1 ≤ x ≤ 86400`, `0 < x ≤ 100`, `x ≥ 0`."""
    low, high = s.get("minimum"), s.get("maximum")
    below = "<" if s.get("exclusiveMinimum") else "≤"
    above = "<" if s.get("exclusiveMaximum") else "≤"
    if low is not None and high is not None:
        return f"{_value(low)} {below} x {above} {_value(high)}"
    if low is not None:
        return f"x {'>' if below == '<' else '≥'} {_value(low)}"
    return "" if high is None else f"x {above} {_value(high)}"


def _range(low: Any, high: Any) -> str:
    """`1–249`, `≥ 1`, `≤ 1024`."""
    if low is not None and high is not None:
        return f"{low}–{high}"
    if low is not None:
        return f"≥ {low}"
    return "" if high is None else f"≤ {high}"


def _value(v: Any) -> str:
    """A value as YAML would spell it: strings bare (an empty one as `""`), the rest as JSON."""
    if isinstance(v, str) and v:
        return v
    return json.dumps(v, separators=(", ", ": "))


def _printer_columns(columns: list[Mapping[str, Any]], names: Mapping[str, Any]) -> str:
    short = (names.get("shortNames") or [names["plural"]])[0]
    lines = [
        f"## `kubectl get {short}`",
        "",
        "| Column | Type | JSON path | Shown | Description |",
        "|---|---|---|---|---|",
    ]
    for c in columns:
        shown = "always" if not c.get("priority") else "`-o wide`"
        cells = [c["name"], c["type"], f"`{c['jsonPath']}`", shown, markdown.one_line(c.get("description"))]
        lines.append(markdown.cells(cells))
    return "\n".join(lines)
