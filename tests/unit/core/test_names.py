"""The names vigil checks as a user gives them, against the rules the apiserver and the broker apply."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vigil_core import names


@pytest.mark.parametrize(
    ("check", "value", "ok"),
    [
        (names.kubernetes_name, "vigil-operator", True),
        (names.kubernetes_name, "vigil.operator-1", True),
        (names.kubernetes_name, "a" * 253, True),
        (names.kubernetes_name, "a" * 254, False),
        (names.kubernetes_name, "Vigil", False),
        (names.kubernetes_name, "-vigil", False),
        (names.kubernetes_name, "vigil_operator", False),
        (names.kubernetes_name, "", False),
        (names.namespace_name, "vigil-system", True),
        (names.namespace_name, "a" * 63, True),
        (names.namespace_name, "a" * 64, False),
        (names.namespace_name, "vigil.system", False),
        (names.namespace_name, "", False),
        (names.topic_name, "vigil.events", True),
        (names.topic_name, "Vigil_Events-2", True),
        (names.topic_name, "a" * 249, True),
        (names.topic_name, "a" * 250, False),
        (names.topic_name, ".", False),
        (names.topic_name, "..", False),
        (names.topic_name, "vigil/events", False),
        (names.topic_name, "", False),
        (names.topic_or_off, "", True),
        (names.topic_or_off, "vigil events", False),
    ],
)  # fmt: skip
def test_a_name_is_accepted_or_refused_as_its_owner_would(check: object, value: str, ok: bool) -> None:
    assert callable(check)
    if ok:
        assert check(value) == value
    else:
        with pytest.raises(ValueError, match=r"^expected a "):
            check(value)


@given(st.text(max_size=300))
def test_a_refusal_is_one_bounded_line_and_an_accepted_name_is_returned_unchanged(value: str) -> None:
    for check in (names.kubernetes_name, names.namespace_name, names.topic_name):
        refusal: ValueError | None = None
        try:
            accepted = check(value)
        except ValueError as exc:
            refusal = exc
        if refusal is None:
            assert accepted == value
            assert re.fullmatch(r"[a-zA-Z0-9._-]+", value)
        else:
            assert len(str(refusal)) < 400  # a pasted blob is cut in the message
            assert "\n" not in str(refusal)
