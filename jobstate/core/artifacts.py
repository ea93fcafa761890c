"""``artifacts.yaml``: the files a paid step recorded, typed. One reader, one writer. Pure.

A current record is ``{path: {sha256, size, step}}``; a legacy episode.yaml (and a migrated one,
which keeps its fields) holds ``{path: 'sha256:<hex>'}`` or the bare ``{path: <hex>}`` some
pipelines wrote. One reader takes all three, for the commands, ``verify`` and the reviews alike.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Mapping
from typing import Any, NamedTuple

from jobstate.core.names import validate_artifact_path
from jobstate.core.records import report_or_raise
from jobstate.errors import StateInvalid, UsageError

SCHEMA = 1
_SHA256 = re.compile(r"[0-9a-f]{64}")


class Artifact(NamedTuple):
    """One recorded file: its sha256 and size (None in a legacy record), and the step that wrote it."""

    sha256: str
    size: int | None
    step: str | None
    stored: Any  # the value as stored (a mapping, or a legacy 'sha256:<hex>' text): what the writer writes

    def to_yaml(self) -> Any:
        """What artifacts.yaml (or a history file) holds for this file."""
        return dict(self.stored) if isinstance(self.stored, dict) else self.stored


def new_artifact(sha256: str, size: int, step: str) -> Artifact:
    """An artifact as a paid step records it."""
    return artifact_from_yaml({"sha256": sha256, "size": size, "step": step}, "artifact", "?")


def artifact_from_yaml(value: Any, source: str, name: str, *, legacy: bool = False) -> Artifact:
    """Check one record, in either layout (the bare hex form only in a ``legacy`` one: an episode.yaml
    or a history file); anything malformed is StateInvalid naming ``source``."""
    if isinstance(value, str) and value.startswith("sha256:") and _SHA256.fullmatch(value[7:]):
        return Artifact(value[7:], None, None, value)
    if legacy and isinstance(value, str) and _SHA256.fullmatch(value):
        return Artifact(value, None, None, value)
    if isinstance(value, dict):
        sha, size, step = value.get("sha256"), value.get("size"), value.get("step")
        if (
            isinstance(sha, str)
            and _SHA256.fullmatch(sha)
            and isinstance(size, int)
            and not isinstance(size, bool)
            and size >= 0
            and (step is None or isinstance(step, str))
        ):
            return Artifact(sha, size, step, dict(value))
    raise StateInvalid(
        f"{source}: artifact {name!r}: expected {{sha256: <64 lowercase hex>, size: <bytes>}} (or, in a legacy "
        f"record, 'sha256:<64 lowercase hex>' or the 64 hex digits alone), found {reprlib.repr(value)}"
    )


def artifact_map(
    value: Any, source: str, problems: list[str] | None = None, *, legacy: bool = False
) -> dict[str, Artifact]:
    """The ``artifacts`` mapping of a record file (or, ``legacy``, of an episode.yaml or a history file):
    path -> Artifact.

    Without ``problems`` the first malformed record raises StateInvalid; with it (verify), each is
    described there, without ``source``, and left out.
    """
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise StateInvalid(f"{source}: artifacts must be a mapping of path to hash")
    out: dict[str, Artifact] = {}
    for name, record in value.items():
        try:
            try:
                validate_artifact_path(name)  # the writer's rule, so no reader sees a path it would refuse
            except UsageError as exc:
                raise StateInvalid(f"{source}: {exc}") from None
            out[str(name)] = artifact_from_yaml(record, source, str(name), legacy=legacy)
        except StateInvalid as exc:
            report_or_raise(exc, source, problems)
    return out


def artifacts_from_yaml_dict(data: Any, source: str, problems: list[str] | None = None) -> dict[str, Artifact]:
    """Check a loaded artifacts.yaml."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise StateInvalid(f"{source}: expected a mapping with schema: {SCHEMA}")
    if not isinstance(data.get("artifacts", {}), dict):
        raise StateInvalid(f"{source}: artifacts must be a mapping of path to hash")
    return artifact_map(data.get("artifacts", {}), source, problems)


def artifacts_to_yaml_dict(found: Mapping[str, Artifact]) -> dict[str, Any]:
    """The whole file for ``found``, in path order."""
    return {"schema": SCHEMA, "artifacts": {path: a.to_yaml() for path, a in sorted(found.items())}}
