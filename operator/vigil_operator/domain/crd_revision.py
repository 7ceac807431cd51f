"""Whether the ConsumerGroup CRD in the cluster is at least the one this operator ships.

Helm installs `crds/` once and never upgrades them, so after `helm upgrade` an operator can meet the previous
release's CRD: the apiserver would prune the status fields that CRD lacks, and the operator would lose state it
writes (a rollout's progress) without an error. The CRD carries a revision, raised with every schema change; an
operator refuses to start on a lower one. A higher one (a newer release's CRD) is fine: schemas only grow.
"""

from collections.abc import Mapping
from typing import Any, Final

ANNOTATION: Final = "vigil.dev/crd-revision"
"""On the CRD's metadata: an integer as a string; absent on the CRDs before it was introduced (revision 1)."""
UNMARKED: Final = 1
FIX: Final = "run `vigil crd apply` (Helm never upgrades CRDs), then restart the operator"


def revision(crd: Mapping[str, Any]) -> int:
    """The CRD's revision; UNMARKED for one without the annotation or with one that is not a positive integer."""
    raw = ((crd.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
    if isinstance(raw, str) and raw.isdigit() and int(raw) > 0:
        return int(raw)
    return UNMARKED


def problem(installed: Mapping[str, Any] | None, shipped: Mapping[str, Any]) -> str | None:
    """One line saying why the operator cannot run on `installed`, or None when it can."""
    name = (shipped.get("metadata") or {}).get("name", "the ConsumerGroup CRD")
    if installed is None:
        return f"the CRD {name} is not installed: {FIX}"
    have, need = revision(installed), revision(shipped)
    if have < need:
        return f"the CRD {name} in the cluster is revision {have}, this operator needs {need}: {FIX}"
    return None
