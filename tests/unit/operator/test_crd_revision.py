"""The CRD's revision: raised with every schema change, and an operator refuses a cluster whose CRD is older."""

import copy
import hashlib
import json
from typing import Any

import pytest

from vigil_operator import crd
from vigil_operator.domain import crd_revision

SPEC_HASHES = {
    2: "dfc403f32eacd2bbd860a1691ccf763d9a809b77fe7bb7ca164b3f12d9d0c211",
    3: "388af21ec25a01f2d1b6adcee1280ea4fca0005017e375e3f10324f38f87c468",  # bootstrapServers, serviceAccountName
    4: "3f8e53e95691043e5e2fe6bce8aac086e0e3f9ae94906ae5facd61b1b479ad9c",  # status.protocol: share, streams
    5: "1049858ad515d9651e60df216349e5e9194275bb77f3b255d97e56bcda456c9f",  # bridge.enabled: KIP-848 too
}
"""sha256 of the canonical JSON of each revision's `spec`. A change of the CRD's spec without a new revision fails
below: raise `vigil.dev/crd-revision` by one and record the new hash here (older operators keep working on the new
CRD; only a newer operator needs it)."""


def spec_hash(crd_object: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(crd_object["spec"], sort_keys=True).encode()).hexdigest()


def test_the_shipped_crd_spec_is_the_one_its_revision_recorded() -> None:
    shipped = crd.load()
    current = crd_revision.revision(shipped)
    assert current in SPEC_HASHES, f"record revision {current}'s hash {spec_hash(shipped)} in SPEC_HASHES"
    assert spec_hash(shipped) == SPEC_HASHES[current], (
        f"the CRD's spec changed under revision {current}: raise {crd_revision.ANNOTATION} to {current + 1} and "
        f"record {spec_hash(shipped)} for it"
    )
    assert current == max(SPEC_HASHES)


def with_revision(value: str | None) -> dict[str, Any]:
    found = copy.deepcopy(crd.load())
    annotations = found["metadata"].setdefault("annotations", {})
    if value is None:
        del annotations[crd_revision.ANNOTATION]
    else:
        annotations[crd_revision.ANNOTATION] = value
    return found


@pytest.mark.parametrize(
    ("value", "expected"),
    [("2", 2), ("17", 17), (None, 1), ("", 1), ("0", 1), ("-3", 1), ("2.0", 1), ("two", 1)],
)
def test_revision_reads_a_positive_integer_else_the_unmarked_one(value: str | None, expected: int) -> None:
    assert crd_revision.revision(with_revision(value)) == expected


def test_an_equal_or_newer_crd_is_fine() -> None:
    shipped = crd.load()
    need = crd_revision.revision(shipped)
    assert crd_revision.problem(shipped, shipped) is None
    assert crd_revision.problem(with_revision(str(need + 1)), shipped) is None


@pytest.mark.parametrize(
    ("installed", "says"),
    [
        (None, "is not installed"),
        ("unmarked", "is revision 1, this operator needs"),
        ("older", "this operator needs"),
    ],
)
def test_a_missing_or_older_crd_is_one_line_naming_the_fix(installed: str | None, says: str) -> None:
    shipped = crd.load()
    need = crd_revision.revision(shipped)
    found = {None: None, "unmarked": with_revision(None), "older": with_revision(str(need - 1))}[installed]
    line = crd_revision.problem(found, shipped)
    assert line is not None
    assert says in line
    assert "vigil crd apply" in line
    assert crd.NAME in line
    assert "\n" not in line
