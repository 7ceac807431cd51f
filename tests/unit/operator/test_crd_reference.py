"""docs/consumergroup.md is the CRD's reference, generated: it cannot drift from the schema, and every field has
a description (what `kubectl explain` shows). The renderer itself is checked on a small hand-made CRD."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from vigil_cli import cli
from vigil_core import markdown
from vigil_operator import crd_reference

ROOT = Path(__file__).resolve().parents[3]
CRD: dict[str, Any] = yaml.safe_load((ROOT / "crds" / "consumergroups.vigil.dev.yaml").read_text())
DOC = ROOT / "docs" / "consumergroup.md"


def _fields(schema: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every property under `schema`, recursively, array items' properties included (as `path[].name`)."""
    if schema.get("type") == "array":
        schema, path = schema["items"], f"{path}[]"
    for name, child in (schema.get("properties") or {}).items():
        yield f"{path}.{name}", child
        yield from _fields(child, f"{path}.{name}")


# -- the shipped CRD and the committed document ------------------------------------------------------------------


def test_the_committed_reference_is_the_generators_output() -> None:
    document = DOC.read_text()
    fresh = markdown.splice(document, crd_reference.MARKER, crd_reference.render(CRD))
    assert fresh == document, "run: make generate-crds"


def test_the_preamble_is_hand_written_and_kept() -> None:
    head = DOC.read_text().partition(crd_reference.MARKER)[0]
    assert head.startswith("# The `ConsumerGroup` reference\n")
    assert "make generate-crds" in head


def test_every_spec_and_status_field_has_a_description() -> None:
    root = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    fields = [(p, s) for top in ("spec", "status") for p, s in [(top, root[top]), *_fields(root[top], top)]]
    assert len(fields) > 100  # the walk reached the nested objects and the array items
    missing = [path for path, schema in fields if not str(schema.get("description") or "").strip()]
    assert missing == []


def test_every_printer_column_has_a_description() -> None:
    columns = CRD["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [c["name"] for c in columns if not str(c.get("description") or "").strip()] == []


def test_systemic_stall_percent_says_more_than_not_at_or_above() -> None:
    """ledger.decide_permit refuses only when more than the share is stalled; the text once said "at or above"."""
    liveness = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["liveness"]
    text = liveness["properties"]["systemicStallPercent"]["description"]
    assert "more than this percentage" in text
    assert "at or above" not in text.lower()


def test_every_field_has_a_row_in_the_reference() -> None:
    root = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    rendered = crd_reference.render(CRD)
    paths = [p for top in ("spec", "status") for p, _ in [(top, root[top]), *_fields(root[top], top)]]
    assert [p for p in paths if f"| `{p}` |" not in rendered] == []


def test_vigil_crd_reference_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["crd", "reference"]) == 0
    assert capsys.readouterr().out == crd_reference.render(CRD)


def test_check_names_a_stale_document_and_write_refreshes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "consumergroup.md"
    stale.write_text(f"# preamble\n\n{crd_reference.MARKER}\n\nold table\n")
    assert cli.main(["crd", "reference", "--check", str(stale)]) == 1
    assert capsys.readouterr().err == f"vigil crd reference: {stale} is stale (run: make generate-crds)\n"
    assert cli.main(["crd", "reference", "--write", str(stale)]) == 0
    assert stale.read_text() == f"# preamble\n\n{crd_reference.MARKER}\n\n{crd_reference.render(CRD)}"
    assert cli.main(["crd", "reference", "--check", str(stale)]) == 0


def test_a_document_without_the_marker_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = tmp_path / "consumergroup.md"
    doc.write_text("# all hand-written\n")
    assert cli.main(["crd", "reference", "--write", str(doc)]) == 1
    assert "no marker line" in capsys.readouterr().err
    assert doc.read_text() == "# all hand-written\n"


# -- the renderer on a small hand-made CRD ---------------------------------------------------------------------

SMALL: dict[str, Any] = {
    "spec": {
        "group": "example.dev",
        "names": {"kind": "Widget", "plural": "widgets", "shortNames": ["wd"]},
        "versions": [
            {
                "name": "v1",
                "storage": True,
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size", "description": "How big."},
                    {"name": "Mode", "type": "string", "jsonPath": ".spec.mode", "priority": 1},
                ],
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "description": "A widget.",
                        "required": ["spec"],
                        "properties": {
                            "spec": {
                                "type": "object",
                                "description": "What is wanted.",
                                "required": ["name"],
                                "x-kubernetes-validations": [
                                    {"rule": "self.size > 1", "message": "spec.size: above 1", "fieldPath": ".size"}
                                ],
                                "properties": {
                                    "name": {"type": "string", "minLength": 1, "maxLength": 63},
                                    "size": {
                                        "type": "number",
                                        "minimum": 0,
                                        "exclusiveMinimum": True,
                                        "maximum": 100,
                                        "default": 50,
                                        "description": "Share  in\npercent.",
                                    },
                                    "mode": {"type": "string", "enum": ["a", "b|c"], "default": "a"},
                                    "opts": {
                                        "type": "object",
                                        "default": {},
                                        "x-kubernetes-validations": [{"rule": "true", "message": "never"}],
                                        "properties": {"on": {"type": "boolean", "default": False}},
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {
                                    "items": {
                                        "type": "array",
                                        "default": [],
                                        "items": {
                                            "type": "object",
                                            "required": ["id"],
                                            "properties": {
                                                "id": {"type": "string", "description": "<id> of it."},
                                                "at": {"type": "string", "format": "date-time"},
                                                "note": {"type": "string", "default": ""},
                                            },
                                        },
                                    },
                                    "tags": {"type": "object", "additionalProperties": {"type": "string"}},
                                    "count": {"type": "integer", "minimum": 0},
                                },
                            },
                        },
                    }
                },
            }
        ],
    }
}


def _table(rendered: str, heading: str) -> list[str]:
    """The rows of the first table after `## heading` (header and separator left out)."""
    lines = [*rendered.splitlines(), ""]
    start = lines.index(f"## {heading}") + 2  # the heading and the blank line after it
    end = lines.index("", start)
    return lines[start + 2 : end]


def test_rows_of_the_scalar_spec_section() -> None:
    rows = _table(crd_reference.render(SMALL), "`spec`")
    assert rows[:4] == [
        "| `spec` | object |  |  | yes | What is wanted. |",
        "| `spec.name` | string |  | length 1–63 | yes |  |",
        "| `spec.size` | number | `50` | 0 < x ≤ 100 |  | Share in percent. |",
        "| `spec.mode` | string | `a` | `a`, `b\\|c` |  |  |",
    ]


def test_an_object_field_gets_its_own_section_with_its_rules() -> None:
    rendered = crd_reference.render(SMALL)
    assert _table(rendered, "`spec.opts`")[:2] == [
        "| `spec.opts` | object | `{}` |  |  |  |",
        "| `spec.opts.on` | boolean | `false` |  |  |  |",
    ]
    section = rendered.partition("## `spec.opts`")[2].partition("## ")[0]
    assert "| `spec.opts` | never |" in section
    assert "spec.size: above 1" not in section


def test_a_cel_rule_is_listed_where_its_field_path_points() -> None:
    spec_section = crd_reference.render(SMALL).partition("## `spec`")[2].partition("## ")[0]
    assert "| Where | Message |\n|---|---|\n| `spec.size` | spec.size: above 1 |\n" in spec_section


def test_status_rows_walk_array_items_and_maps() -> None:
    assert _table(crd_reference.render(SMALL), "`status`") == [
        "| `status` | object |  |  |  |  |",
        "| `status.items` | []object | `[]` |  |  |  |",
        "| `status.items[].id` | string |  |  | yes | \\<id> of it. |",
        "| `status.items[].at` | string (date-time) |  |  |  |  |",
        '| `status.items[].note` | string | `""` |  |  |  |',
        "| `status.tags` | map[string]string |  |  |  |  |",
        "| `status.count` | integer |  | x ≥ 0 |  |  |",
    ]


def test_printer_columns_and_title() -> None:
    rendered = crd_reference.render(SMALL)
    assert rendered.startswith("# Widget `example.dev/v1`\n\nA widget.\n\n## `kubectl get wd`\n")
    assert "| Size | integer | `.spec.size` | always | How big. |" in rendered
    assert "| Mode | string | `.spec.mode` | `-o wide` |  |" in rendered


def test_the_output_is_deterministic_and_ends_with_one_newline() -> None:
    first = crd_reference.render(SMALL)
    assert first == crd_reference.render(yaml.safe_load(yaml.safe_dump(SMALL, sort_keys=False)))
    assert first.endswith("|\n")
    assert not first.endswith("\n\n")


def test_allowed_values_formatting() -> None:
    assert crd_reference.allowed({"minimum": 1, "maximum": 86400}) == "1 ≤ x ≤ 86400"
    assert crd_reference.allowed({"minimum": 0, "exclusiveMinimum": True}) == "x > 0"
    assert crd_reference.allowed({"maxLength": 1024, "pattern": "^a$"}) == "length ≤ 1024; pattern `^a$`"
    assert crd_reference.allowed({"minProperties": 1}) == "entries ≥ 1"
    assert crd_reference.type_of({"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": True}}) == (
        "map[string]int-or-string"
    )
