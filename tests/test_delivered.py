"""What a merge delivers is checked before anything is paid (issue 29, 1): a hand edit merged into the
state's branch that no command would make refuses the next run or decision (exit 7) before CMD runs."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from jobstate import errors
from jobstate.core.layout import episode_dir, history_path

from .conftest import git, run_cli
from .merges import counting_step, runs

EID = "2026-W30-0"


def _paid(repo: Path, tmp_path: Path, step: str = "generate") -> None:
    assert run_cli("allocate", "--key", "weekly", "--week", "2026-W30", cwd=repo).stdout.strip() == EID
    proc = run_cli("run", "--episode", EID, "--step", step, "--", *counting_step(tmp_path), cwd=repo)
    assert proc.returncode == 0, proc.stderr


def _merge_hand_edit(repo: Path, edit: str, replace: str, by: str, *, forced: dict[str, str] | None = None) -> None:
    """A pull request that edits a record by hand (and adds the ``forced`` files, ignored ones too), merged
    as people merge them."""
    git(repo, "switch", "-q", "-c", "hand-edit")
    path = repo / episode_dir(EID) / edit
    text = path.read_text()
    assert replace in text
    path.write_text(text.replace(replace, by))
    for rel, content in (forced or {}).items():
        (repo / rel).write_text(content)
        git(repo, "add", "-f", rel)
    git(repo, "commit", "-qam", "tidy the records")
    git(repo, "switch", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "hand-edit", "-m", "Merge pull request #7")


def _replace_record(repo: Path, name: str, old: str, new: str) -> None:
    path = repo / episode_dir(EID) / name
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_a_merged_hand_edit_that_reopens_a_paid_attempt_is_refused_before_cmd(repo: Path, tmp_path: Path) -> None:
    _paid(repo, tmp_path)
    assert runs(tmp_path) == 1
    _merge_hand_edit(repo, "submissions.yaml", "state: completed", "state: not-submitted")
    proc = run_cli("run", "--episode", EID, "--step", "generate", "--", *counting_step(tmp_path), cwd=repo)
    assert proc.returncode == 7, proc.stderr
    merge = git(repo, "rev-parse", "HEAD").strip()
    assert f"{episode_dir(EID)} was changed by commit {merge[:12]} (since this clone last checked it" in proc.stderr
    assert "submissions.yaml" in proc.stderr
    assert f"jobstate verify --rev {merge[:12]} --against {merge[:12]}" not in proc.stderr
    assert f"jobstate verify --rev {merge[:12]} --against " in proc.stderr
    assert proc.stderr.count("\n") == 1
    assert runs(tmp_path) == 1  # nothing was paid twice
    for decision in (("approve", "--episode", EID, "--by", "editor"), ("complete", "--episode", EID)):
        refused = run_cli(*decision, cwd=repo)
        assert refused.returncode == 7, refused.stderr
    # restored in a later commit beside a change the model lets pass, the edit is still seen: commit by commit
    _replace_record(repo, "submissions.yaml", "state: not-submitted", "state: completed")
    (repo / episode_dir(EID) / "notes.txt").write_text("tidied\n")
    git(repo, "add", "-A", episode_dir(EID))
    git(repo, "commit", "-qm", "put it back, and a note")
    later = run_cli("run", "--episode", EID, "--step", "generate", "--", *counting_step(tmp_path), cwd=repo)
    assert later.returncode == 7, later.stderr
    assert f"was changed by commit {merge[:12]}" in later.stderr
    assert runs(tmp_path) == 1
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    # reverted, the net change is none: the step is answered as completed, and nothing runs
    git(repo, "revert", "--no-edit", "-m", "1", "HEAD")
    again = run_cli("run", "--episode", EID, "--step", "generate", "--", *counting_step(tmp_path), cwd=repo)
    assert again.returncode == 0, again.stderr
    assert runs(tmp_path) == 1


def test_a_merged_ledger_rewrite_is_refused_before_a_decision(repo: Path, tmp_path: Path) -> None:
    _paid(repo, tmp_path)
    _merge_hand_edit(repo, "costs.yaml", "amount: '12.40'", "amount: '1.40'")
    proc = run_cli("approve", "--episode", EID, "--by", "editor", cwd=repo)
    assert proc.returncode == 7, proc.stderr
    assert "cost entry rewritten" in proc.stderr
    assert not (repo / episode_dir(EID) / "approval.yaml").exists()


def test_a_merged_removal_of_a_history_file_reopens_nothing(repo: Path, tmp_path: Path) -> None:
    """The history file is the episode's too: removed by a merged pull request, the completed episode
    would take a new decision and a new paid step (paid twice) were it not checked."""
    _paid(repo, tmp_path)
    assert run_cli("approve", "--episode", EID, "--by", "editor", cwd=repo).returncode == 0
    assert run_cli("complete", "--episode", EID, cwd=repo).returncode == 0
    git(repo, "switch", "-q", "-c", "reopen")
    git(repo, "rm", "-q", history_path(EID))
    git(repo, "commit", "-qm", "reopen it")
    git(repo, "switch", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "reopen", "-m", "Merge pull request #9")
    head = git(repo, "rev-parse", "HEAD").strip()
    proc = run_cli("approve", "--episode", EID, "--by", "editor", "--reject", "--reason", "redo", cwd=repo)
    assert proc.returncode == 7, proc.stderr
    assert f"was changed by commit {head[:12]}" in proc.stderr
    assert run_cli("run", "--episode", EID, "--step", "rework", "--", *counting_step(tmp_path), cwd=repo).returncode
    assert runs(tmp_path) == 1
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert git(repo, "status", "--porcelain") == ""


@pytest.mark.parametrize("cold", [False, True], ids=["this clone", "a fresh catalog"])
@pytest.mark.parametrize("how", ["copied", "renamed"])
def test_an_episode_copied_or_renamed_by_hand_is_never_paid_again(
    repo: Path, tmp_path: Path, how: str, cold: bool
) -> None:
    """The same run under a second ID: review flags the key, and this clone, which saw the key's first ID,
    neither answers the key with the new ID nor pays for the step again."""
    _paid(repo, tmp_path)
    new = "2026-W30-5"
    git(repo, "switch", "-q", "-c", how)
    shutil.copytree(repo / episode_dir(EID), repo / episode_dir(new))
    if how == "renamed":
        git(repo, "rm", "-rq", episode_dir(EID))
    episode = repo / episode_dir(new) / "episode.yaml"
    episode.write_text(episode.read_text().replace(EID, new).replace("sequence: 0", "sequence: 5"))
    for name in ("submissions.yaml", "costs.yaml", "artifacts.yaml"):
        (repo / episode_dir(new) / name).unlink(missing_ok=True)  # a fresh start for the same run
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", f"{how} by hand")
    git(repo, "switch", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", how, "-m", "Merge pull request #10")
    if cold:  # a fresh clone's catalog: the key's first ID is read from the branch's history
        (repo / ".jobstate" / "catalog.sqlite").unlink()
    head = git(repo, "rev-parse", "HEAD").strip()
    allocated = run_cli("allocate", "--key", "weekly", "--week", "2026-W30", cwd=repo)
    assert (allocated.returncode, allocated.stdout) == (errors.ALLOCATION_CONFLICT, ""), allocated.stderr
    assert "allocation key 'weekly' belongs to several episodes: 2026-W30-0, 2026-W30-5" in allocated.stderr
    proc = run_cli("run", "--episode", new, "--step", "generate", "--", *counting_step(tmp_path), cwd=repo)
    assert proc.returncode == errors.STATE_INVALID, proc.stderr
    said = "belongs to several episodes: 2026-W30-0, 2026-W30-5" if how == "copied" else f"{EID} held too"
    assert said in proc.stderr
    assert runs(tmp_path) == 1
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert git(repo, "status", "--porcelain") == ""


def test_what_commands_and_people_do_legitimately_passes(repo: Path, tmp_path: Path) -> None:
    _paid(repo, tmp_path)
    # a merged pull request that touches other files, and another episode allocated elsewhere
    git(repo, "switch", "-q", "-c", "docs")
    (repo / "README.md").write_text("the pipeline\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-qm", "docs")
    git(repo, "switch", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "docs", "-m", "Merge pull request #8")
    assert run_cli("allocate", "--key", "rerun", "--week", "2026-W30", cwd=repo).returncode == 0
    proc = run_cli("approve", "--episode", EID, "--by", "editor", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert run_cli("complete", "--episode", EID, cwd=repo).returncode == 0


def test_a_clone_takes_what_it_first_sees_and_then_checks_what_arrives(repo: Path, tmp_path: Path) -> None:
    _paid(repo, tmp_path)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    git(clone, "config", "user.email", "host@example.test")
    git(clone, "config", "user.name", "host")
    assert (
        run_cli("run", "--episode", EID, "--step", "generate", "--", *counting_step(tmp_path), cwd=clone).returncode
        == 0
    )
    _merge_hand_edit(repo, "submissions.yaml", "state: completed", "state: not-submitted")
    git(clone, "pull", "-q", "--ff-only")
    proc = run_cli("run", "--episode", EID, "--step", "generate", "--", *counting_step(tmp_path), cwd=clone)
    assert proc.returncode == 7, proc.stderr
    assert runs(tmp_path) == 1


def test_marks_a_pull_request_delivers_are_never_read(repo: Path, tmp_path: Path) -> None:
    _paid(repo, tmp_path)
    # the attacker's branch carries the hand edit and marks that would vouch for it, where jobstate kept them once
    forged = {".jobstate/checked.json": json.dumps({EID: "0" * 40})}
    _merge_hand_edit(repo, "submissions.yaml", "state: completed", "state: not-submitted", forced=forged)
    git(repo, "rm", "-q", "--cached", "-r", ".jobstate")
    git(repo, "commit", "-qm", "untrack what the pull request added")
    proc = run_cli("run", "--episode", EID, "--step", "generate", "--", *counting_step(tmp_path), cwd=repo)
    assert proc.returncode == 7, proc.stderr
    assert runs(tmp_path) == 1


def test_an_unreadable_marks_file_means_first_use_never_a_crash(repo: Path, tmp_path: Path) -> None:
    _paid(repo, tmp_path)
    marks = Path(git(repo, "rev-parse", "--git-common-dir").strip())
    marks = (marks if marks.is_absolute() else repo / marks) / "jobstate" / "checked.json"
    assert json.loads(marks.read_text())[EID]  # the paid step's commits moved the mark
    marks.write_text("[1, 2]")
    assert run_cli("approve", "--episode", EID, "--by", "editor", cwd=repo).returncode == 0
    assert json.loads(marks.read_text())[EID] == git(repo, "rev-parse", "HEAD").strip()


def test_a_submodule_under_state_is_flagged_by_verify_and_diff(repo: Path) -> None:
    assert run_cli("allocate", "--key", "weekly", "--week", "2026-W30", cwd=repo).returncode == 0
    head = git(repo, "rev-parse", "HEAD").strip()
    # a gitlink, as `git submodule add` would stage it: no file in the work tree, a commit in the tree
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{head},{episode_dir(EID)}/vendored")
    git(repo, "commit", "-qm", "vendor a tool")
    proc = run_cli("verify", "--rev", "HEAD", cwd=repo)
    assert proc.returncode == 1, proc.stdout
    assert f"{episode_dir(EID)}/vendored: error: is a submodule (gitlink)" in proc.stdout
    shown = run_cli("diff", "HEAD~1", "--strict", cwd=repo)
    assert shown.returncode == 1, shown.stdout
    assert "is a submodule (gitlink)" in shown.stdout


@pytest.mark.parametrize("fresh", [False, True], ids=["this-clone", "fresh-clone"])
def test_a_submodule_where_an_episode_goes_is_flagged_and_refused_by_allocation(
    repo: Path, tmp_path: Path, fresh: bool
) -> None:
    """A gitlink at state/<year>/<period>/<id> (the next ID of its period), merged in: review flags it, and
    no allocation decides anything on that state (the slot it takes is no episode jobstate can read)."""
    assert run_cli("allocate", "--key", "weekly", "--week", "2026-W30", cwd=repo).returncode == 0
    base = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-qb", "pr")
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{base},{episode_dir('2026-W30-1')}")
    git(repo, "commit", "-qm", "vendor a tool")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "pr", "-m", "merge pr")
    for args in (("diff", base, "--strict"), ("verify", "--rev", "HEAD", "--strict", "--against", base)):
        proc = run_cli(*args, cwd=repo)
        assert proc.returncode == 1, (args, proc.stdout)
        assert f"{episode_dir('2026-W30-1')}" in proc.stdout
        assert "is a submodule (gitlink)" in proc.stdout
    where = repo
    if fresh:
        where = tmp_path / "fresh"
        subprocess.run(["git", "clone", "-q", str(repo), str(where)], check=True)
    # git leaves an empty directory for the submodule; without it, the slot looked free to an older jobstate
    (where / episode_dir("2026-W30-1")).rmdir()
    head = git(where, "rev-parse", "HEAD")
    for key, week in (("other", "2026-W30"), ("weekly", "2026-W30"), ("elsewhere", "2026-W40")):
        refused = run_cli("allocate", "--key", key, "--week", week, cwd=where)
        assert refused.returncode == errors.STATE_INVALID, refused.stdout + refused.stderr
        assert f"{episode_dir('2026-W30-1')} in HEAD is a submodule (gitlink)" in refused.stderr
        assert refused.stderr.count("\n") == 1
    assert git(where, "rev-parse", "HEAD") == head


def test_an_executable_bit_no_command_writes_is_flagged_and_refused_before_any_cmd(repo: Path, tmp_path: Path) -> None:
    _paid(repo, tmp_path)
    record = f"{episode_dir(EID)}/costs.yaml"
    # a mode-only change: the bytes are as jobstate wrote them, so only the mode can tell
    for path in (record, "jobstate.yaml"):
        git(repo, "update-index", "--chmod=+x", path)
        (repo / path).chmod(0o755)
    git(repo, "commit", "-qm", "chmod")
    for args in (("verify", "--rev", "HEAD"), ("verify",)):
        proc = run_cli(*args, cwd=repo)
        assert proc.returncode == 1, proc.stdout
        for path in (record, "jobstate.yaml"):
            assert f"{path}: error: is executable, and jobstate never writes an executable file" in proc.stdout
    shown = run_cli("diff", "HEAD~1", "--strict", cwd=repo)
    assert shown.returncode == 1, shown.stdout
    assert f"{record}: is executable" in shown.stdout
    before = git(repo, "rev-parse", "HEAD")
    proc = run_cli("run", "--episode", EID, "--step", "publish", "--", *counting_step(tmp_path), cwd=repo)
    assert proc.returncode == 7, proc.stderr
    assert f"{record} in HEAD is executable" in proc.stderr
    assert runs(tmp_path) == 1  # the first paid step's run only
    assert run_cli("retire", "--episode", EID, "--reason", "x", "--by", "ops", cwd=repo).returncode == 7
    assert git(repo, "rev-parse", "HEAD") == before
    # where the file system keeps no execute bits, git records none (core.fileMode false): nor does verify
    git(repo, "update-index", "--chmod=-x", record, "jobstate.yaml")
    git(repo, "commit", "-qm", "chmod back")
    git(repo, "config", "core.fileMode", "false")
    assert run_cli("verify", cwd=repo).returncode == 0
    git(repo, "config", "core.fileMode", "true")
    assert run_cli("verify", cwd=repo).returncode == 1


def test_an_executable_jobstate_yaml_is_refused_by_every_committing_command(repo: Path, tmp_path: Path) -> None:
    _paid(repo, tmp_path)
    git(repo, "update-index", "--chmod=+x", "jobstate.yaml")
    (repo / "jobstate.yaml").chmod(0o755)
    git(repo, "commit", "-qm", "chmod the settings")
    before = git(repo, "rev-parse", "HEAD")
    for args in (
        ("allocate", "--key", "next", "--week", "2026-W31"),
        ("run", "--episode", EID, "--step", "publish", "--", *counting_step(tmp_path)),
        ("approve", "--episode", EID, "--by", "editor"),
    ):
        proc = run_cli(*args, cwd=repo)
        assert proc.returncode == 7, (args, proc.stderr)
        assert "jobstate.yaml in HEAD is executable" in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert runs(tmp_path) == 1  # the first paid step's run only: nothing ran on the executable settings
    assert git(repo, "rev-parse", "HEAD") == before


def test_a_merged_symlink_for_history_is_flagged_and_nothing_is_written_through_it(repo: Path, tmp_path: Path) -> None:
    _paid(repo, tmp_path)
    assert run_cli("approve", "--episode", EID, "--by", "editor", cwd=repo).returncode == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    # what a pull request that replaces history/ with a link delivers, once merged
    git(repo, "rm", "-rq", "--cached", "--ignore-unmatch", "history")
    shutil.rmtree(repo / "history")
    (repo / "history").symlink_to(outside)
    git(repo, "add", "history")
    git(repo, "commit", "-qm", "history elsewhere")
    proc = run_cli("verify", "--rev", "HEAD", cwd=repo)
    assert proc.returncode == 1
    assert "history: error: is a symlink" in proc.stdout, proc.stdout
    shown = run_cli("diff", "HEAD~1", "--strict", cwd=repo)
    assert shown.returncode == 1
    assert "history: is a symlink" in shown.stdout, shown.stdout
    before = git(repo, "rev-parse", "HEAD")
    proc = run_cli("complete", "--episode", EID, cwd=repo)
    assert proc.returncode == 7, proc.stderr
    assert proc.stderr.startswith("jobstate: error: history in HEAD is a symlink; state holds regular files only")
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert list(outside.iterdir()) == []
    assert git(repo, "rev-parse", "HEAD") == before


def test_a_copy_removed_again_leaves_the_original_paid_as_usual(repo: Path, tmp_path: Path) -> None:
    """The fence reads HEAD's episodes from a catalog of HEAD only: a copy removed since the last refresh
    is no reason to refuse the original."""
    _paid(repo, tmp_path, step="first")
    copy = repo / episode_dir("2026-W30-5")
    shutil.copytree(repo / episode_dir(EID), copy)
    episode = copy / "episode.yaml"
    episode.write_text(episode.read_text().replace(EID, "2026-W30-5").replace("sequence: 0", "sequence: 5"))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a copy by hand")
    assert (
        run_cli("allocate", "--key", "weekly", "--week", "2026-W30", cwd=repo).returncode == errors.ALLOCATION_CONFLICT
    )
    git(repo, "rm", "-rq", episode_dir("2026-W30-5"))
    git(repo, "commit", "-qm", "the copy removed")
    proc = run_cli("run", "--episode", EID, "--step", "second", "--", *counting_step(tmp_path), cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert runs(tmp_path) == 2
