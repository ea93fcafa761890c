"""jobstate.store.worktree: what state/ holds beside HEAD, read under the lock; nothing of the user's is deleted."""

from __future__ import annotations

from pathlib import Path

from jobstate.core.layout import episode_dir

from .conftest import run_cli


def test_an_empty_directory_in_state_is_reported_and_kept(repo: Path) -> None:
    (repo / "state" / "my-notes").mkdir()
    proc = run_cli("allocate", "--key", "a", "--week", "2026-W32", cwd=repo)
    assert proc.returncode == 2  # untracked: dirty state, proc.stderr
    assert "state/my-notes is an empty directory that jobstate did not write" in proc.stderr
    assert (repo / "state" / "my-notes").is_dir()


def test_a_directory_of_our_temp_files_only_is_a_killed_write_and_is_cleared(repo: Path) -> None:
    leftover = repo / episode_dir("2026-W32-0")
    leftover.mkdir(parents=True)
    (leftover / ".tmp-abc123").write_bytes(b"half")
    proc = run_cli("allocate", "--key", "a", "--week", "2026-W32", cwd=repo)
    assert (proc.returncode, proc.stdout) == (0, "2026-W32-0\n"), proc.stderr
    assert not (leftover / ".tmp-abc123").exists()
    assert (leftover / "episode.yaml").is_file()


def test_a_directory_with_a_file_of_the_users_is_never_deleted(repo: Path) -> None:
    odd = repo / episode_dir("2026-W32-0")
    odd.mkdir(parents=True)
    (odd / "draft.txt").write_text("mine")
    proc = run_cli("allocate", "--key", "a", "--week", "2026-W32", cwd=repo)
    assert proc.returncode == 2  # untracked: dirty state, proc.stderr
    assert (odd / "draft.txt").read_text() == "mine"
