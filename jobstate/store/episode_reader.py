"""The one reader of an episode's records, from any snapshot: the work tree, a Git revision, or a change
about to be written over the work tree (``Overlay``). This is a read-only operation."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from jobstate.core.episode_records import HISTORY, EpisodeRecords, Problems, fill, new_records
from jobstate.core.layout import APPROVAL, ARTIFACTS, COSTS, EPISODE_FILE, SUBMISSIONS, episode_dir, history_path
from jobstate.errors import StateInvalid, UsageError
from jobstate.git.snapshot import Snapshot
from jobstate.store.yamlio import loads

# episode.yaml first: the legacy fields it carries come before the record files; history last
_LEAVES = (EPISODE_FILE, SUBMISSIONS, COSTS, APPROVAL, ARTIFACTS)


def record_paths(name: str) -> list[tuple[str, str]]:
    """(path, leaf) of every file ``fill`` reads for the episode ``name``, in reading order."""
    base = episode_dir(name)
    return [(f"{base}/{leaf}", leaf) for leaf in _LEAVES] + [(history_path(name), HISTORY)]


def read_episode(
    snap: Snapshot, name: str, *, present: Collection[str] | None = None, problems: Problems | None = None
) -> EpisodeRecords:
    """The records of episode ``name`` in ``snap``; a file that is not there is an empty record.

    ``present``: the snapshot's files, when listed already (nothing else is tried). Without
    ``problems`` anything malformed is StateInvalid (exit 7); with it (reviews), each unreadable file
    or malformed part is described there and left out. This is a read-only operation.
    """
    records = new_records(name)
    if records is None:
        raise UsageError(f"{name!r} is not an episode ID")
    found: Problems = []
    for path, leaf in record_paths(name):
        if present is not None and path not in present:
            continue
        try:
            try:
                data = snap.read(path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise StateInvalid(f"{path}: cannot read: {exc.strerror}") from None
            fill(records, leaf, loads(data, path), path, found)
        except StateInvalid as exc:
            found.append((path, str(exc).removeprefix(f"{path}: ")))
            if problems is None:
                break
    if problems is None and found:
        raise StateInvalid(f"{found[0][0]}: {found[0][1]}")
    if problems is not None:
        problems += found
    return records


class Overlay(Snapshot):
    """A snapshot with some files replaced (None: removed): what a change would make of it."""

    def __init__(self, base: Snapshot, files: Mapping[str, bytes | None]) -> None:
        self.base, self.changed = base, files
        self.label = f"{base.label} with the change"

    def read(self, path: str) -> bytes:
        if path in self.changed:
            data = self.changed[path]
            if data is None:
                raise FileNotFoundError(path)
            return data
        return self.base.read(path)
