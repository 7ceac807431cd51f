"""The one JSON codec (`vigil_core.codec`): strict reading, one line naming the field, a newer writer's fields kept and
written back where they were."""

import json
import re
from typing import Annotated, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field, TypeAdapter

from vigil_core import codec


class Item(codec.Record):
    OMITTED_WHEN_EMPTY = frozenset({"note"})
    name: str
    count: Annotated[int, Field(ge=0)]
    at: float
    note: str | None = None


class Doc(codec.Record):
    v: codec.Version
    items: dict[str, Item] = Field(default_factory=dict)
    log: list[Item] = Field(default_factory=list)


DOC = TypeAdapter(Doc)


def read(text: str) -> Doc:
    return codec.decode(DOC, text, "doc")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "doc: not JSON: EOF while parsing an object at line 1 column 1"),
        ("[1]", "doc: not a JSON object, got [1]"),
        ("{}", "doc: v is missing"),
        ('{"v": "1"}', 'doc: v must be an integer, got "1"'),
        ('{"v": 1.0}', "doc: v must be an integer, got 1.0"),
        ('{"v": 0}', "doc: v must be greater than or equal to 1, got 0"),
        ('{"v": 1, "items": []}', "doc: items must be an object, got []"),
        ('{"v": 1, "items": {"a": {"name": "x", "count": 1}}}', "doc: items.a.at is missing"),
        (
            '{"v": 1, "items": {"a.b": {"name": 1, "count": 1, "at": 1}}}',
            'doc: items["a.b"].name must be a string, got 1',
        ),
        ('{"v": 1, "items": {"a\\nb": {"name": "x", "count": 1, "at": "1"}}}', 'doc: items["a\\nb"].at must be a'),
        ('{"v": 1, "log": [{"name": "x", "count": true, "at": 1}]}', "doc: log[0].count must be an integer, got true"),
        (
            '{"v": 1, "log": [{"name": "x", "count": -1, "at": 1}]}',
            "doc: log[0].count must be greater than or equal to",
        ),
        ('{"v": 1, "log": [{"name": "x", "count": 1, "at": NaN}]}', "doc: log[0].at must be a finite number, got NaN"),
        ('{"v": 1, "log": [{"name": "x", "count": 1, "at": 1e999}]}', "doc: log[0].at must be a finite number"),
    ],
)
def test_a_bad_document_is_one_line_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        read(text)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_fields_a_newer_writer_added_are_kept_and_written_back_first() -> None:
    text = '{"z": [1, {"n": null}], "v": 3, "items": {"a": {"extra": 1, "name": "x", "count": 2, "at": 1.5}}}'
    doc = read(text)
    assert doc.extra == {"z": [1, {"n": None}]}
    assert doc.items["a"].extra == {"extra": 1}
    written = codec.dumps(DOC.dump_python(doc))
    assert written == '{"z":[1,{"n":null}],"v":3,"items":{"a":{"extra":1,"name":"x","count":2,"at":1.5}},"log":[]}'


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=12,
)
_items = st.builds(
    Item,
    name=st.text(),
    count=st.integers(0, 2**63),
    at=st.floats(allow_nan=False, allow_infinity=False),
    note=st.none() | st.text(),
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(), _items, max_size=3), st.lists(_items, max_size=3), st.integers(1, 2**40))
def test_any_document_round_trips(items: dict[str, Item], log: list[Item], v: int) -> None:
    doc = Doc(v=v, items=items, log=log)
    text = codec.dumps(DOC.dump_python(doc), ensure_ascii=False)
    assert read(text) == doc
    written = json.loads(text)["log"]
    assert [("note" in w) for w in written] == [item.note is not None for item in log]  # omitted when None


@settings(max_examples=300, deadline=None)
@given(_json)
def test_any_json_reads_or_fails_in_one_line(value: Any) -> None:
    problem = "doc: "
    try:
        read(json.dumps({"v": 1, "items": value}))
    except ValueError as exc:
        problem = str(exc)
    assert problem.startswith("doc: ")
    assert "\n" not in problem
