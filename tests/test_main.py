from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobstate.core.layout import episode_dir
from jobstate.core.periods import parse_period

from .conftest import committed_files, git, run_cli, status
from .snapshots import tree_state


def test_init_outside_git_says_so_then_git_init_works(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    proc = run_cli("init", cwd=plain)
    assert proc.returncode == 2
    assert "not inside a Git repository" in proc.stderr
    assert not (plain / "state").exists()
    proc = run_cli("init", "--git-init", cwd=plain)
    assert proc.returncode == 0, proc.stderr
    assert {"state/.gitkeep", "history/.gitkeep", "jobstate.yaml", ".gitignore"} <= committed_files(plain)
    assert ".jobstate/" in (plain / ".gitignore").read_text().splitlines()
    again = run_cli("init", cwd=plain)
    assert again.returncode == 0
    assert "already initialized" in again.stderr
    assert git(plain, "rev-list", "--count", "HEAD").strip() == "1"


def test_allocate_prints_only_the_id(repo: Path) -> None:
    proc = run_cli("allocate", "--key", "scheduled-run:2026-08-07", "--date", "2026-08-07", cwd=repo)
    assert (proc.returncode, proc.stdout) == (0, "2026-W32-0\n"), proc.stderr
    proc = run_cli("allocate", "--key", "scheduled-run:2026-08-08", "--week", "2026-W32", "--json", cwd=repo)
    assert json.loads(proc.stdout) == {
        "episode_id": "2026-W32-1",
        "period_id": "2026-W32",
        "sequence": 1,
        "allocation_key": "scheduled-run:2026-08-08",
        "created": True,
    }
    proc = run_cli("allocate", "--key", "scheduled-run:2026-08-07", "--period", "2026-W32", "--json", cwd=repo)
    assert json.loads(proc.stdout)["created"] is False
    assert json.loads(proc.stdout)["episode_id"] == "2026-W32-0"


def test_repo_option_and_env(repo: Path, tmp_path: Path) -> None:
    assert (
        run_cli("allocate", "--repo", str(repo), "--key", "a", "--date", "2026-12-31", cwd=tmp_path).stdout
        == "2026-W53-0\n"
    )
    proc = run_cli("allocate", "--key", "b", "--date", "2027-01-04", cwd=tmp_path, env={"JOBSTATE_REPO": str(repo)})
    assert proc.stdout == "2027-W01-0\n"


def test_at_uses_configured_timezone(repo: Path) -> None:
    (repo / "jobstate.yaml").write_text("period: day\ntimezone: Pacific/Auckland\n")
    git(repo, "commit", "-qam", "nz")
    proc = run_cli("allocate", "--key", "a", "--at", "2026-08-07T20:00:00+00:00", cwd=repo)
    assert proc.stdout == "2026-08-08-0\n", proc.stderr


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["allocate", "--key", "a", "--week", "2025-W53"], 2, "2025 has no week 53"),
        (["allocate", "--key", "a", "--week", "2026-W1"], 2, "invalid"),
        (["allocate", "--key", "a", "--week", "2026-w01"], 2, "invalid"),
        (["allocate", "--key", "a", "--week", "2026-W00"], 2, "no week 00"),
        (["allocate", "--key", "a", "--date", "2026-02-30"], 2, "no such calendar date"),
        (["allocate", "--key", "x" * 513, "--date", "2026-08-07"], 2, "at most 512"),
        (["allocate", "--key", "a\x01", "--date", "2026-08-07"], 2, "control or format character"),
        (["allocate", "--key", "a"], 2, "one of the arguments"),
        (["allocate", "--date", "2026-08-07"], 2, "--key"),
        (["allocate", "--key", "a", "--date", "2026-08-07", "--week", "2026-W32"], 2, "not allowed with"),
        (["show", "../etc"], 2, "invalid episode ID"),
        (["show", "2026-W32-9"], 5, "does not exist"),
        (["frobnicate"], 2, "invalid choice"),
    ],
)
def test_errors_are_one_line_with_exit_codes_and_nothing_written(
    repo: Path, args: list[str], code: int, needle: str
) -> None:
    head = git(repo, "rev-parse", "HEAD")
    proc = run_cli(*args, cwd=repo)
    assert proc.returncode == code, proc.stderr
    assert needle in proc.stderr
    assert proc.stdout == ""
    assert git(repo, "rev-parse", "HEAD") == head
    assert status(repo) == ""


def test_conflict_is_exit_4(repo: Path) -> None:
    run_cli("allocate", "--key", "k", "--week", "2026-W32", cwd=repo)
    proc = run_cli("allocate", "--key", "k", "--week", "2026-W33", cwd=repo)
    assert proc.returncode == 4
    assert "2026-W32" in proc.stderr
    assert "2026-W33" in proc.stderr


def test_hostile_yaml_is_exit_7(repo: Path) -> None:
    path = repo / episode_dir("2026-W32-0") / "episode.yaml"
    path.parent.mkdir(parents=True)
    path.write_text("!!python/object/apply:os.system ['touch pwned']\n")
    proc = run_cli("allocate", "--key", "k", "--week", "2026-W32", cwd=repo)
    assert proc.returncode == 7
    assert "state/2026/2026-W32/2026-W32-0/episode.yaml" in proc.stderr
    assert not (repo / "pwned").exists()
    assert run_cli("show", "2026-W32-0", cwd=repo).returncode == 7


def test_malformed_config_is_exit_7(repo: Path) -> None:
    (repo / "jobstate.yaml").write_text("period: fortnight\n")
    proc = run_cli("allocate", "--key", "k", "--date", "2026-08-07", cwd=repo)
    assert proc.returncode == 7
    assert "jobstate.yaml" in proc.stderr


def test_show_and_list(repo: Path) -> None:
    for key, day in [("a", "2026-08-03"), ("b", "2026-08-04"), ("c", "2026-08-10")]:
        run_cli("allocate", "--key", key, "--date", day, cwd=repo)
    shown = json.loads(run_cli("show", "2026-W32-1", "--json", cwd=repo).stdout)
    assert shown["allocation_key"] == "b"
    assert "allocation_key: b" in run_cli("show", "2026-W32-1", cwd=repo).stdout
    listed = json.loads(run_cli("list", "--json", cwd=repo).stdout)
    assert [e["episode_id"] for e in listed] == ["2026-W32-0", "2026-W32-1", "2026-W33-0"]
    assert run_cli("list", "--period", "2026-W33", cwd=repo).stdout.split("\t")[0] == "2026-W33-0"
    assert run_cli("list", "--period", "2026-W99", cwd=repo).returncode == 2
    other_kind = run_cli("list", "--period", "2026-08", cwd=repo)  # not an empty list: a question it cannot answer
    assert (other_kind.returncode, other_kind.stdout) == (2, "")
    assert "2026-08 is a month but" in other_kind.stderr


_HOLDER = """
import sys, time
from pathlib import Path
from jobstate.store.lock import FileLock
with FileLock(Path(sys.argv[1]), 5):
    print("held", flush=True)
    time.sleep(60)
"""


def test_held_lock_times_out_with_exit_3_and_lock_info_names_holder(repo: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(repo / ".jobstate" / "lock")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        start = time.monotonic()
        proc = run_cli("allocate", "--key", "k", "--date", "2026-08-07", "--lock-timeout", "0.5", cwd=repo)
        assert proc.returncode == 3
        assert time.monotonic() - start < 30
        assert f"pid {holder.pid}" in proc.stderr
        assert not (repo / episode_dir("2026-W32-0")).exists()
        info = run_cli("lock-info", "--json", cwd=repo)
        data = json.loads(info.stdout)
        assert data["locked"] is True
        assert data["holder"]["pid"] == holder.pid
        assert {"host", "user", "command", "since"} <= set(data["holder"])
        assert f"pid {holder.pid}" in run_cli("lock-info", cwd=repo).stdout
        env_timeout = run_cli(
            "allocate", "--key", "k", "--date", "2026-08-07", cwd=repo, env={"JOBSTATE_LOCK_TIMEOUT": "0.2"}
        )
        assert env_timeout.returncode == 3
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    # a killed holder releases the OS lock by itself
    assert run_cli("lock-info", cwd=repo).stdout.startswith("unlocked")
    assert (
        run_cli("allocate", "--key", "k", "--date", "2026-08-07", "--lock-timeout", "5", cwd=repo).stdout
        == "2026-W32-0\n"
    )


def test_retry_path_reads_without_writing(repo: Path) -> None:
    run_cli("allocate", "--key", "k", "--date", "2026-08-07", cwd=repo)
    before = tree_state(repo)  # the work tree, .git and .jobstate/: the retry path takes no lock and writes nothing
    proc = run_cli("allocate", "--key", "k", "--date", "2026-08-07", cwd=repo)
    assert proc.stdout == "2026-W32-0\n"
    assert tree_state(repo) == before


def test_no_traceback_for_unreadable_repo_path(tmp_path: Path) -> None:
    proc = run_cli("allocate", "--repo", str(tmp_path / "nope"), "--key", "k", "--date", "2026-08-07", cwd=tmp_path)
    assert proc.returncode == 2
    assert "does not exist" in proc.stderr


def test_python_m_and_console_script_agree(repo: Path) -> None:
    script = Path(sys.executable).with_name("jobstate")
    if not script.exists():
        pytest.skip("console script not installed in this environment")
    proc = subprocess.run(
        [str(script), "allocate", "--key", "k", "--date", "2026-08-07"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
        env=dict(os.environ),
    )
    assert proc.stdout == "2026-W32-0\n"


W32 = parse_period("2026-W32")


@pytest.mark.parametrize("value", ["nan", "-5", "inf"])
def test_lock_timeout_must_be_a_sane_number(repo: Path, value: str) -> None:
    proc = run_cli("allocate", "--key", "c", "--week", "2026-W32", "--lock-timeout", value, cwd=repo)
    assert proc.returncode == 2
    assert not (repo / episode_dir("2026-W32-0")).exists()


def test_remote_option_must_name_a_remote(repo: Path) -> None:
    proc = run_cli("allocate", "--remote", "", "--key", "a", "--week", "2026-W32", cwd=repo)
    assert proc.returncode == 2
    assert "--remote needs" in proc.stderr
