"""Property: whatever Git does to the state in between (rm, revert, reset, merge; the catalog
warm or deleted), no episode ID is ever handed out to two keys and no key ever gets two IDs."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobstate.allocation.allocation import allocate
from jobstate.core.layout import episode_dir
from jobstate.core.periods import parse_period
from jobstate.errors import AllocationConflict
from jobstate.store.init import init
from jobstate.store.store import Store

from .conftest import git

WEEKS = ("2026-W32", "2026-W33")
KEYS = ("k0", "k1", "k2", "k3")

OPS = st.one_of(
    st.tuples(st.just("allocate"), st.sampled_from(KEYS), st.sampled_from(WEEKS)),
    st.tuples(st.just("rm"), st.integers(0, 7)),
    st.tuples(st.just("revert"), st.integers(0, 7)),
    st.tuples(st.just("reset"), st.integers(1, 3)),
    st.tuples(st.just("merge"), st.integers(0, 7)),
    st.tuples(st.just("drop-catalog")),
)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "repo"
    path.mkdir()
    store, _ = init(path, git_init=True)
    store.close()
    return path


def _episodes(repo: Path) -> list[str]:
    return sorted(p.name for p in (repo / "state").iterdir() if p.is_dir())


def _try_git(repo: Path, *args: str) -> bool:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=False).returncode == 0


def _apply(repo: Path, op: tuple[object, ...]) -> None:
    """One Git operation that removes or restores state; one that cannot apply cleanly is undone."""
    kind = op[0]
    present = _episodes(repo)
    commits = git(repo, "rev-list", "--first-parent", "HEAD").split()[:-1]  # never the root commit
    if kind == "rm" and present:
        git(repo, "rm", "-rq", f"{episode_dir(present[int(str(op[1])) % len(present)])}")
        git(repo, "commit", "-qm", "remove")
    elif kind == "revert" and commits:
        if not _try_git(repo, "revert", "--no-edit", "-m", "1", commits[int(str(op[1])) % len(commits)]):
            _try_git(repo, "revert", "--abort")
            _try_git(repo, "revert", "--no-edit", commits[int(str(op[1])) % len(commits)]) or _try_git(
                repo, "revert", "--abort"
            )
    elif kind == "reset" and len(commits) > int(str(op[1])):
        git(repo, "reset", "-q", "--hard", f"HEAD~{op[1]}")
    elif kind == "merge" and present:
        # a side branch with unrelated work, merged with a resolution that drops a directory
        git(repo, "checkout", "-qb", "side")
        (repo / "notes.txt").write_text(f"{op}\n")
        git(repo, "add", "notes.txt")
        git(repo, "commit", "-qm", "side work")
        git(repo, "checkout", "-q", "-")  # back to the branch, whatever its name
        git(repo, "merge", "-q", "--no-ff", "--no-commit", "side")
        git(repo, "rm", "-rq", f"{episode_dir(present[int(str(op[1])) % len(present)])}")
        git(repo, "commit", "-qm", "merge side")
        git(repo, "branch", "-qD", "side")
    elif kind == "drop-catalog":
        (repo / ".jobstate" / "catalog.sqlite").unlink(missing_ok=True)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(OPS, min_size=1, max_size=8))
def test_no_id_goes_to_two_keys_and_no_key_gets_two_ids(template: Path, ops: list[tuple[object, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        shutil.copytree(template, repo, symlinks=True)
        owner: dict[str, str] = {}  # episode ID -> the key it was handed to
        given_to: dict[str, str] = {}  # key -> the episode ID it got
        for op in [*ops, ("allocate", "k0", WEEKS[0]), ("allocate", "k1", WEEKS[0])]:
            if op[0] != "allocate":
                _apply(repo, op)
                continue
            key, week = str(op[1]), str(op[2])
            with Store(repo, lock_timeout=10) as store:
                try:
                    got = allocate(store, key, parse_period(week), keep_period=True)
                except AllocationConflict:
                    continue  # refused (the key's episode vanished or was retired): never a second ID
            assert owner.setdefault(got.episode_id, key) == key, (
                f"{got.episode_id} handed to {owner[got.episode_id]} and {key}"
            )
            assert given_to.setdefault(key, got.episode_id) == got.episode_id, (
                f"{key} got {given_to[key]} and {got.episode_id}"
            )
