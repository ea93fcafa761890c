"""Artifacts streamed into Git (never held whole), and the objects of a commit that does not land taken back
(issue 29, point 4). The memory figure itself (1 KB beside 512 MB) is in ``make bench``."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobstate.allocation.allocation import allocate
from jobstate.core.periods import parse_period
from jobstate.errors import JobstateError
from jobstate.git.repo import GitRepo
from jobstate.paid.step import paid_step
from jobstate.store.store import Store

from .conftest import FIXED, both_formats, git, run_cli, status
from .fakegit import git_on_path
from .test_verify_lfs import CLEAN

W32 = parse_period("2026-W32")


def _loose(repo: Path) -> set[str]:
    objects = repo / ".git" / "objects"
    return {d.name + f.name for d in objects.iterdir() if len(d.name) == 2 for f in d.iterdir()}


def _unreachable(repo: Path) -> list[str]:
    out = git(repo, "fsck", "--unreachable", "--no-progress", "--no-dangling")
    return [line for line in out.splitlines() if line.startswith("unreachable")]


@both_formats
@pytest.mark.parametrize("size", [0, 1, (1 << 20) + 3])
def test_a_blob_streamed_from_a_descriptor_is_the_blob_git_writes(repo: Path, size: int) -> None:
    data = os.urandom(size)
    (repo / "art.bin").write_bytes(data)
    digest = hashlib.sha256()
    fd = os.open(repo / "art.bin", os.O_RDONLY)
    try:
        blob = GitRepo(repo).write_blob_from(fd, size, digest.update)
    finally:
        os.close(fd)
    assert blob.sha == git(repo, "hash-object", "art.bin").strip()
    proc = subprocess.run(["git", "cat-file", "blob", blob.sha], cwd=repo, capture_output=True, check=True)
    assert proc.stdout == data
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest()


def test_a_file_that_changed_while_it_was_read_is_refused_and_nothing_is_stored(repo: Path) -> None:
    (repo / "art.bin").write_bytes(b"x" * 4096)
    before = _loose(repo)
    for claimed in (100, 5000):  # grew, or shrank, since it was opened
        fd = os.open(repo / "art.bin", os.O_RDONLY)
        try:
            with pytest.raises(ValueError, match="changed while it was read"):
                GitRepo(repo).write_blob_from(fd, claimed, lambda _chunk: None)
        finally:
            os.close(fd)
    assert _loose(repo) == before
    assert not [p for p in (repo / ".git" / "objects").iterdir() if p.name.startswith("tmp_obj")]


def test_an_artifact_under_a_clean_filter_is_committed_as_git_add_would(repo: Path, tmp_path: Path) -> None:
    clean = tmp_path / "lfs_clean.py"
    clean.write_text(CLEAN)
    git(repo, "config", "filter.lfs.clean", f"{sys.executable} {clean}")
    git(repo, "config", "filter.lfs.required", "true")
    (repo / ".gitattributes").write_text((repo / ".gitattributes").read_text() + "*.mp4 filter=lfs -text\n")
    git(repo, "commit", "-qam", "media in LFS")
    video = os.urandom(300_000)
    with Store(repo, now=lambda: FIXED, lock_timeout=5) as store:
        eid = allocate(store, "k", W32).episode_id
        with paid_step(store, eid, "generate") as step:
            step.accepted("task-1")
            (step.output_dir / "final.mp4").write_bytes(video)
            step.artifact("final.mp4")
    path = f"state/2026/2026-W32/{eid}/final.mp4"
    assert (repo / path).read_bytes() == video  # the work tree has the file, the commit what the filter made
    assert git(repo, "cat-file", "blob", f"HEAD:{path}").startswith("version https://git-lfs.github.com/spec/v1")
    assert status(repo) == ""


def test_a_commit_that_cannot_land_takes_back_its_objects_and_the_next_command_the_rest(repo: Path) -> None:
    with Store(repo, now=lambda: FIXED, lock_timeout=5) as store:
        eid = allocate(store, "k", W32).episode_id
    assert _unreachable(repo) == []
    branch = git(repo, "symbolic-ref", "HEAD").strip()
    held = repo / ".git" / f"{branch}.lock"
    with Store(repo, now=lambda: FIXED, lock_timeout=1) as store:
        with pytest.raises(JobstateError, match=r"\.lock"), paid_step(store, eid, "generate") as step:
            (step.output_dir / "cover.png").write_bytes(os.urandom(2 << 20))
            step.artifact("cover.png")
            held.write_text("")  # another git holds the branch: the closing commit cannot land
        # the commit's blobs, trees and commit are gone already; the reported artifact's blob stays for a retry
        assert [line.split()[1] for line in _unreachable(repo)] == ["blob"]
    held.unlink()
    assert len(_unreachable(repo)) == 1, "closing leaves it listed for the next command"
    assert run_cli("allocate", "--key", "other", "--week", "2026-W32", cwd=repo).returncode == 0
    assert _unreachable(repo) == []
    assert git(repo, "fsck", "--no-progress", "--connectivity-only").strip() == ""


_KILL_AFTER = """#!/bin/sh
if [ "$1" = "{command}" ] && [ -f "$KILL_ARMED" ]; then
  rm -f "$KILL_ARMED"; {then}
fi
exec {real} "$@"
"""


@pytest.mark.parametrize("landed", [False, True], ids=["before the branch moved", "just after it moved"])
def test_a_command_killed_mid_commit_leaves_what_it_wrote_to_the_next_command(
    repo: Path, tmp_path: Path, landed: bool
) -> None:
    run_cli("allocate", "--key", "first", "--week", "2026-W32", cwd=repo)
    then = '{real} "$@"; kill -9 $PPID; exit 0' if landed else "kill -9 $PPID; sleep 5; exit 1"
    env = git_on_path(tmp_path, _KILL_AFTER.replace("{command}", "update-ref").replace("{then}", then))
    (tmp_path / "armed").write_text("")
    env = {**os.environ, **env, "KILL_ARMED": str(tmp_path / "armed")}
    head = git(repo, "rev-parse", "HEAD").strip()
    proc = subprocess.run(
        [sys.executable, "-m", "jobstate", "allocate", "--key", "second", "--week", "2026-W32"],
        cwd=repo, capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == -9, proc.stderr
    assert (git(repo, "rev-parse", "HEAD").strip() != head) is landed
    assert list((repo / ".jobstate" / "journal").iterdir()), "the killed command's journal is left"
    assert _unreachable(repo) != [] or landed
    again = run_cli("allocate", "--key", "second", "--week", "2026-W32", cwd=repo)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "2026-W32-1"
    # a commit that was about to land keeps what it was built from (it may be on a remote): git gc judges it
    assert _unreachable(repo) == [] or not landed
    checked = git(repo, "fsck", "--no-progress", "--connectivity-only")
    assert "missing" not in checked, checked
    assert "broken" not in checked, checked
    assert not list((repo / ".jobstate" / "journal").iterdir())
    assert status(repo) == ""


def test_what_a_killed_commit_landed_and_a_reset_took_away_stays_for_the_reflog(repo: Path, tmp_path: Path) -> None:
    run_cli("allocate", "--key", "first", "--week", "2026-W32", cwd=repo)
    then = '{real} "$@"; kill -9 $PPID; exit 0'
    env = git_on_path(tmp_path, _KILL_AFTER.replace("{command}", "update-ref").replace("{then}", then))
    (tmp_path / "armed").write_text("")
    env = {**os.environ, **env, "KILL_ARMED": str(tmp_path / "armed")}
    proc = subprocess.run(
        [sys.executable, "-m", "jobstate", "allocate", "--key", "second", "--week", "2026-W32"],
        cwd=repo, capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == -9, proc.stderr
    landed = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "update-ref", "-m", "someone resets", "HEAD", "HEAD~1")  # the commit is only in the reflog now
    assert run_cli("allocate", "--key", "third", "--week", "2026-W31", cwd=repo).returncode == 0
    assert git(repo, "cat-file", "-t", landed).strip() == "commit"
    assert git(repo, "fsck", "--no-progress", "--connectivity-only").strip() == ""
