"""The fence, called directly: each refusal with its exact class and line, and what passes it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jobstate.allocation.allocation import allocate
from jobstate.core.layout import episode_dir, history_path
from jobstate.core.periods import parse_period
from jobstate.errors import DirtyState, EpisodeCompleted, EpisodeUnknown, UsageError
from jobstate.paid.guard import guard
from jobstate.store.store import Store

from .conftest import git, status

EID = "2026-W32-0"


@pytest.fixture
def episode(store: Store) -> str:
    assert allocate(store, "k", parse_period("2026-W32")).episode_id == EID
    return EID


def test_a_committed_clean_episode_passes(store: Store, episode: str) -> None:
    got = guard(store, episode)
    assert (got.episode_id, got.allocation_key) == (EID, "k")


@pytest.mark.parametrize("eid", ["2026-W32", "../../etc"])
def test_a_malformed_id_is_a_usage_error(store: Store, eid: str) -> None:
    with pytest.raises(UsageError) as info:
        guard(store, eid)
    assert type(info.value) is UsageError
    assert str(info.value) == (
        f"invalid episode ID {eid!r}: expected <period>-<sequence>, e.g. 2026-W32-0; "
        "give the explicit ID of an allocated episode"
    )


def test_an_unknown_episode(store: Store, repo: Path, episode: str) -> None:
    with pytest.raises(EpisodeUnknown) as info:
        guard(store, "2026-W32-1")
    assert str(info.value) == (
        f"episode 2026-W32-1 does not exist in {repo / 'state'}; allocate it first with: "
        "jobstate allocate --key KEY --date YYYY-MM-DD"
    )


def test_an_uncommitted_episode_is_refused_before_anything_is_moved(store: Store, repo: Path, episode: str) -> None:
    git(repo, "rm", "-r", "-q", "--cached", f"{episode_dir(EID)}")
    git(repo, "commit", "-qm", "forget it")
    (repo / episode_dir(EID) / "notes.txt").write_text("mine\n")
    told: list[str] = []
    with pytest.raises(EpisodeUnknown) as info:
        guard(store, episode, notify=told.append)
    assert str(info.value) == (f"episode {EID} is not committed; run the same jobstate allocate again to commit it")
    assert (repo / episode_dir(EID) / "notes.txt").read_text() == "mine\n"
    assert told == []


_SHOW = (
    f"(git status --ignored -- {episode_dir(EID)}): jobstate acts only on an episode exactly as committed, "
    "so nothing was run"
)


def test_an_edited_record_is_dirty(store: Store, repo: Path, episode: str) -> None:
    path = repo / episode_dir(EID) / "episode.yaml"
    path.write_text(path.read_text() + "# edited\n")
    with pytest.raises(DirtyState) as info:
        guard(store, episode)
    assert str(info.value) == (
        f"{episode_dir(EID)}/episode.yaml in episode {EID} differs from what is committed {_SHOW}; commit it, "
        f"or restore it with: git checkout HEAD -- {episode_dir(EID)}/episode.yaml"
    )
    # outside the lock (clean=False) only existence and the commit are checked
    assert guard(store, episode, clean=False).episode_id == EID


def test_a_users_file_is_refused_and_never_moved(store: Store, repo: Path, episode: str) -> None:
    (repo / episode_dir(EID) / "notes.txt").write_bytes(b"mine")
    told: list[str] = []
    with pytest.raises(DirtyState) as info:
        guard(store, episode, notify=told.append)
    assert str(info.value) == (
        f"{episode_dir(EID)}/notes.txt in episode {EID} is not committed {_SHOW}; move it out of the episode directory "
        "(or commit it)"
    )
    assert (repo / episode_dir(EID) / "notes.txt").read_bytes() == b"mine"
    assert told == []
    assert not (repo / ".jobstate" / "leftovers").exists()


def test_a_git_ignored_file_is_refused(store: Store, repo: Path, episode: str) -> None:
    (repo / ".git" / "info" / "exclude").write_text("*.log\n")
    (repo / episode_dir(EID) / "notes.log").write_bytes(b"mine")
    with pytest.raises(DirtyState, match=f"^{episode_dir(EID)}/notes.log in episode {EID} is git-ignored but inside"):
        guard(store, episode)
    assert (repo / episode_dir(EID) / "notes.log").read_bytes() == b"mine"


def test_a_symlink_in_the_episode_is_refused(store: Store, repo: Path, episode: str, tmp_path: Path) -> None:
    os.symlink(tmp_path, repo / episode_dir(EID) / "link")
    with pytest.raises(DirtyState) as info:
        guard(store, episode)
    assert str(info.value).startswith(
        f"{episode_dir(EID)}/link in episode {EID} is not a plain file or directory as committed (a symlink, "
    )
    assert (repo / episode_dir(EID) / "link").is_symlink()


def test_a_killed_jobstate_writes_temp_file_is_removed_and_told(store: Store, repo: Path, episode: str) -> None:
    (repo / episode_dir(EID) / ".tmp-k1ll3d").write_bytes(b"half")
    told: list[str] = []
    assert guard(store, episode, notify=told.append).episode_id == EID
    assert not (repo / episode_dir(EID) / ".tmp-k1ll3d").exists()
    assert told == [f"removed {episode_dir(EID)}/.tmp-k1ll3d, left by an interrupted jobstate write"]
    assert status(repo) == ""


def test_an_edit_beside_a_killed_writes_temp_file_is_still_refused(store: Store, repo: Path, episode: str) -> None:
    (repo / episode_dir(EID) / ".tmp-k1ll3d").write_bytes(b"half")
    path = repo / episode_dir(EID) / "episode.yaml"
    path.write_text(path.read_text() + "# edited\n")
    told: list[str] = []
    with pytest.raises(DirtyState, match=f"^{episode_dir(EID)}/episode.yaml in episode {EID} differs"):
        guard(store, episode, notify=told.append)
    assert not (repo / episode_dir(EID) / ".tmp-k1ll3d").exists()  # jobstate's own temp file went; the edit stays
    assert len(told) == 1
    assert path.read_text().endswith("# edited\n")


def test_a_completed_episode_takes_no_more_payments(store: Store, repo: Path, episode: str) -> None:
    (repo / history_path(EID)).parent.mkdir(parents=True, exist_ok=True)
    (repo / history_path(EID)).write_text("schema: 1\n")
    with pytest.raises(EpisodeCompleted) as info:
        guard(store, episode)
    assert str(info.value) == f"episode {EID} is completed; nothing more can be paid for it or decided"
