"""``jobstate retire``: the episode leaves state/, a tombstone keeps its ID and key, for ever."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobstate.allocation.allocation import allocate
from jobstate.allocation.retirement import retire
from jobstate.core.layout import episode_dir, retired_path
from jobstate.core.periods import parse_period
from jobstate.core.tombstones import new_tombstone, tombstone_from_yaml_dict
from jobstate.errors import (
    ALLOCATION_CONFLICT,
    EPISODE_UNKNOWN,
    LOCK_OR_REMOTE,
    OK,
    STATE_INVALID,
    USAGE,
    VERIFY_PROBLEMS,
    StateInvalid,
    UsageError,
)
from jobstate.paid.step import paid_step
from jobstate.store.store import Store

from .conftest import committed_files, git, run_cli, status
from .fakegit import fake_git, run_killed
from .merges import counting_step, runs
from .snapshots import tree_state

W32 = "2026-W32"


def _alloc(repo: Path, key: str) -> tuple[int, str, str]:
    proc = run_cli("allocate", "--key", key, "--week", W32, cwd=repo)
    return proc.returncode, proc.stdout.strip(), proc.stderr.strip()


def _retire(repo: Path, eid: str, by: str = "ops", reason: str = "a test run") -> tuple[int, str, str]:
    proc = run_cli("retire", eid, "--by", by, "--reason", reason, cwd=repo)
    return proc.returncode, proc.stdout.strip(), proc.stderr.strip()


def test_retire_moves_the_episode_out_in_one_commit_with_a_tombstone(repo: Path) -> None:
    _alloc(repo, "k1")
    before = git(repo, "rev-list", "--count", "HEAD")
    assert _retire(repo, "2026-W32-0") == (OK, "2026-W32-0 retired (history/retired/2026/2026-W32/2026-W32-0.yaml)", "")
    assert int(git(repo, "rev-list", "--count", "HEAD")) == int(before) + 1
    assert not (repo / episode_dir("2026-W32-0")).exists()
    assert git(repo, "show", "--no-renames", "--name-status", "--format=", "HEAD").split() == [
        "A",
        "history/retired/2026/2026-W32/2026-W32-0.yaml",
        "D",
        "state/2026/2026-W32/2026-W32-0/episode.yaml",
    ]
    text = (repo / retired_path("2026-W32-0")).read_text()
    for field in ("episode_id: 2026-W32-0", "allocation_key: k1", "retired_by: ops", "reason: a test run"):
        assert field in text
    assert status(repo) == ""
    assert run_cli("verify", cwd=repo).returncode == 0
    assert run_cli("verify", "--rev", "HEAD", cwd=repo).returncode == 0


@pytest.mark.parametrize("cold", [False, True], ids=["warm", "cold"])
def test_a_retired_id_and_key_are_never_handed_out_again(repo: Path, cold: bool) -> None:
    _alloc(repo, "k1")
    _alloc(repo, "k2")
    _retire(repo, "2026-W32-1")
    if cold:
        (repo / ".jobstate" / "catalog.sqlite").unlink()
    assert _alloc(repo, "k3")[1] == "2026-W32-2"
    code, out, err = _alloc(repo, "k2")
    assert (code, out) == (ALLOCATION_CONFLICT, "")
    assert "2026-W32-1, retired (history/retired/2026/2026-W32/2026-W32-1.yaml)" in err
    assert _alloc(repo, "k1")[1] == "2026-W32-0"  # the others are untouched


def _merged(repo: Path, *commands: tuple[str, ...]) -> None:
    """A pull request made of ``commands`` (git's), merged as people merge them."""
    git(repo, "switch", "-q", "-c", "hand")
    for argv in commands:
        git(repo, *argv)
    git(repo, "commit", "-qam", "by hand")
    git(repo, "switch", "-q", "-")
    git(repo, "merge", "-q", "--no-ff", "hand", "-m", "Merge pull request #3")


@pytest.mark.parametrize("cold", [False, True], ids=["this clone", "a fresh catalog"])
@pytest.mark.parametrize("how", ["un-retired", "key given to another episode"])
def test_a_merge_that_brings_a_retired_key_back_is_refused_by_allocate_and_run(
    repo: Path, tmp_path: Path, how: str, cold: bool
) -> None:
    _alloc(repo, "k1")
    _alloc(repo, "k2")
    _retire(repo, "2026-W32-1")
    stone = retired_path("2026-W32-1")
    if how == "un-retired":
        _merged(repo, ("rm", "-q", stone), ("checkout", "HEAD~1", "--", episode_dir("2026-W32-1")))
        holder = "2026-W32-1"
    else:
        episode = repo / episode_dir("2026-W32-0") / "episode.yaml"
        episode.write_text(episode.read_text().replace("allocation_key: k1", "allocation_key: k2"))
        _merged(repo)
        holder = "2026-W32-0"
    if cold:  # a fresh clone's catalog: the retirement is read from the branch's history
        (repo / ".jobstate" / "catalog.sqlite").unlink()
    head = git(repo, "rev-parse", "HEAD")
    code, out, err = _alloc(repo, "k2")
    assert (code, out) == (ALLOCATION_CONFLICT, "")
    assert "allocation key 'k2' belongs to retired episode 2026-W32-1" in err
    assert f"(2026-W32-1, retired ({stone}))" in err
    if how == "un-retired":  # nor is the episode paid for again, named explicitly
        proc = run_cli("run", "--episode", holder, "--step", "generate", "--", *counting_step(tmp_path), cwd=repo)
        assert proc.returncode == STATE_INVALID, proc.stderr
        assert proc.stderr.startswith(f"jobstate: error: episode 2026-W32-1 was retired ({stone}) in this branch's")
        assert runs(tmp_path) == 0
        # retire names what HEAD holds: the episode is back, so it is retired again (a new tombstone)
        assert _retire(repo, "2026-W32-1", reason="again")[0] == OK
        assert (repo / stone).is_file()
        assert not (repo / episode_dir("2026-W32-1")).exists()
    else:
        assert git(repo, "rev-parse", "HEAD") == head
    assert status(repo) == ""


@pytest.mark.parametrize("undo", ["reset", "another branch"])
def test_a_retirement_binds_only_the_history_that_has_it(repo: Path, tmp_path: Path, undo: str) -> None:
    _alloc(repo, "k1")
    _alloc(repo, "k2")
    if undo == "reset":  # an unpushed retirement undone
        _retire(repo, "2026-W32-1")
        git(repo, "reset", "-q", "--hard", "HEAD~1")
    else:  # proposed on a branch, never merged
        git(repo, "switch", "-q", "-c", "proposal")
        _retire(repo, "2026-W32-1")
        git(repo, "switch", "-q", "-")
    assert _alloc(repo, "k2") == (OK, "2026-W32-1", "")
    proc = run_cli("run", "--episode", "2026-W32-1", "--step", "generate", "--", *counting_step(tmp_path), cwd=repo)
    assert proc.returncode == OK, proc.stderr
    assert runs(tmp_path) == 1


def test_a_retired_episode_is_said_to_be_retired_not_unallocated(repo: Path) -> None:
    _alloc(repo, "k1")
    _retire(repo, "2026-W32-0")
    for argv in (("show", "2026-W32-0"), ("approve", "--episode", "2026-W32-0", "--by", "ed")):
        proc = run_cli(*argv, cwd=repo)
        assert proc.returncode == EPISODE_UNKNOWN, proc.stderr
        assert proc.stderr == (
            "jobstate: error: episode 2026-W32-0 was retired (history/retired/2026/2026-W32/2026-W32-0.yaml): "
            "nothing more is paid for it or decided on it\n"
        )


def test_a_second_retirement_records_nothing(repo: Path) -> None:
    _alloc(repo, "k1")
    _retire(repo, "2026-W32-0")
    head = git(repo, "rev-parse", "HEAD")
    code, _out, err = _retire(repo, "2026-W32-0", reason="again")
    assert code == OK
    assert "already retired" in err
    assert git(repo, "rev-parse", "HEAD") == head


def test_an_episode_removed_with_git_can_be_retired_afterwards(repo: Path) -> None:
    _alloc(repo, "k1")
    git(repo, "rm", "-rq", "state/2026/2026-W32/2026-W32-0")
    git(repo, "commit", "-qm", "remove")
    assert run_cli("verify", cwd=repo).returncode == VERIFY_PROBLEMS
    assert _retire(repo, "2026-W32-0", reason="removed on purpose")[0] == OK
    assert run_cli("verify", cwd=repo).returncode == 0
    assert "retired" in _alloc(repo, "k1")[2]


def test_retire_names_its_episode_as_every_command_does_or_as_its_argument_never_both(repo: Path) -> None:
    _alloc(repo, "k1")
    _alloc(repo, "k2")
    named = run_cli("retire", "--episode", "2026-W32-1", "--by", "ops", "--reason", "a test run", cwd=repo)
    assert (named.returncode, named.stdout.strip()) == (
        OK,
        "2026-W32-1 retired (history/retired/2026/2026-W32/2026-W32-1.yaml)",
    )
    before = git(repo, "rev-parse", "HEAD")
    for args in (["2026-W32-0", "--episode", "2026-W32-0"], []):
        refused = run_cli("retire", *args, "--by", "ops", "--reason", "a test run", cwd=repo)
        assert refused.returncode == 2, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "EPISODE" in refused.stderr
    assert git(repo, "rev-parse", "HEAD") == before


def test_retiring_an_unknown_episode_is_exit_5(repo: Path) -> None:
    code, _out, err = _retire(repo, "2026-W32-4")
    assert code == EPISODE_UNKNOWN
    assert "never committed" in err


@pytest.mark.parametrize(
    ("by", "reason", "needle"),
    [
        ("", "why", "--by must be non-empty"),
        ("a\nb", "why", "U+000A"),
        ("ops", "two\nlines", "U+000A"),
        ("ops", "bell\x07", "U+0007"),
        ("x" * 201, "why", "at most 200"),
        ("ops", "y" * 1001, "at most 1000"),
    ],
)
def test_bad_by_or_reason_is_refused_and_nothing_is_written(repo: Path, by: str, reason: str, needle: str) -> None:
    _alloc(repo, "k1")
    before = tree_state(repo)
    code, _out, err = _retire(repo, "2026-W32-0", by=by, reason=reason)
    assert code == USAGE
    assert needle in err
    assert tree_state(repo) == before


def test_a_bad_episode_id_is_exit_2(repo: Path) -> None:
    assert _retire(repo, "../etc")[0] == USAGE


@pytest.mark.parametrize(
    ("accept", "needle", "exit_code"), [(False, "is unknown", 6), (True, "is accepted", LOCK_OR_REMOTE)]
)
def test_an_open_paid_step_is_never_retired(repo: Path, accept: bool, needle: str, exit_code: int) -> None:
    with Store(repo, lock_timeout=5) as store:
        eid = allocate(store, "k1", parse_period(W32)).episode_id
        with pytest.raises(TimeoutError), paid_step(store, eid, "generate") as step:
            if accept:
                step.accepted("task-1")  # the vendor has it: run the step again to collect it
            raise TimeoutError  # without accept: the intent is committed, the acceptance is not
    before = tree_state(repo, skip=".jobstate")  # the lock file is touched; nothing else may be
    code, _out, err = _retire(repo, eid)
    assert code == exit_code  # unknown: exit 6, as run, approve and complete say it
    assert f"step generate {needle}" in err
    if not accept:
        assert "jobstate resolve --episode 2026-W32-0 --step generate" in err
    assert tree_state(repo, skip=".jobstate") == before


def test_a_closed_step_does_not_block_retirement(repo: Path) -> None:
    with Store(repo, lock_timeout=5) as store:
        eid = allocate(store, "k1", parse_period(W32)).episode_id
        with pytest.raises(RuntimeError), paid_step(store, eid, "generate") as step:
            step.not_submitted("vendor said 503")
            raise RuntimeError
        stone = retire(store, eid, by="ops", reason="gave up")
    assert stone.allocation_key == "k1"
    assert run_cli("verify", cwd=repo).returncode == 0


def test_the_tombstone_reader_is_strict() -> None:
    good = new_tombstone("2026-W32-0", "k1", "ops", "why", "2026-08-07T10:00:00Z").to_yaml_dict()
    assert tombstone_from_yaml_dict(good, "t", "2026-W32-0").allocation_key == "k1"
    for bad, needle in [
        ({**good, "extra": 1}, "unknown tombstone field"),
        ({**good, "schema": 2}, "unknown schema"),
        ({**good, "sequence": 3}, "must match"),
        ({**good, "reason": "a\nb"}, "U\\+000A"),
        ({**good, "retired_at": 5}, "retired_at"),
        ({k: v for k, v in good.items() if k != "allocation_key"}, "allocation key"),
    ]:
        with pytest.raises(StateInvalid, match=needle):
            tombstone_from_yaml_dict(bad, "t", "2026-W32-0")
    with pytest.raises(StateInvalid, match="does not match its name"):
        tombstone_from_yaml_dict(good, "t", "2026-W32-1")
    with pytest.raises(UsageError):
        new_tombstone("2026-W32-0", "k1", "", "why", "2026-08-07T10:00:00Z")


def test_verify_flags_a_tombstone_beside_its_episode_and_a_malformed_one(repo: Path) -> None:
    _alloc(repo, "k1")
    _alloc(repo, "k2")
    _retire(repo, "2026-W32-1")
    git(repo, "checkout", "HEAD~1", "--", "state/2026/2026-W32/2026-W32-1")  # brought back by hand
    git(repo, "commit", "-qm", "bring it back")
    out = run_cli("verify", "--rev", "HEAD", cwd=repo).stdout
    assert "episode 2026-W32-1 is retired but still in state/ or history/" in out
    assert "allocation key 'k2' belongs to retired episode 2026-W32-1" in out
    (repo / retired_path("2026-W32-0")).write_text("schema: 1\nepisode_id: [\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "broken tombstone")
    assert run_cli("verify", "--rev", "HEAD", cwd=repo).returncode == STATE_INVALID


def test_diff_shows_a_retirement_with_who_and_why(repo: Path) -> None:
    _alloc(repo, "k1")
    _retire(repo, "2026-W32-0", by="ops", reason="a test run")
    out = run_cli("diff", "HEAD~1", "HEAD", cwd=repo).stdout
    assert "Episodes retired" in out
    assert "ops" in out
    assert "a test run" in out
    assert "episode deleted" not in out
    # jobstate retire writes it: a row of the review, never an alarm that fails the check
    assert run_cli("diff", "HEAD~1", "HEAD", "--strict", cwd=repo).returncode == 0


@pytest.mark.parametrize("kill_on", ["update-ref", "update-index"])
def test_a_retire_killed_at_its_commit_is_finished_or_undone_by_the_next_command(
    repo: Path, tmp_path: Path, kill_on: str
) -> None:
    _alloc(repo, "k1")
    run_killed(repo, fake_git(tmp_path, kill_on), "retire", "2026-W32-0", "--by", "ops", "--reason", "gone")
    landed = "history/retired/2026/2026-W32/2026-W32-0.yaml" in committed_files(repo)
    assert landed == (kill_on == "update-index")
    # the next command, whatever it is, repairs first: a kill before the commit is undone, after it finished
    assert _alloc(repo, "k2")[1] == "2026-W32-1"
    assert status(repo) == ""
    assert (repo / episode_dir("2026-W32-0") / "episode.yaml").is_file() != landed
    code, _out, err = _retire(repo, "2026-W32-0", reason="gone")
    assert code == OK, err
    assert ("already retired" in err) == landed
    assert _alloc(repo, "k1")[0] == ALLOCATION_CONFLICT
    assert run_cli("verify", cwd=repo).returncode == 0


@pytest.mark.parametrize("ignored", [False, True], ids=["untracked", "git-ignored"])
def test_a_users_file_in_the_episode_is_refused_and_kept(repo: Path, ignored: bool) -> None:
    # the fence's rule: retire would leave the file behind in a state/ directory nobody allocated
    _alloc(repo, "k1")
    if ignored:
        (repo / ".git" / "info" / "exclude").write_text("*.log\n")
    name = "notes.log" if ignored else "notes.txt"
    (repo / episode_dir("2026-W32-0") / name).write_text("mine\n")
    head = git(repo, "rev-parse", "HEAD")
    code, out, err = _retire(repo, "2026-W32-0")
    assert code == USAGE, err
    assert f"state/2026/2026-W32/2026-W32-0/{name} in episode 2026-W32-0" in err
    assert out == ""
    assert (repo / episode_dir("2026-W32-0") / name).read_text() == "mine\n"
    assert git(repo, "rev-parse", "HEAD") == head


def test_a_new_episode_with_a_retired_key_is_the_same_alarm_in_diff_as_the_error_in_verify(repo: Path) -> None:
    """Written by hand in one commit (no command hands a retired key out): diff names the rule verify does."""
    assert run_cli("allocate", "--key", "k", "--week", "2026-W32", cwd=repo).stdout == "2026-W32-0\n"
    assert run_cli("retire", "2026-W32-0", "--by", "ops", "--reason", "a mistake", cwd=repo).returncode == 0
    base = git(repo, "rev-parse", "HEAD").strip()
    old = git(repo, "show", f"HEAD~1:{episode_dir('2026-W32-0')}/episode.yaml")
    target = repo / episode_dir("2026-W32-1") / "episode.yaml"
    target.parent.mkdir(parents=True)
    target.write_text(old.replace("2026-W32-0", "2026-W32-1").replace("sequence: 0", "sequence: 1"))
    git(repo, "add", "-A", "state")
    git(repo, "commit", "-qm", "the old run, again")
    rule = "allocation key 'k' belongs to retired episode 2026-W32-0: a retired key is never handed out again"
    shown = run_cli("diff", "--strict", base, cwd=repo)
    assert shown.returncode == 1, shown.stdout
    assert rule in shown.stdout
    checked = run_cli("verify", "--rev", "HEAD", "--strict", "--against", base, cwd=repo)
    assert checked.returncode == 1, checked.stdout
    assert rule in checked.stdout


def test_a_catalog_of_version_4_is_derived_again_with_the_retirements_history_holds(repo: Path, tmp_path: Path) -> None:
    """Version 4 kept no retirement HEAD had lost: an upgrade walks history again, so an un-retirement it
    refreshed over (with an older jobstate) is still refused."""
    import sqlite3

    _alloc(repo, "k1")
    _alloc(repo, "k2")
    _retire(repo, "2026-W32-1")
    stone = retired_path("2026-W32-1")
    _merged(repo, ("rm", "-q", stone), ("checkout", "HEAD~1", "--", episode_dir("2026-W32-1")))
    assert _alloc(repo, "k1")[0] == OK  # the catalog is at HEAD
    with sqlite3.connect(repo / ".jobstate" / "catalog.sqlite") as conn:  # as version 4 left it
        conn.execute("DROP TABLE retired_ever")
        conn.execute("UPDATE meta SET v='4' WHERE k='version'")
    code, out, err = _alloc(repo, "k2")
    assert (code, out) == (ALLOCATION_CONFLICT, ""), err
    assert f"(2026-W32-1, retired ({stone}))" in err


def test_a_key_whose_first_commit_was_rewritten_is_never_answered_by_a_renamed_copy(repo: Path, tmp_path: Path) -> None:
    """The key's first commit is no ancestor after a cherry-pick: no ID is provably first, so none is
    guessed (the renamed one is refused)."""
    _alloc(repo, "k0")
    _alloc(repo, "k1")
    first = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    git(repo, "commit", "-q", "--allow-empty", "-m", "upstream")
    git(repo, "cherry-pick", first)
    episode = repo / episode_dir("2026-W32-1") / "episode.yaml"
    git(repo, "mv", episode_dir("2026-W32-1"), episode_dir("2026-W32-2"))
    moved = repo / episode_dir("2026-W32-2") / "episode.yaml"
    moved.write_text(moved.read_text().replace("2026-W32-1", "2026-W32-2").replace("sequence: 1", "sequence: 2"))
    git(repo, "commit", "-qam", "renamed by hand")
    assert not episode.exists()
    proc = run_cli("run", "--episode", "2026-W32-2", "--step", "generate", "--", *counting_step(tmp_path), cwd=repo)
    assert proc.returncode == STATE_INVALID, proc.stderr
    assert "2026-W32-1 held too" in proc.stderr
    assert runs(tmp_path) == 0


def test_a_shallow_clone_decides_nothing_until_its_history_is_fetched(repo: Path, tmp_path: Path) -> None:
    """Its cut history may hold a retirement (or an ID) that HEAD lost: nothing is answered from half of it."""
    _alloc(repo, "k1")
    _alloc(repo, "k2")
    _retire(repo, "2026-W32-1")
    stone = retired_path("2026-W32-1")
    _merged(repo, ("rm", "-q", stone), ("checkout", "HEAD~1", "--", episode_dir("2026-W32-1")))
    git(repo, "commit", "-q", "--allow-empty", "-m", "later")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow))
    code, out, err = _alloc(shallow, "k2")
    assert (code, out) == (USAGE, "")
    assert "is a shallow clone" in err
    assert "git fetch --unshallow" in err
    assert not (shallow / ".jobstate" / "catalog.sqlite").exists() or status(shallow) == ""
    git(shallow, "fetch", "-q", "--unshallow")
    code, out, err = _alloc(shallow, "k2")
    assert (code, out) == (ALLOCATION_CONFLICT, ""), err
