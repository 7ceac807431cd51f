"""A SASL user name read from a Secret: a value that cannot be one is refused naming the field and the Secret."""

import pytest

from vigil_operator import credentials

SOURCE = "Secret shop/kafka key user"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"orders-app", "orders-app"),
        ("übung".encode(), "übung"),
    ],
)
def test_a_name_is_the_secrets_text(data: bytes, expected: str) -> None:
    assert credentials._username(data, SOURCE) == expected  # noqa: SLF001


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"\xff\xfe", "is not UTF-8 text"),
        (b"", "is empty"),
        (b" \n", "is empty"),
    ],
)
def test_a_value_that_cannot_be_a_name_is_one_line_naming_the_field(data: bytes, problem: str) -> None:
    with pytest.raises(ValueError, match=r"^spec\.kafka\.sasl\.usernameSecretRef: ") as refused:
        credentials._username(data, SOURCE)  # noqa: SLF001
    assert str(refused.value) == f"spec.kafka.sasl.usernameSecretRef: {SOURCE} {problem}"
