"""An ID is never handed out twice: every way Git can remove an episode is refused or flagged.

Each way in of issue 22 (git rm, git revert of an allocation, reset --hard, a merge that drops a
directory, a staged deletion) with a real repository and the real CLI; the catalog cold and warm.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from jobstate.allocation.allocation import allocate
from jobstate.core.layout import episode_dir
from jobstate.core.periods import parse_period
from jobstate.errors import ALLOCATION_CONFLICT, VERIFY_PROBLEMS
from jobstate.store.store import Store

from .conftest import git, run_cli
from .test_transaction_remote import make_hosts

W32 = "2026-W32"


def _alloc(repo: Path, key: str, week: str = W32) -> tuple[int, str, str]:
    proc = run_cli("allocate", "--key", key, "--week", week, cwd=repo)
    return proc.returncode, proc.stdout.strip(), proc.stderr.strip()


def _drop_catalog(repo: Path) -> None:
    (repo / ".jobstate" / "catalog.sqlite").unlink(missing_ok=True)


def _head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


@pytest.mark.parametrize("cold", [False, True], ids=["warm", "cold"])
def test_git_rm_leaves_no_gap_to_refill_and_the_old_key_is_refused(repo: Path, cold: bool) -> None:
    assert _alloc(repo, "k1")[1] == "2026-W32-0"
    git(repo, "rm", "-rq", "state/2026/2026-W32/2026-W32-0")
    git(repo, "commit", "-qm", "remove")
    removed = _head(repo)
    if cold:
        _drop_catalog(repo)
    assert _alloc(repo, "k2") == (0, "2026-W32-1", "")
    code, out, err = _alloc(repo, "k1")
    assert code == ALLOCATION_CONFLICT, err
    assert out == ""
    assert "2026-W32-0" in err
    assert removed[:12] in err
    assert "restore state/2026/2026-W32/2026-W32-0 from Git or retire it" in err  # where it was, as git has it
    verify = run_cli("verify", cwd=repo)
    assert verify.returncode == VERIFY_PROBLEMS
    assert (
        f"state/2026/2026-W32/2026-W32-0: error: episode 2026-W32-0 (key 'k1') was removed by commit {removed[:12]}"
        in (verify.stdout)
    )


def test_the_same_refusal_whether_or_not_the_catalog_is_warm(repo: Path) -> None:
    _alloc(repo, "k1")
    _alloc(repo, "k2")
    git(repo, "rm", "-rq", "state/2026/2026-W32/2026-W32-0")
    git(repo, "commit", "-qm", "remove")
    warm = _alloc(repo, "k1")
    _drop_catalog(repo)
    cold = _alloc(repo, "k1")
    assert warm == cold
    assert warm[0] == ALLOCATION_CONFLICT


def test_git_revert_of_an_allocation_is_refused_and_flagged(repo: Path) -> None:
    _alloc(repo, "k1")
    allocation = _head(repo)
    _alloc(repo, "k2")
    git(repo, "revert", "--no-edit", allocation)
    revert = _head(repo)
    _drop_catalog(repo)
    assert _alloc(repo, "k3")[1] == "2026-W32-2"
    code, _out, err = _alloc(repo, "k1")
    assert code == ALLOCATION_CONFLICT
    assert revert[:12] in err
    assert f"removed by commit {revert[:12]}" in run_cli("verify", "--rev", "HEAD", cwd=repo).stdout


@pytest.mark.parametrize("cold", [False, True], ids=["warm", "cold"])
def test_reset_hard_to_an_older_commit_is_remembered(repo: Path, cold: bool) -> None:
    _alloc(repo, "k1")
    _alloc(repo, "k2")
    lost = _head(repo)
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    if cold:
        _drop_catalog(repo)  # the branch's reflog still has the old tip
    assert _alloc(repo, "k3")[1] == "2026-W32-2"
    code, _out, err = _alloc(repo, "k2")
    assert code == ALLOCATION_CONFLICT
    assert "2026-W32-1" in err
    assert "HEAD no longer contains it" in err
    verify = run_cli("verify", cwd=repo)
    assert verify.returncode == VERIFY_PROBLEMS
    said = "2026-W32-1 (key 'k2') was committed on this branch but HEAD no longer contains it"
    assert f"{said} (it is in commit {lost[:12]})" in verify.stdout


def test_a_merge_that_drops_a_directory_is_flagged_and_its_id_is_not_reused(repo: Path) -> None:
    _alloc(repo, "k1")
    git(repo, "checkout", "-qb", "side")
    (repo / "notes.txt").write_text("side work\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-qm", "side")
    git(repo, "checkout", "-q", "main")
    _alloc(repo, "k2")
    git(repo, "merge", "-q", "--no-commit", "--no-ff", "side")
    git(repo, "rm", "-rq", "state/2026/2026-W32/2026-W32-1")  # a bad resolution
    git(repo, "commit", "-qm", "merge side")
    merge = _head(repo)
    _drop_catalog(repo)
    assert _alloc(repo, "k3")[1] == "2026-W32-2"
    assert _alloc(repo, "k2")[0] == ALLOCATION_CONFLICT
    out = run_cli("verify", "--rev", "HEAD", cwd=repo).stdout
    assert f"episode 2026-W32-1 (key 'k2') was removed by commit {merge[:12]}" in out
    alarms = run_cli("diff", f"{merge}~1", merge, "--format", "json", cwd=repo).stdout
    assert '"kind": "episode deleted"' in alarms
    assert merge[:12] in alarms


def test_a_staged_deletion_is_flagged_before_it_is_committed(repo: Path) -> None:
    _alloc(repo, "k1")
    git(repo, "rm", "-rq", "--cached", "state/2026/2026-W32/2026-W32-0")
    (repo / episode_dir("2026-W32-0") / "episode.yaml").unlink()
    (repo / episode_dir("2026-W32-0")).rmdir()
    hook = run_cli("verify", "--uncommitted-ok", cwd=repo)  # what the pre-commit hook runs
    assert hook.returncode == VERIFY_PROBLEMS
    assert "2026-W32-0 (key 'k1') is committed in HEAD but deleted in the index or work tree" in hook.stdout


def test_diff_alarms_for_an_episode_added_and_removed_between_base_and_rev(repo: Path) -> None:
    _alloc(repo, "k1")
    base = _head(repo)
    _alloc(repo, "k2")
    git(repo, "rm", "-rq", "state/2026/2026-W32/2026-W32-1")
    git(repo, "commit", "-qm", "quietly remove")
    removed = _head(repo)
    out = run_cli("diff", base, "HEAD", cwd=repo).stdout
    assert "episode deleted" in out
    assert "2026-W32-1" in out
    assert removed[:12] in out


def test_diff_of_a_reset_back_to_an_older_state_raises_the_alarm(repo: Path) -> None:
    _alloc(repo, "k1")
    old = _head(repo)
    _alloc(repo, "k2")
    out = run_cli("diff", "HEAD", old, cwd=repo).stdout
    assert "episode deleted" in out
    assert "does not contain the commit that had it" in out


def test_a_retry_of_a_key_still_in_head_is_answered_without_the_lock(repo: Path) -> None:
    with Store(repo, lock_timeout=5) as store:
        first = allocate(store, "k1", parse_period(W32))
        (repo / ".jobstate" / "lock").chmod(0o000)  # the lock-free path never opens it
        try:
            again = allocate(store, "k1", parse_period(W32))
        finally:
            (repo / ".jobstate" / "lock").chmod(0o644)
    assert (again.episode_id, again.created) == (first.episode_id, False)


def test_restoring_the_episode_with_git_makes_the_key_answer_again(repo: Path) -> None:
    _alloc(repo, "k1")
    git(repo, "rm", "-rq", "state/2026/2026-W32/2026-W32-0")
    git(repo, "commit", "-qm", "remove")
    assert _alloc(repo, "k1")[0] == ALLOCATION_CONFLICT
    git(repo, "revert", "--no-edit", "HEAD")
    assert _alloc(repo, "k1") == (0, "2026-W32-0", "")
    assert run_cli("verify", cwd=repo).returncode == 0


def test_a_force_pushed_remote_is_refused_on_every_host_until_accepted(tmp_path: Path) -> None:
    bare, (one, two) = make_hosts(tmp_path, 2)
    _alloc(one, "k1")
    _alloc(one, "k2")
    pushed_by_one = _head(one)
    assert _alloc(two, "k3")[1] == "2026-W32-2"
    last_two = _head(two)
    # host one resets two allocations away and force-pushes: the same gap for every host
    git(one, "fetch", "-q", "origin")
    git(one, "reset", "-q", "--hard", "origin/main~2")
    git(one, "push", "-qf", "origin", "main")
    rewritten = git(bare, "rev-parse", "main").strip()
    for host, last in ((two, last_two), (one, pushed_by_one)):
        code, out, err = _alloc(host, "k4")
        assert (code, out) == (3, ""), err
        assert "origin/main was rewritten" in err
        assert rewritten[:12] in err
        assert last[:12] in err
        assert "rm .jobstate/remote-tip.json" in err
    assert git(bare, "rev-parse", "main").strip() == rewritten  # never silently followed or pushed over
    # the way out, taken deliberately on host two: accept the rewrite and come to the remote's tip
    (two / ".jobstate" / "remote-tip.json").unlink()
    git(two, "reset", "-q", "--hard", "origin/main")
    assert _alloc(two, "k4")[1] == "2026-W32-3"  # 1 and 2 stay used
    assert _alloc(two, "k3")[0] == ALLOCATION_CONFLICT


@pytest.mark.parametrize("how", [["rm", "-rq"], ["rm", "-rq", "--cached"]], ids=["rm", "rm-cached"])
def test_the_pre_commit_hook_stops_a_commit_that_deletes_an_episode(repo: Path, how: list[str]) -> None:
    _alloc(repo, "k1")
    entry = yaml_entry()  # the hook as pre-commit runs it: its entry, from a git hook
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m {entry}\n")
    hook.chmod(0o755)
    head = _head(repo)
    git(repo, *how, "state/2026/2026-W32/2026-W32-0")
    proc = subprocess.run(["git", "commit", "-qm", "remove"], cwd=repo, capture_output=True, text=True, check=False)
    assert proc.returncode != 0
    assert "2026-W32-0 (key 'k1') is committed in HEAD but deleted in the index or work tree" in proc.stderr
    assert _head(repo) == head


def yaml_entry() -> str:
    """The hook's entry from .pre-commit-hooks.yaml, which must run on every commit (a deletion matches no file)."""
    text = (Path(__file__).parent.parent / ".pre-commit-hooks.yaml").read_text()
    assert "always_run: true" in text
    entry = next(line.split(": ", 1)[1] for line in text.splitlines() if line.strip().startswith("entry:"))
    assert entry == "jobstate verify --uncommitted-ok"
    return entry


def _ever(repo: Path) -> list[tuple[str, str, int]]:
    from jobstate.store.transaction import locked
    from jobstate.store.worktree import fresh_catalog

    with Store(repo, lock_timeout=5) as store, locked(store):
        cat = fresh_catalog(store)
        return sorted((s.episode_id, s.allocation_key, s.sequence) for k in KEYS for s in cat.ever_by_key(k))


KEYS = ("k1", "k2", "k3", "k4")


def test_a_rebuilt_catalog_knows_what_the_warm_one_learned(repo: Path) -> None:
    _alloc(repo, "k1")
    _alloc(repo, "k2")
    git(repo, "rm", "-rq", "state/2026/2026-W32/2026-W32-0")
    git(repo, "commit", "-qm", "remove")
    _alloc(repo, "k3")
    _alloc(repo, "k4")
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    git(repo, "revert", "--no-edit", "HEAD~1")  # revert the removal: 2026-W32-0 is back
    warm = _ever(repo)
    _drop_catalog(repo)
    assert _ever(repo) == warm
    assert warm == [("2026-W32-0", "k1", 0), ("2026-W32-1", "k2", 1), ("2026-W32-2", "k3", 2), ("2026-W32-3", "k4", 3)]


def test_a_key_changed_by_hand_is_refused_with_both_ways_it_can_happen(repo: Path) -> None:
    _alloc(repo, "k1")
    episode = repo / "state/2026/2026-W32/2026-W32-0/episode.yaml"
    episode.write_text(episode.read_text().replace("allocation_key: k1", "allocation_key: zz"))
    git(repo, "commit", "-qam", "a key by hand")
    code, out, err = _alloc(repo, "k1")
    assert (code, out) == (ALLOCATION_CONFLICT, "")
    assert "its episode 2026-W32-0 (first committed in " in err
    assert "holds key 'zz' in HEAD: the key was changed by hand, or the ID was handed out on another branch" in err
