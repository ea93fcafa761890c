"""jobstate: durable, idempotent episode IDs for recurring paid jobs, kept as YAML in Git.

Importing the package is cheap; the library API is loaded on first use. No subpackage may
share a public name: importing ``jobstate.allocate`` as a package would set that attribute on
this module and shadow the function (tests/test_public_api.py holds it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobstate.errors import (
    AllocationConflict,
    AlreadyRecorded,
    BudgetExceeded,
    EpisodeCompleted,
    EpisodeUnknown,
    FingerprintMismatch,
    JobstateError,
    LockTimeout,
    StateInvalid,
    StepAlreadyCompleted,
    StepRunning,
    SubmissionUnknown,
    UsageError,
)
from jobstate.version import __version__

if TYPE_CHECKING:
    from jobstate.allocation.allocation import allocate
    from jobstate.core.periods import Period, parse_period, period_of
    from jobstate.core.records import Allocation
    from jobstate.paid.probe import ProbeQuestion
    from jobstate.paid.step import paid_step
    from jobstate.store.store import Store
    from jobstate.store.store import open_store as open  # noqa: A004

__all__ = [
    "Allocation",
    "AllocationConflict",
    "AlreadyRecorded",
    "BudgetExceeded",
    "EpisodeCompleted",
    "EpisodeUnknown",
    "FingerprintMismatch",
    "JobstateError",
    "LockTimeout",
    "Period",
    "ProbeQuestion",
    "StateInvalid",
    "StepAlreadyCompleted",
    "StepRunning",
    "Store",
    "SubmissionUnknown",
    "UsageError",
    "__version__",
    "allocate",
    "open",
    "paid_step",
    "parse_period",
    "period_of",
]

_LAZY = {
    "Allocation": ("jobstate.core.records", "Allocation"),
    "allocate": ("jobstate.allocation.allocation", "allocate"),
    "paid_step": ("jobstate.paid.step", "paid_step"),
    "Period": ("jobstate.core.periods", "Period"),
    "ProbeQuestion": ("jobstate.paid.probe", "ProbeQuestion"),
    "parse_period": ("jobstate.core.periods", "parse_period"),
    "period_of": ("jobstate.core.periods", "period_of"),
    "Store": ("jobstate.store.store", "Store"),
    "open": ("jobstate.store.store", "open_store"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib  # noqa: PLC0415 - the package's own lazy-import boundary

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'jobstate' has no attribute {name!r}")
