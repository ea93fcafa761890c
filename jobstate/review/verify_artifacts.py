"""The artifacts a revision or the work tree records: present, no pointer in place of the file (Git LFS),
and every byte as recorded (sha256 and size, hashed in parallel). Part of ``jobstate verify``; read-only."""

from __future__ import annotations

from typing import Any

from jobstate.core.layout import episode_dir
from jobstate.core.names import validate_artifact_path
from jobstate.errors import UsageError
from jobstate.hashing import Progress
from jobstate.review.problem import Problem
from jobstate.review.verify_lfs import check_pointers
from jobstate.review.verify_report import Report
from jobstate.store.snapshot import Snapshot


def check_artifacts(
    snap: Snapshot,
    files: dict[str, Any],
    wanted: list[tuple[str, str, tuple[str, int | None]]],
    report: Report,
    *,
    hash_artifacts: bool,
    workers: int | None,
) -> None:
    """Check the recorded artifacts ``wanted`` (episode, path in it, (sha256, size)) into ``report``."""
    entries = []
    for name, rel, _expected in wanted:
        path = f"{episode_dir(name)}/{rel}"
        try:
            validate_artifact_path(rel)
        except UsageError as exc:
            report.problems.append(Problem(path, str(exc)))
            continue
        entry = files.get(path)
        if entry is None:
            report.problems.append(Problem(path, "recorded artifact is missing"))
        elif not entry.symlink:  # a symlink is flagged with every file jobstate never writes
            entries.append(entry)
    report.artifacts = len(wanted)
    report.artifact_bytes = sum(e.size for e in entries)
    if not hash_artifacts or not entries:
        return
    expected = {f"{episode_dir(name)}/{rel}": exp for name, rel, exp in wanted}
    by_pointer, findings = check_pointers(snap, entries, expected)
    report.problems.extend(Problem(*finding) for finding in findings)
    entries = [e for e in entries if e.path not in by_pointer]
    if not entries:
        return
    progress = Progress(report.artifact_bytes)
    try:
        digests = snap.hash(entries, workers, progress)
    finally:
        progress.finish()
    for path, found in sorted(digests.items()):
        if isinstance(found, OSError):
            report.problems.append(Problem(path, f"cannot read artifact: {found}"))
            continue
        want_sha, want_size = expected[path]
        if found[0] != want_sha:
            report.problems.append(Problem(path, f"sha256 {found[0][:16]}… does not match recorded {want_sha[:16]}…"))
        elif want_size is not None and found[1] != want_size:
            report.problems.append(Problem(path, f"size {found[1]} does not match recorded {want_size}"))
