"""jobstate: durable, idempotent episode IDs for recurring paid jobs, kept as YAML in Git.

Importing the package is cheap; the library API is loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobstate.errors import (
    AllocationConflict,
    EpisodeUnknown,
    JobstateError,
    LockTimeout,
    StateInvalid,
    SubmissionUnknown,
    UsageError,
)

__version__ = "0.1.0"

if TYPE_CHECKING:
    from jobstate.allocation import Allocation, allocate
    from jobstate.periods import Period, parse_period, period_of
    from jobstate.store import Store
    from jobstate.store import open_store as open  # noqa: A004

__all__ = [
    "Allocation",
    "AllocationConflict",
    "EpisodeUnknown",
    "JobstateError",
    "LockTimeout",
    "Period",
    "StateInvalid",
    "Store",
    "SubmissionUnknown",
    "UsageError",
    "allocate",
    "open",
    "parse_period",
    "period_of",
]

_LAZY = {
    "Allocation": ("jobstate.allocation", "Allocation"),
    "allocate": ("jobstate.allocation", "allocate"),
    "Period": ("jobstate.periods", "Period"),
    "parse_period": ("jobstate.periods", "parse_period"),
    "period_of": ("jobstate.periods", "period_of"),
    "Store": ("jobstate.store", "Store"),
    "open": ("jobstate.store", "open_store"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib  # noqa: PLC0415

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'jobstate' has no attribute {name!r}")
