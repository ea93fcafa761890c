"""The fence, called directly: each refusal with its exact class and line, and what passes it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jobstate.allocate.allocation import allocate
from jobstate.core.periods import parse_period
from jobstate.errors import DirtyState, EpisodeUnknown, StepRunning, UsageError
from jobstate.paid.guard import guard
from jobstate.store.store import Store

from .conftest import git, status

EID = "2026-W32-0"
# holds steps' locks in a process of its own (the guard ignores its own process's locks) until stdin closes
_HOLD = """
import contextlib, sys
from pathlib import Path
from jobstate.store.lock import FileLock
with contextlib.ExitStack() as stack:
    for path in sys.argv[1:]:
        stack.enter_context(FileLock(Path(path), 5))
    print("held", flush=True)
    sys.stdin.read()
"""


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


def test_an_unknown_episode(store: Store, episode: str) -> None:
    with pytest.raises(EpisodeUnknown) as info:
        guard(store, "2026-W32-1")
    assert str(info.value) == (
        "episode 2026-W32-1 does not exist; allocate it first with: jobstate allocate --key KEY --date YYYY-MM-DD"
    )


def test_an_uncommitted_episode_is_refused_before_anything_is_moved(store: Store, repo: Path, episode: str) -> None:
    git(repo, "rm", "-r", "-q", "--cached", f"state/{EID}")
    git(repo, "commit", "-qm", "forget it")
    (repo / "state" / EID / "notes.txt").write_text("mine\n")
    told: list[str] = []
    with pytest.raises(EpisodeUnknown) as info:
        guard(store, episode, notify=told.append)
    assert str(info.value) == (f"episode {EID} is not committed; run the same jobstate allocate again to commit it")
    assert (repo / "state" / EID / "notes.txt").read_text() == "mine\n"
    assert told == []


def test_an_edited_record_is_dirty(store: Store, repo: Path, episode: str) -> None:
    path = repo / "state" / EID / "episode.yaml"
    path.write_text(path.read_text() + "# edited\n")
    with pytest.raises(DirtyState) as info:
        guard(store, episode)
    assert str(info.value) == (
        f"state/{EID}/episode.yaml in episode {EID} differs from what is committed; commit it or restore it "
        f"(git checkout -- state/{EID}/episode.yaml) before a paid step (git status -- state/{EID})"
    )
    # outside the lock (clean=False) only existence and the commit are checked
    assert guard(store, episode, clean=False).episode_id == EID


def test_a_killed_steps_output_is_put_aside_and_told(store: Store, repo: Path, episode: str) -> None:
    (repo / "state" / EID / "out.bin").write_bytes(b"half")
    told: list[str] = []
    assert guard(store, episode, notify=told.append).episode_id == EID
    assert not (repo / "state" / EID / "out.bin").exists()
    assert len(told) == 1
    assert told[0].startswith(f"moved state/{EID}/out.bin to .jobstate/leftovers/{EID}/"), told
    assert [p.read_bytes() for p in (repo / ".jobstate" / "leftovers" / EID).glob("*/out.bin")] == [b"half"]
    assert status(repo) == ""


def test_an_edit_beside_a_killed_steps_output_is_still_refused(store: Store, repo: Path, episode: str) -> None:
    (repo / "state" / EID / "out.bin").write_bytes(b"half")
    path = repo / "state" / EID / "episode.yaml"
    path.write_text(path.read_text() + "# edited\n")
    told: list[str] = []
    with pytest.raises(DirtyState, match=f"^state/{EID}/episode.yaml in episode {EID} differs"):
        guard(store, episode, notify=told.append)
    assert not (repo / "state" / EID / "out.bin").exists()  # the output went aside; the person's edit stays
    assert len(told) == 1
    assert path.read_text().endswith("# edited\n")


def test_output_of_a_step_running_in_another_process_is_left_alone(store: Store, repo: Path, episode: str) -> None:
    steps = repo / ".jobstate" / "steps"
    steps.mkdir(parents=True, exist_ok=True)
    locks = [str(steps / f"{EID}.{step}.lock") for step in ("render", "generate")]
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, *locks], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        (repo / "state" / EID / "writing.bin").write_bytes(b"...")
        with pytest.raises(StepRunning) as info:
            guard(store, episode)
        assert str(info.value) == (
            f"step generate, render of {EID} is running now and has written state/{EID}/writing.bin, "
            "not recorded yet: wait for it to finish, then run this again"
        )
        assert (repo / "state" / EID / "writing.bin").exists()
        # an edited record beside it is the user's: dirty, whoever runs
        path = repo / "state" / EID / "episode.yaml"
        path.write_text(path.read_text() + "# edited\n")
        with pytest.raises(DirtyState):
            guard(store, episode)
    finally:
        holder.communicate("", timeout=30)


def test_a_completed_episode_takes_no_more_payments(store: Store, repo: Path, episode: str) -> None:
    (repo / "history").mkdir(exist_ok=True)
    (repo / "history" / f"{EID}.yaml").write_text("schema: 1\n")
    with pytest.raises(EpisodeUnknown) as info:
        guard(store, episode)
    assert str(info.value) == f"episode {EID} is already completed; nothing more can be paid for it"
