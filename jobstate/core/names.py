"""Pure checks of the names a paid step records: step names, vendor task references, artifact paths."""

from __future__ import annotations

import re
import reprlib
from pathlib import PurePosixPath

from jobstate.core.layout import RECORD_FILES
from jobstate.errors import UsageError

_STEP = re.compile(r"[a-z][a-z0-9_-]{0,39}")
MAX_REF = 200
MAX_PERSON = 200


def validate_step(step: object) -> str:
    """A step name: lower-case letters, digits, ``-`` and ``_``; at most 40 characters."""
    if not isinstance(step, str) or not _STEP.fullmatch(step):
        raise UsageError(
            f"invalid step name {reprlib.repr(step)}: use lower-case letters, digits, - and _ (e.g. generate)"
        )
    return step


def validate_remote_ref(ref: object) -> str:
    """A vendor's task reference: 1 to 200 printable characters."""
    if not isinstance(ref, str) or not ref or len(ref) > MAX_REF or not ref.isprintable():
        raise UsageError(f"invalid remote task reference {reprlib.repr(ref)}: 1 to {MAX_REF} printable characters")
    return ref


def validate_artifact_path(path: object) -> str:
    """A relative path inside the episode directory, in POSIX form; no ``..``, no absolute path."""
    if not isinstance(path, str) or not path or "\\" in path or "\0" in path or not path.isprintable():
        raise UsageError(
            f"invalid artifact path {reprlib.repr(path)}: give a relative path inside the episode directory"
        )
    pure = PurePosixPath(path)
    if pure.is_absolute() or any(part in ("..", ".", "") for part in path.split("/")):
        raise UsageError(f"artifact path {path!r} leaves the episode directory (no absolute paths, '.' or '..')")
    if any(part.startswith(".") for part in pure.parts):
        raise UsageError(f"artifact path {path!r} names a hidden file or directory (.git, ...)")
    # costs.yaml/cover.png could never be committed beside the record costs.yaml; case-insensitive
    # file systems take Costs.yaml for it too
    if pure.parts[0].casefold() in RECORD_FILES:
        raise UsageError(
            f"artifact path {path!r} is or passes through the jobstate record {pure.parts[0]!r}: "
            "give the artifact another name"
        )
    return path


def validate_person(by: object) -> str:
    """Who made a decision (``--by``): 1 to 200 printable characters, not only spaces."""
    if not isinstance(by, str) or not by.strip() or len(by) > MAX_PERSON or not by.isprintable():
        raise UsageError(f"invalid --by {reprlib.repr(by)}: say who decided in 1 to {MAX_PERSON} printable characters")
    return by


def validate_reason(reason: object) -> str:
    """Why a decision was made: text (lines allowed, output escapes it); no NUL, which Git cannot carry."""
    if not isinstance(reason, str) or "\0" in reason or any("\ud800" <= ch <= "\udfff" for ch in reason):
        raise UsageError(f"invalid reason {reprlib.repr(reason)}: give text without NUL characters")
    return reason
