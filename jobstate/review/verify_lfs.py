"""Artifacts kept in Git LFS: checked against their pointer when only the pointer is at hand. Read-only.

In ``--rev`` mode Git objects hold the pointer, never the file: the pointer's
``oid`` and ``size`` are what the commit says about the artifact, so they are
compared with the record. In the work tree a pointer means the LFS object was
not fetched: the same comparison is made, and a warning says the file itself
was not checked. A file that is present is hashed as any other.
"""

from __future__ import annotations

import hashlib

from jobstate.core.lfs import POINTER_MAX, parse_pointer
from jobstate.git.attributes import lfs_tracked
from jobstate.store.snapshot import FileEntry, Revision, Snapshot, WorkTree

Finding = tuple[str, str, str]  # path, message, severity


def check_pointers(
    snap: Snapshot, entries: list[FileEntry], expected: dict[str, tuple[str, int | None]]
) -> tuple[set[str], list[Finding]]:
    """The artifacts settled by their LFS pointer (no hashing needed), and what was found about them."""
    small = [e for e in entries if e.size < POINTER_MAX]
    if isinstance(snap, Revision) and small:
        snap.prefetch([e.path for e in small])
    settled: set[str] = set()
    findings: list[Finding] = []
    pointers: dict[str, bytes] = {}
    for entry in small:
        try:
            data = snap.read(entry.path)
        except OSError:
            continue  # reported when it is hashed
        if parse_pointer(data) is not None and hashlib.sha256(data).hexdigest() != expected[entry.path][0]:
            pointers[entry.path] = data  # else a real (small) file: hashed as any other
    # a pointer stands for the file only where Git LFS keeps it: elsewhere the bytes are simply gone
    if isinstance(snap, Revision):
        tracked = lfs_tracked(snap.cwd, sorted(pointers), snap.commit)
    elif isinstance(snap, WorkTree):
        tracked = lfs_tracked(snap.root, sorted(pointers), None)
    else:
        tracked = set(pointers)  # a snapshot with no attributes of its own (a change overlaid)
    for entry in small:
        if entry.path not in pointers:
            continue
        if entry.path not in tracked:
            settled.add(entry.path)
            findings.append(
                (
                    entry.path,
                    "is a Git LFS pointer, but no filter=lfs attribute applies to it here: the artifact's bytes "
                    "are not in this revision (a pointer in place of the file)",
                    "error",
                )
            )
            continue
        want_sha, want_size = expected[entry.path]
        pointer = parse_pointer(pointers[entry.path])
        assert pointer is not None  # kept above only when it parses
        settled.add(entry.path)
        if pointer.sha256 != want_sha:
            findings.append(
                (
                    entry.path,
                    f"Git LFS pointer oid sha256:{pointer.sha256[:16]}… does not match recorded {want_sha[:16]}…",
                    "error",
                )
            )
        elif want_size is not None and pointer.size != want_size:
            findings.append(
                (entry.path, f"Git LFS pointer size {pointer.size} does not match recorded {want_size}", "error")
            )
        elif not isinstance(snap, Revision):
            findings.append(
                (
                    entry.path,
                    "Git LFS object not fetched (a pointer is checked out): checked against its pointer only; "
                    "git lfs pull, then verify again, checks the file itself",
                    "warning",
                )
            )
    return settled, findings
