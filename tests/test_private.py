"""Nothing delivered by Git is obeyed: .jobstate/ files are read only if jobstate wrote them, and every
path taken from a private record is checked before use (issue 20, part 2)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from jobstate.core.layout import episode_dir, record_path_problem
from jobstate.core.records import AttemptState
from jobstate.core.rules_state import tracked_private
from jobstate.errors import DirtyState
from jobstate.paid.step import paid_step
from jobstate.store.private import checked_path, read_private
from jobstate.store.records import submissions
from jobstate.store.store import Store

from .conftest import git, run_cli, status
from .test_transaction_remote import make_hosts


def _allocate(repo: Path, key: str = "k1") -> str:
    proc = run_cli("allocate", "--key", key, "--date", "2026-08-07", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()[0]


def _blob(repo: Path, data: bytes) -> str:
    proc = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"], cwd=repo, input=data, capture_output=True, check=True
    )
    return proc.stdout.decode().strip()


def _force_commit(repo: Path, *paths: str) -> None:
    git(repo, "add", "-f", "--", *paths)
    git(repo, "commit", "-qm", "a pull request")


def _unknown_step(store: Store, episode: str) -> None:
    """Attempt 1 of ``generate`` committed as an intent whose acceptance nobody recorded."""
    with pytest.raises(RuntimeError), paid_step(store, episode, "generate"):
        raise RuntimeError("killed before the vendor answered")


def _state_of(store: Store, episode: str) -> AttemptState:
    return submissions(store, episode)["generate"][-1].state


def test_a_force_added_undo_record_is_refused_and_nothing_is_written(repo: Path, tmp_path: Path) -> None:
    _allocate(repo)
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / "docs").mkdir()
    (repo / "docs" / "assets").symlink_to(outside)
    config_before = (repo / ".git" / "config").read_bytes()
    evil = _blob(repo, b"[core]\n\tfsmonitor = touch /tmp/pwned\n")
    (repo / ".jobstate" / "undo.json").write_text(
        json.dumps({"docs/assets/x": [evil, None], ".git/config": [evil, None]}), encoding="utf-8"
    )
    _force_commit(repo, ".jobstate/undo.json", "docs/assets")

    proc = run_cli("allocate", "--key", "k2", "--date", "2026-08-07", cwd=repo)
    assert proc.returncode == 2, proc.stderr
    assert ".jobstate/undo.json" in proc.stderr
    assert "git rm --cached -r" in proc.stderr
    assert list(outside.iterdir()) == []
    assert (repo / ".git" / "config").read_bytes() == config_before

    # untracked as told, but the file left in place: its paths are still never followed
    git(repo, "rm", "-q", "--cached", "-r", ".jobstate/")
    git(repo, "commit", "-qm", "untrack")
    proc = run_cli("allocate", "--key", "k2", "--date", "2026-08-07", cwd=repo)
    assert proc.returncode == 2, proc.stderr
    assert "docs/assets/x" in proc.stderr
    assert "not under state/" in proc.stderr
    assert list(outside.iterdir()) == []
    assert (repo / ".git" / "config").read_bytes() == config_before

    (repo / ".jobstate" / "undo.json").unlink()
    assert run_cli("allocate", "--key", "k2", "--date", "2026-08-07", cwd=repo).returncode == 0


def test_an_undo_record_through_a_symlinked_directory_is_not_followed(repo: Path, tmp_path: Path) -> None:
    episode = _allocate(repo)
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / "history" / "evil").symlink_to(outside)
    blob = _blob(repo, b"x")
    (repo / ".jobstate" / "undo.json").write_text(json.dumps({"history/evil/x.yaml": [blob, None]}), encoding="utf-8")
    proc = run_cli(
        "resolve", "--episode", episode, "--step", "s", "--not-submitted", "--by", "a", "--reason", "r", cwd=repo
    )
    assert proc.returncode == 2, proc.stderr
    assert "symlink (history/evil)" in proc.stderr
    assert list(outside.iterdir()) == []


def test_a_force_added_result_file_does_not_settle_an_unknown_step(store: Store, repo: Path) -> None:
    episode = _allocate(repo)
    _unknown_step(store, episode)
    result = repo / ".jobstate" / "results" / f"{episode}.generate.1.json"
    result.parent.mkdir(parents=True, exist_ok=True)
    result.write_text(json.dumps({"remote_ref": "attacker-task"}), encoding="utf-8")
    _force_commit(repo, str(result.relative_to(repo)))
    proc = run_cli("run", "--episode", episode, "--step", "generate", "--", "true", cwd=repo)
    assert proc.returncode == 2, proc.stderr
    assert result.name in proc.stderr
    assert _state_of(store, episode) == AttemptState.INTENT
    assert "attacker-task" not in (repo / episode_dir(episode) / "submissions.yaml").read_text()


def test_a_result_file_that_is_a_symlink_is_not_followed(store: Store, repo: Path, tmp_path: Path) -> None:
    episode = _allocate(repo)
    _unknown_step(store, episode)
    elsewhere = tmp_path / "report.json"
    elsewhere.write_text(json.dumps({"remote_ref": "attacker-task"}), encoding="utf-8")
    result = repo / ".jobstate" / "results" / f"{episode}.generate.1.json"
    result.parent.mkdir(parents=True, exist_ok=True)
    result.symlink_to(elsewhere)
    proc = run_cli("run", "--episode", episode, "--step", "generate", "--", "true", cwd=repo)
    assert proc.returncode == 2, proc.stderr
    assert "symlink" in proc.stderr
    assert _state_of(store, episode) == AttemptState.INTENT


def test_a_force_added_pending_record_is_refused(store: Store, repo: Path) -> None:
    episode = _allocate(repo)
    _unknown_step(store, episode)
    head = git(repo, "rev-parse", "HEAD").strip()
    pending = {"commit": head, "paths": [".git/config"], "renames": [], "materialize": [".git/config"]}
    (repo / ".jobstate" / "pending.json").write_text(json.dumps(pending), encoding="utf-8")
    _force_commit(repo, ".jobstate/pending.json")
    config_before = (repo / ".git" / "config").read_bytes()
    args = ("--episode", episode, "--step", "generate", "--not-submitted", "--by", "ops", "--reason", "checked")
    proc = run_cli("resolve", *args, cwd=repo)
    assert proc.returncode == 2, proc.stderr
    assert ".jobstate/pending.json" in proc.stderr
    assert _state_of(store, episode) == AttemptState.INTENT

    git(repo, "rm", "-q", "--cached", ".jobstate/pending.json")
    git(repo, "commit", "-qm", "untrack")
    proc = run_cli("resolve", *args, cwd=repo)
    assert proc.returncode == 2, proc.stderr  # the record is still not followed
    assert ".git/config" in proc.stderr
    assert (repo / ".git" / "config").read_bytes() == config_before
    assert _state_of(store, episode) == AttemptState.INTENT


def test_a_private_record_that_is_a_symlink_is_not_followed(repo: Path, tmp_path: Path) -> None:
    _allocate(repo)
    elsewhere = tmp_path / "undo.json"
    elsewhere.write_text("{}", encoding="utf-8")
    (repo / ".jobstate" / "undo.json").symlink_to(elsewhere)
    proc = run_cli("allocate", "--key", "k2", "--date", "2026-08-07", cwd=repo)
    assert proc.returncode == 2, proc.stderr
    assert ".jobstate/undo.json goes through a symlink" in proc.stderr
    assert elsewhere.read_text(encoding="utf-8") == "{}"


def test_a_private_directory_that_is_a_symlink_is_refused(repo: Path, tmp_path: Path) -> None:
    _allocate(repo)
    elsewhere = tmp_path / "elsewhere"
    os.rename(repo / ".jobstate", elsewhere)
    (repo / ".jobstate").symlink_to(elsewhere)
    before = sorted(p.name for p in elsewhere.iterdir())
    proc = run_cli("allocate", "--key", "k2", "--date", "2026-08-07", cwd=repo)
    assert proc.returncode == 2, proc.stderr
    assert ".jobstate is a symlink" in proc.stderr
    assert sorted(p.name for p in elsewhere.iterdir()) == before


def test_verify_and_diff_flag_a_tracked_private_path(repo: Path) -> None:
    _allocate(repo)
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / ".jobstate" / "results").mkdir(exist_ok=True)
    (repo / ".jobstate" / "results" / "x.json").write_text("{}", encoding="utf-8")
    _force_commit(repo, ".jobstate/results/x.json")
    for args in (("verify",), ("verify", "--rev", "HEAD")):
        proc = run_cli(*args, cwd=repo)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert ".jobstate/results/x.json" in proc.stdout
        assert "private file tracked" in proc.stdout
    diff = json.loads(run_cli("diff", base, "--format", "json", cwd=repo).stdout)
    assert diff["alarms"][0]["kind"] == "private file tracked"
    assert ".jobstate/results/x.json" in diff["alarms"][0]["message"]
    # staged for removal but still in HEAD: the work tree's verify still flags it until it is committed
    git(repo, "rm", "-q", "--cached", ".jobstate/results/x.json")
    assert run_cli("verify", cwd=repo).returncode == 1
    git(repo, "commit", "-qm", "untrack")
    assert run_cli("verify", cwd=repo).returncode == 0
    assert status(repo) == ""


def test_record_paths_are_normalised_and_under_the_state() -> None:
    for good in ("state/2026/2026-W32/2026-W32-0/costs.yaml", "history/2026/2026-W32/2026-W32-0.yaml", "jobstate.yaml"):
        assert record_path_problem(good) is None
    for bad in (
        ".git/config",
        "state/../.git/config",
        "/etc/passwd",
        "state/./x",
        "state//x",
        "docs/x",
        "state",
        "state/.GIT/x",
        ".jobstate/undo.json",
        "",
        None,
        7,
    ):
        assert record_path_problem(bad) is not None, bad
    assert record_path_problem("docs/x", tracked=True) is None
    assert record_path_problem(".git/hooks/x", tracked=True) is not None
    assert [v.record for v in tracked_private(["state/a", ".jobstate/b", ".jobstate"])] == [".jobstate", ".jobstate/b"]


def test_read_private_refuses_a_tracked_file_and_reads_its_own(store: Store, repo: Path) -> None:
    path = repo / ".jobstate" / "remote-tip.json"
    assert read_private(store, path) is None
    path.write_text("{}", encoding="utf-8")
    assert read_private(store, path) == b"{}"
    _force_commit(repo, ".jobstate/remote-tip.json")
    with pytest.raises(DirtyState, match="tracked by Git"):
        read_private(store, path)
    with pytest.raises(DirtyState, match="goes through a symlink"):
        (repo / "state" / "link").symlink_to(repo / "history")
        checked_path(store, "state/link/x.yaml", "undo.json")


def test_a_remote_tip_that_tracks_a_private_file_is_not_followed(tmp_path: Path) -> None:
    bare, (host, attacker) = make_hosts(tmp_path, 2)
    assert run_cli("allocate", "--key", "k1", "--week", "2026-W32", cwd=host).returncode == 0
    git(attacker, "pull", "-q", "origin", "main")
    blob = _blob(attacker, b"[core]\n\tfsmonitor = touch /tmp/pwned\n")
    (attacker / ".jobstate").mkdir(exist_ok=True)
    (attacker / ".jobstate" / "undo.json").write_text(json.dumps({".git/config": [blob, None]}), encoding="utf-8")
    _force_commit(attacker, ".jobstate/undo.json")
    git(attacker, "push", "-q", "origin", "main")
    head = git(host, "rev-parse", "HEAD")
    config_before = (host / ".git" / "config").read_bytes()
    proc = run_cli("allocate", "--key", "k2", "--week", "2026-W32", cwd=host)
    assert proc.returncode == 2, proc.stderr
    assert ".jobstate/undo.json" in proc.stderr
    assert git(host, "rev-parse", "HEAD") == head  # not brought to that tip
    assert not (host / ".jobstate" / "undo.json").exists()
    assert (host / ".git" / "config").read_bytes() == config_before
    assert status(host) == ""
    assert bare.is_dir()
