"""The eviction budget: a per-group Kubernetes Lease through which sidecars share poll ages and grant permits.

`ledger` is the pure content model and permit rule; `lease_api` reads and compare-and-swaps the Lease over raw
HTTP (GET and PUT only). See README.md for the format, the RBAC and how the operator pre-creates the Lease.
"""

from vigil_core.budget.ledger import (
    ANNOTATION,
    Count,
    Entry,
    Ledger,
    LedgerDecodeError,
    Permit,
    PermitRecord,
    Refusal,
    RefusalCause,
    decide_permit,
    lease_name,
    publish,
    should_publish,
)

__all__ = [
    "ANNOTATION",
    "Count",
    "Entry",
    "Ledger",
    "LedgerDecodeError",
    "Permit",
    "PermitRecord",
    "Refusal",
    "RefusalCause",
    "decide_permit",
    "lease_name",
    "publish",
    "should_publish",
]
