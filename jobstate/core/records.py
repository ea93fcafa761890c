"""Records stored as YAML, with schema checks. Pure: values in, values out."""

from __future__ import annotations

import reprlib
from collections.abc import Collection
from enum import StrEnum
from typing import Any, NamedTuple

from jobstate.core.keys import validate_key
from jobstate.core.layout import episode_dir
from jobstate.core.periods import parse_episode_id, parse_period
from jobstate.errors import StateInvalid, UsageError

SCHEMA = 1
EPISODE_FIELDS = (
    "schema",
    "episode_id",
    "period_id",
    "week_id",
    "sequence",
    "allocation_key",
    "allocated_at",
    "status",
)


class AttemptState(StrEnum):
    """Where one attempt of a paid step stands (``state:`` in submissions.yaml).

    Write ``.value`` into YAML: the safe dumper knows plain strings only.
    """

    INTENT = "intent"  # committed before the body runs; unknown until accepted or resolved
    ACCEPTED = "accepted"  # the vendor's task reference is recorded: resume, never resubmit
    COMPLETED = "completed"
    NOT_SUBMITTED = "not-submitted"  # certainly never accepted: a new attempt may run
    SUPERSEDED = "superseded"  # an operator opened a new attempt for a changed request (jobstate resolve --supersede)


class Episode(NamedTuple):
    """One allocated episode: ``state/<episode_id>/episode.yaml``."""

    episode_id: str
    period_id: str
    period_kind: str
    sequence: int
    allocation_key: str
    allocated_at: str
    # what older jobstate versions wrote (``status: allocated``, never updated): kept as it is, never
    # read; a status is derived from the records (core.status), so new episodes store none
    status: str | None = None
    extra: dict[str, Any] = {}  # noqa: RUF012 - a NamedTuple default, never mutated: fields jobstate does not know

    @property
    def directory(self) -> str:
        """The episode's directory, relative to the repository root."""
        return episode_dir(self.episode_id)

    def to_yaml_dict(self) -> dict[str, Any]:
        """Fields in a fixed order; fields this version does not know are kept after them."""
        out: dict[str, Any] = {
            "schema": SCHEMA,
            "episode_id": self.episode_id,
            "period_id": self.period_id,
        }
        if self.period_kind == "iso-week":
            out["week_id"] = self.period_id
        out.update(
            sequence=self.sequence,
            allocation_key=self.allocation_key,
            allocated_at=self.allocated_at,
        )
        if self.status is not None:
            out["status"] = self.status
        out.update(self.extra)
        return out


def mapping_of(data: Any, where: str, what: str) -> dict[str, Any]:
    """``data`` when it is a mapping; StateInvalid ``<where>: <what> must be a mapping`` otherwise."""
    if not isinstance(data, dict):
        raise StateInvalid(f"{where}: {what} must be a mapping, found {reprlib.repr(data)}")
    return data


def one_of(value: Any, allowed: Collection[str], where: str, what: str) -> str:
    """``value`` when it is one of ``allowed``; StateInvalid ``<where>: unknown <what> ...`` otherwise."""
    if not isinstance(value, str) or value not in allowed:
        raise StateInvalid(f"{where}: unknown {what} {reprlib.repr(value)} (known: {', '.join(sorted(allowed))})")
    return value


def report_or_raise(exc: StateInvalid, source: str, problems: list[str] | None) -> None:
    """A malformed record found by a reader: raised, or with ``problems`` (verify, reviews) described
    there without ``source`` so that the reader can leave it out and go on."""
    if problems is None:
        raise exc
    problems.append(str(exc).removeprefix(f"{source}: "))


def _require(data: dict[str, Any], name: str, kind: type, source: str) -> Any:
    value = data.get(name)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise StateInvalid(f"{source}: field {name!r} must be a {kind.__name__}, found {reprlib.repr(value)}")
    return value


def episode_from_yaml_dict(data: Any, source: str, directory_name: str | None) -> Episode:
    """Check one loaded episode.yaml (or history file) and build the Episode it describes.

    ``directory_name`` is the name the file was found under; it must equal episode_id.
    """
    if not isinstance(data, dict):
        raise StateInvalid(f"{source}: expected a mapping of episode fields, found {type(data).__name__}")
    schema = data.get("schema")
    if schema is None and "episode_id" not in data:
        # what jobstate wrote before versioned IDs: migrate reads it, nothing else does
        raise StateInvalid(
            f"{source}: a legacy record (week-only ID, no schema); give it a versioned ID, run: jobstate migrate "
            "(jobstate migrate --dry-run shows the plan first)"
        )
    if schema != SCHEMA or isinstance(schema, bool):
        raise StateInvalid(
            f"{source}: unknown schema {schema!r} (this jobstate reads schema {SCHEMA}); "
            "upgrade jobstate or fix the file"
        )
    episode_id = _require(data, "episode_id", str, source)
    try:
        period, sequence = parse_episode_id(episode_id)
    except UsageError as exc:
        raise StateInvalid(f"{source}: {exc}") from None
    if directory_name is not None and directory_name != episode_id:
        raise StateInvalid(f"{source}: episode_id {episode_id!r} does not match its name {directory_name!r}")
    period_id = _require(data, "period_id", str, source)
    if period_id != period.id:
        raise StateInvalid(f"{source}: period_id {period_id!r} does not match episode_id {episode_id!r}")
    if "week_id" in data and data["week_id"] != period.id:
        raise StateInvalid(f"{source}: week_id {data['week_id']!r} does not match episode_id {episode_id!r}")
    seq = _require(data, "sequence", int, source)
    if seq != sequence:
        raise StateInvalid(f"{source}: sequence {seq} does not match episode_id {episode_id!r}")
    key = _require(data, "allocation_key", str, source)
    try:
        validate_key(key)
    except UsageError as exc:
        raise StateInvalid(f"{source}: {exc}") from None
    allocated_at = _require(data, "allocated_at", str, source)
    status = data.get("status")
    if status is not None and not isinstance(status, str):
        raise StateInvalid(f"{source}: status must be text, found {reprlib.repr(status)}")
    parse_period(period.id)
    extra = {k: v for k, v in data.items() if k not in EPISODE_FIELDS}
    return Episode(episode_id, period.id, period.kind, sequence, key, allocated_at, status, extra)


class HistoryRecord(NamedTuple):
    """What ``history/<id>.yaml`` must say: which episode it completes; the rest is optional."""

    episode_id: str
    period_id: str
    sequence: int
    allocation_key: str | None


def history_from_yaml_dict(data: Any, source: str, name: str) -> HistoryRecord:
    """Check a history file: schema 1 and an episode_id equal to its name; other episode fields,
    where present (``jobstate complete`` writes them all; a migration only the ID), must agree."""
    if not isinstance(data, dict):
        raise StateInvalid(f"{source}: expected a mapping")
    if data.get("schema") != SCHEMA or isinstance(data.get("schema"), bool):
        raise StateInvalid(f"{source}: unknown schema {reprlib.repr(data.get('schema'))} (expected {SCHEMA})")
    episode_id = _require(data, "episode_id", str, source)
    try:
        period, sequence = parse_episode_id(episode_id)
    except UsageError as exc:
        raise StateInvalid(f"{source}: {exc}") from None
    if episode_id != name:
        raise StateInvalid(f"{source}: episode_id {episode_id!r} does not match its name {name!r}")
    for field_name, expected in (("period_id", period.id), ("week_id", period.id), ("sequence", sequence)):
        if field_name in data and data[field_name] != expected:
            raise StateInvalid(f"{source}: {field_name} {reprlib.repr(data[field_name])} does not match {episode_id}")
    key = data.get("allocation_key")
    if key is not None:
        try:
            validate_key(key)
        except UsageError as exc:
            raise StateInvalid(f"{source}: {exc}") from None
    return HistoryRecord(episode_id, period.id, sequence, key)


class Allocation(NamedTuple):
    """The answer of allocate: the episode, and whether this call created it."""

    episode_id: str
    period_id: str
    sequence: int
    allocation_key: str
    created: bool
    recovered: bool = False

    def to_json(self) -> dict[str, object]:
        """The ``--json`` object."""
        return {
            "episode_id": self.episode_id,
            "period_id": self.period_id,
            "sequence": self.sequence,
            "allocation_key": self.allocation_key,
            "created": self.created,
        }
