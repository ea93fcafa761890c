"""IDs handed out on two branches: refused off the state's branch, found at the merge (issue 30, 2)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jobstate.core.layout import episode_dir
from jobstate.store.yamlio import loads

from .conftest import git, run_cli, status

ROOT = Path(__file__).parent.parent


def _worktree(repo: Path, tmp_path: Path) -> Path:
    side = tmp_path / "side"
    git(repo, "worktree", "add", "-q", str(side), "-b", "side")
    return side


def _merge_keeping_theirs(repo: Path) -> None:
    """Merge side; the add/add conflict on the shared ID is resolved as people do, by taking one side."""
    proc = subprocess.run(
        ["git", "merge", "-q", "side", "-m", "merge side"], cwd=repo, capture_output=True, check=False
    )
    assert proc.returncode == 1, proc.stdout  # the conflict on state/<id>/episode.yaml
    git(repo, "checkout", "--theirs", "state")
    git(repo, "add", "-A", "state")


def test_init_records_the_state_branch_and_allocate_refuses_elsewhere(repo: Path, tmp_path: Path) -> None:
    config = loads((repo / "jobstate.yaml").read_bytes(), "jobstate.yaml")
    assert config["state_branch"] == "main"
    side = _worktree(repo, tmp_path)
    proc = run_cli("allocate", "--key", "b", "--week", "2026-W33", cwd=side)
    assert proc.returncode == 4, proc.stderr
    assert "state's branch" in proc.stderr
    assert "--any-branch" in proc.stderr
    assert not (side / episode_dir("2026-W33-0")).exists()
    forced = run_cli("allocate", "--key", "b", "--week", "2026-W33", "--any-branch", cwd=side)
    assert forced.returncode == 0, forced.stderr
    # a retry writes nothing, so it is answered on any branch
    assert run_cli("allocate", "--key", "b", "--week", "2026-W33", cwd=side).stdout.strip() == "2026-W33-0"


def test_a_repository_without_state_branch_allocates_on_any_branch(repo: Path, tmp_path: Path) -> None:
    text = (repo / "jobstate.yaml").read_text()
    (repo / "jobstate.yaml").write_text(text.split("# the branch whose")[0])
    git(repo, "commit", "-qam", "as an older jobstate wrote it")
    side = _worktree(repo, tmp_path)
    assert run_cli("allocate", "--key", "b", "--week", "2026-W33", cwd=side).returncode == 0


def test_one_id_on_two_branches_is_found_at_the_merge_and_the_advice_retires_nothing(
    repo: Path, tmp_path: Path
) -> None:
    base = git(repo, "rev-parse", "HEAD").strip()
    side = _worktree(repo, tmp_path)
    assert run_cli("allocate", "--key", "b", "--week", "2026-W33", "--any-branch", cwd=side).stdout == "2026-W33-0\n"
    assert run_cli("allocate", "--key", "a", "--week", "2026-W33", cwd=repo).stdout == "2026-W33-0\n"
    _merge_keeping_theirs(repo)
    # the pre-commit hook's check, while the merge is being committed
    staged = run_cli("verify", "--uncommitted-ok", cwd=repo)
    assert staged.returncode == 1, staged.stdout
    assert "ID handed out on two branches: 2026-W33-0 has keys 'a' and 'b'" in staged.stdout
    git(repo, "commit", "-qm", "merge side")
    after = run_cli("verify", cwd=repo)
    assert after.returncode == 1, after.stdout
    assert "merge " in after.stdout
    diff = run_cli("diff", "--strict", base, cwd=repo)
    assert diff.returncode == 1
    assert "ID handed out twice" in diff.stdout
    # key a lost its ID to key b's episode: retiring the ID would retire b's live episode
    again = run_cli("allocate", "--key", "a", "--week", "2026-W33", cwd=repo)
    assert again.returncode == 4
    assert "jobstate retire" not in again.stderr
    assert "no longer contains" not in again.stderr
    assert "do not retire 2026-W33-0" in again.stderr


@pytest.mark.parametrize("kept_first", [True, False], ids=["kept-key-older", "kept-key-newer"])
def test_a_fresh_clone_of_a_merge_that_kept_one_key_of_an_id_refuses_the_other_key(
    repo: Path, tmp_path: Path, kept_first: bool
) -> None:
    """A key the merge's resolution dropped was given (and maybe paid) on its branch: a fresh clone, which
    knows the history only, must refuse it too, whichever of the two additions is older (issue 29)."""
    side = _worktree(repo, tmp_path)
    first, second = (
        [("b", side, "--any-branch"), ("a", repo, "")]
        if kept_first
        else [
            ("a", repo, ""),
            ("b", side, "--any-branch"),
        ]
    )
    for key, where, flag in (first, second):
        got = run_cli("allocate", "--key", key, "--week", "2026-W33", *([flag] if flag else []), cwd=where)
        assert got.stdout == "2026-W33-0\n", got.stderr
    _merge_keeping_theirs(repo)  # keeps b's episode.yaml
    git(repo, "commit", "-qm", "merge side")
    git(repo, "worktree", "remove", "--force", str(side))
    git(repo, "branch", "-D", "side")  # only main's history reaches the clone
    fresh = tmp_path / "fresh"
    subprocess.run(["git", "clone", "-q", str(repo), str(fresh)], check=True)
    lost = run_cli("allocate", "--key", "a", "--week", "2026-W33", cwd=fresh)
    assert lost.returncode == 4, lost.stdout + lost.stderr
    assert "do not retire 2026-W33-0" in lost.stderr
    kept = run_cli("allocate", "--key", "b", "--week", "2026-W33", cwd=fresh)
    assert (kept.returncode, kept.stdout) == (0, "2026-W33-0\n"), kept.stderr
    assert status(fresh) == ""


def test_one_key_with_two_ids_across_a_merge_is_flagged(repo: Path, tmp_path: Path) -> None:
    base = git(repo, "rev-parse", "HEAD").strip()
    side = _worktree(repo, tmp_path)
    run_cli("allocate", "--key", "k", "--week", "2026-W33", "--any-branch", cwd=side)
    run_cli("allocate", "--key", "other", "--week", "2026-W34", cwd=repo)
    run_cli("allocate", "--key", "k", "--week", "2026-W34", cwd=repo)
    git(repo, "merge", "-q", "side", "-m", "merge side")  # no conflict: the IDs differ
    diff = run_cli("diff", "--strict", base, cwd=repo)
    assert diff.returncode == 1
    assert "key 'k' was given 2 IDs" in diff.stdout


def test_the_pre_commit_hook_runs_on_a_merge_commit(repo: Path, tmp_path: Path) -> None:
    hooks = loads((ROOT / ".pre-commit-hooks.yaml").read_bytes(), ".pre-commit-hooks.yaml")
    hook = next(h for h in hooks if h["id"] == "jobstate-verify")
    assert "pre-merge-commit" in hook["stages"]
    argv = shlex.split(hook["entry"])
    script = repo / ".git" / "hooks" / "pre-merge-commit"
    script.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m jobstate {shlex.join(argv[1:])}\n")
    script.chmod(0o755)
    side = _worktree(repo, tmp_path)
    run_cli("allocate", "--key", "k", "--week", "2026-W33", "--any-branch", cwd=side)
    run_cli("allocate", "--key", "k", "--week", "2026-W34", cwd=repo)
    head = git(repo, "rev-parse", "HEAD")
    proc = subprocess.run(
        ["git", "merge", "side", "-m", "merge side"], cwd=repo, capture_output=True, text=True, check=False
    )
    assert proc.returncode != 0, proc.stdout
    assert "key 'k' was given 2 IDs" in proc.stdout + proc.stderr
    assert git(repo, "rev-parse", "HEAD") == head  # the merge was not committed


def test_an_episode_a_merge_dropped_is_not_called_a_reset(repo: Path, tmp_path: Path) -> None:
    side = _worktree(repo, tmp_path)
    run_cli("allocate", "--key", "x", "--week", "2026-W33", "--any-branch", cwd=side)
    git(repo, "merge", "-q", "--no-commit", "--no-ff", "side")
    git(repo, "rm", "-rq", "--cached", "state/2026/2026-W33/2026-W33-0")
    shutil.rmtree(repo / episode_dir("2026-W33-0"))
    git(repo, "commit", "-qm", "a merge that dropped it")
    proc = run_cli("allocate", "--key", "x", "--week", "2026-W33", cwd=repo)
    assert proc.returncode == 4
    assert "no longer contains" not in proc.stderr
    assert "a merge did not keep it" in proc.stderr or "removed by commit" in proc.stderr


def _clone_whose_remote_head_names_a_missing_branch(repo: Path, tmp_path: Path) -> Path:
    """The state lives on trunk; the remote's HEAD still names master, which nobody ever pushed."""
    assert run_cli("allocate", "--key", "a", "--week", "2026-W40", cwd=repo).stdout.strip() == "2026-W40-0"
    git(repo, "branch", "-m", "trunk")
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    git(bare, "symbolic-ref", "HEAD", "refs/heads/master")
    clone = tmp_path / "clone"
    proc = subprocess.run(["git", "clone", "-q", str(bare), str(clone)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert not (clone / "state").exists()  # git checked nothing out: master does not exist
    return clone


def test_a_clone_on_a_missing_branch_is_told_which_branch_holds_the_state(repo: Path, tmp_path: Path) -> None:
    clone = _clone_whose_remote_head_names_a_missing_branch(repo, tmp_path)
    for argv in (("list",), ("allocate", "--key", "b", "--week", "2026-W40")):
        proc = run_cli(*argv, cwd=clone)
        assert proc.returncode == 2, proc.stderr
        assert "branch origin/trunk holds a jobstate state" in proc.stderr
        assert "git switch trunk" in proc.stderr
        assert "run jobstate init" not in proc.stderr
    git(clone, "switch", "-q", "trunk")
    assert run_cli("allocate", "--key", "a", "--week", "2026-W40", cwd=clone).stdout.strip() == "2026-W40-0"


def test_init_refuses_a_second_state_beside_a_branch_that_holds_one(repo: Path, tmp_path: Path) -> None:
    clone = _clone_whose_remote_head_names_a_missing_branch(repo, tmp_path)
    proc = run_cli("init", cwd=clone)
    assert proc.returncode == 2, proc.stderr
    assert "git switch trunk" in proc.stderr
    assert "--force" in proc.stderr
    assert proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in clone.iterdir()) == [".git"]  # nothing written
    assert subprocess.run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=clone, check=False).returncode != 0
    forced = run_cli("init", "--force", cwd=clone)
    assert forced.returncode == 0, forced.stderr
    assert (clone / "state" / ".gitkeep").is_file()
    # once this branch holds its own state, nothing is refused any more: the second state was asked for
    assert run_cli("init", cwd=clone).returncode == 0


def test_outside_any_repository_no_command_advises_starting_a_state(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    proc = run_cli("list", cwd=plain)
    assert proc.returncode == 2, proc.stderr
    assert "not inside a Git repository" in proc.stderr
    assert "--repo PATH" in proc.stderr
    assert "init" not in proc.stderr


def test_a_branch_behind_its_remote_is_told_to_bring_the_state_in(tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    seed.mkdir()
    git(seed, "init", "-q", "-b", "main")
    (seed / "README").write_text("pipeline\n")
    git(seed, "add", "README")
    git(seed, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "first")
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(bare))
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(bare), str(clone))
    # another host sets the state up and pushes it; this clone has fetched, not merged
    git(tmp_path, "clone", "-q", str(bare), str(tmp_path / "other"))
    git(tmp_path / "other", "config", "user.email", "o@b")
    git(tmp_path / "other", "config", "user.name", "o")
    assert run_cli("init", cwd=tmp_path / "other").returncode == 0
    git(tmp_path / "other", "push", "-q", "origin", "main")
    git(clone, "fetch", "-q")
    proc = run_cli("list", cwd=clone)
    assert proc.returncode == 2, proc.stderr
    assert "git merge --ff-only origin/main" in proc.stderr
    assert "git switch" not in proc.stderr


def test_init_in_a_repository_that_has_its_state_directory_is_not_refused(repo: Path) -> None:
    git(repo, "branch", "feature")
    git(repo, "rm", "-q", "state/.gitkeep")
    git(repo, "commit", "-qm", "the placeholder went")
    (repo / "state").mkdir(exist_ok=True)
    proc = run_cli("init", cwd=repo)
    assert proc.returncode == 0, proc.stderr
