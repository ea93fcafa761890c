"""The state/<year>/<period>/<id>/ layout: a flat state (state/<id>/) is read, refused for work, and moved
by jobstate migrate in one commit of renames that verify --against and diff prove lossless."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobstate import errors
from jobstate.core.layout import (
    HISTORY,
    canonical,
    describes_episode,
    episode_dir,
    episode_of,
    history_path,
    is_period_dir,
    is_year_dir,
    mode_refusal,
    retired_path,
)
from jobstate.core.periods import format_episode_id, parse_period
from jobstate.review.changes import changed_paths

from .bigrepo import add_episodes, episode_id, episode_place
from .conftest import git, git_init, run_cli, status
from .legacy import flatten


def _retired_and_flat(history: Path) -> tuple[str, str]:
    """The pipeline history with one episode retired, then flattened: the trees of state/ and history/
    before flattening."""
    new = run_cli("allocate", "--key", "to-retire", "--week", "2026-W35", cwd=history)
    assert new.returncode == 0, new.stderr
    retired = run_cli("retire", new.stdout.strip(), "--by", "ops", "--reason", "a test run", cwd=history)
    assert retired.returncode == 0, retired.stderr
    trees = git(history, "rev-parse", "HEAD:state").strip(), git(history, "rev-parse", "HEAD:history").strip()
    flatten(history)
    assert (history / "state/2026-W33-0/episode.yaml").is_file()
    assert (history / "history/retired/2026-W35-0.yaml").is_file()
    return trees


def test_a_flat_state_is_read_by_review_and_refused_by_every_command_until_migrated(history: Path) -> None:
    _retired_and_flat(history)
    for args in (("allocate", "--key", "k9", "--week", "2026-W33"), ("list",), ("show", "2026-W33-0")):
        proc = run_cli(*args, cwd=history)
        assert proc.returncode == errors.STATE_INVALID, (args, proc.stderr)
        assert "flat layout" in proc.stderr, proc.stderr
        assert "jobstate migrate" in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1
    old = run_cli("verify", "--rev", "HEAD", cwd=history)
    assert old.returncode == 0, old.stdout  # an old revision stays readable: a warning, no error
    assert "state: warning: holds episodes in the flat layout" in old.stdout
    assert run_cli("verify", "--rev", "HEAD", "--strict", cwd=history).returncode == errors.VERIFY_PROBLEMS
    assert status(history) == ""


def test_migrate_moves_a_flat_state_in_one_commit_that_keeps_every_byte(history: Path) -> None:
    state_tree, history_tree = _retired_and_flat(history)
    flat = git(history, "rev-parse", "HEAD").strip()
    dry = run_cli("migrate", "--dry-run", cwd=history)
    assert dry.returncode == 0, dry.stderr
    assert "state/2026-W33-0 -> state/2026/2026-W33/2026-W33-0" in dry.stdout
    assert "history/retired/2026-W35-0.yaml -> history/retired/2026/2026-W35/2026-W35-0.yaml" in dry.stdout
    assert git(history, "rev-parse", "HEAD").strip() == flat
    assert status(history) == ""
    done = run_cli("migrate", cwd=history)
    assert done.returncode == 0, done.stderr
    assert git(history, "rev-parse", "HEAD~1").strip() == flat  # one commit
    # every byte kept: the trees are the very trees the nested state had before it was flattened
    assert git(history, "rev-parse", "HEAD:state").strip() == state_tree
    assert git(history, "rev-parse", "HEAD:history").strip() == history_tree
    moves = git(history, "diff", "--name-status", "-M", "HEAD~1", "HEAD").splitlines()
    assert moves
    assert all(line.startswith("R100\t") for line in moves), moves
    assert "episode(s) from the flat layout" in git(history, "log", "-1", "--format=%s")
    proved = run_cli("verify", "--rev", "HEAD", "--against", "HEAD~1", "--strict", cwd=history)
    assert proved.returncode == 0, proved.stdout
    review = run_cli("diff", "HEAD~1", "--strict", "--format", "json", cwd=history)
    assert review.returncode == 0, review.stdout
    assert json.loads(review.stdout)["alarms"] == []
    # and work goes on: a retry gets its episode, a new key the next sequence, a retired key nothing
    assert run_cli("show", "2026-W33-0", cwd=history).returncode == 0
    key = git(history, "show", f"HEAD:{episode_dir('2026-W33-0')}/episode.yaml").split("allocation_key: ")[1]
    again = run_cli("allocate", "--key", key.split("\n")[0].strip("'\""), "--week", "2026-W33", cwd=history)
    assert (again.returncode, again.stdout.strip()) == (0, "2026-W33-0"), again.stderr
    gone = run_cli("allocate", "--key", "to-retire", "--week", "2026-W35", cwd=history)
    assert gone.returncode == errors.ALLOCATION_CONFLICT, gone.stderr
    fresh = run_cli("allocate", "--key", "fresh", "--week", "2026-W35", cwd=history)
    assert (fresh.returncode, fresh.stdout.strip()) == (0, "2026-W35-1"), fresh.stderr
    assert run_cli("migrate", cwd=history).stdout.startswith("migrate: nothing to migrate")


def test_one_episode_in_both_layouts_is_an_error_and_a_flat_one_in_a_pull_request_an_alarm(history: Path) -> None:
    git(history, "tag", "base")
    # a pull request that adds an episode in the flat layout: review says so, and commands refuse it
    shutil.copytree(history / episode_dir("2026-W33-0"), history / "state/2026-W33-9")
    text = (history / "state/2026-W33-9/episode.yaml").read_text()
    (history / "state/2026-W33-9/episode.yaml").write_text(
        text.replace("2026-W33-0", "2026-W33-9").replace("sequence: 0", "sequence: 9")
    )
    git(history, "add", "-A")
    git(history, "commit", "-qm", "an episode written by hand, the old way")
    diff = run_cli("diff", "base", "--format", "json", cwd=history)
    alarms = json.loads(diff.stdout)["alarms"]
    assert any("flat layout" in a["message"] for a in alarms), alarms
    verify = run_cli("verify", "--rev", "HEAD", "--against", "base", "--strict", cwd=history)
    assert verify.returncode == errors.VERIFY_PROBLEMS
    assert "state: error: holds episodes in the flat layout" in verify.stdout  # a warning that fails --strict
    assert run_cli("allocate", "--key", "k", "--week", "2026-W33", cwd=history).returncode == errors.STATE_INVALID
    # the same episode at both places: one of them is not what commands read
    git(history, "reset", "-q", "--hard", "base")
    shutil.copytree(history / episode_dir("2026-W33-0"), history / "state/2026-W33-0")
    git(history, "add", "-A")
    git(history, "commit", "-qm", "a copy at the old place")
    twice = run_cli("verify", "--rev", "HEAD", cwd=history)
    assert twice.returncode == errors.VERIFY_PROBLEMS
    assert "state/2026-W33-0/episode.yaml: error: is in the flat layout and its episode in today's layout" in (
        twice.stdout
    )
    assert run_cli("diff", "base", "--strict", cwd=history).returncode != 0


def test_migrate_refuses_a_file_where_a_year_or_period_directory_goes_and_writes_nothing(history: Path) -> None:
    flatten(history)
    (history / "state" / "2026").write_text("not a year\n")
    git(history, "add", "state/2026")
    git(history, "commit", "-qm", "a file where the year 2026 goes")
    head = git(history, "rev-parse", "HEAD")
    refused = run_cli("migrate", cwd=history)
    assert refused.returncode == errors.AllocationConflict.exit_code, refused.stderr
    assert "state/2026/, which is a file or a link" in refused.stderr
    assert git(history, "rev-parse", "HEAD") == head
    assert status(history) == ""


_PERIODS = st.one_of(
    st.builds(lambda y, w: f"{y}-W{w:02d}", st.integers(2000, 2099), st.integers(1, 52)),
    st.builds(lambda y, m: f"{y}-{m:02d}", st.integers(2000, 2099), st.integers(1, 12)),
    st.builds(lambda y, m, d: f"{y}-{m:02d}-{d:02d}", st.integers(2000, 2099), st.integers(1, 12), st.integers(1, 28)),
)


@given(_PERIODS, st.integers(0, 999_999), st.sampled_from(["episode.yaml", "costs.yaml", "art/final.mp4"]))
def test_every_place_reads_back_as_its_episode_in_either_layout(period_id: str, sequence: int, leaf: str) -> None:
    eid = format_episode_id(parse_period(period_id), sequence)
    year, period, name = episode_dir(eid).split("/")[1:]
    assert (year, period, name) == (period_id[:4], period_id, eid)
    assert is_year_dir(year)
    assert is_period_dir(year, period)
    assert episode_of(f"{episode_dir(eid)}/{leaf}") == (eid, leaf)
    assert episode_of(history_path(eid)) == (eid, HISTORY)
    assert describes_episode(retired_path(eid)) == eid
    for flat, today in (
        (f"state/{eid}/{leaf}", f"{episode_dir(eid)}/{leaf}"),
        (f"history/{eid}.yaml", history_path(eid)),
        (f"history/retired/{eid}.yaml", retired_path(eid)),
    ):
        assert canonical(flat) == today
        assert canonical(today) == today
    # a place whose parts disagree is no episode's
    assert episode_of(f"state/{'2001' if year != '2001' else '2002'}/{period}/{eid}/{leaf}") is None


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_flat_state_of_100000_episodes_migrates_in_one_commit_that_keeps_every_byte(tmp_path: Path) -> None:
    """At scale every path is on one command line no more (the system's limit is far below 100,000
    paths), the flat state/ tree of 100,000 entries is rewritten once, not once per episode."""
    count = 100_000
    repo = tmp_path / "repo"
    git_init(repo)
    init = run_cli("init", cwd=repo)
    assert init.returncode == 0, init.stderr
    add_episodes(repo, count, flat=True)
    flat_state = git(repo, "rev-parse", "HEAD:state").strip()
    flat_head = git(repo, "rev-parse", "HEAD").strip()

    refused = run_cli("allocate", "--key", "existing:7", "--week", "2000-W01", cwd=repo)
    assert refused.returncode == errors.StateInvalid.exit_code
    assert "jobstate migrate" in refused.stderr

    moved = run_cli("migrate", cwd=repo)
    assert moved.returncode == 0, moved.stderr
    assert git(repo, "rev-list", "--count", f"{flat_head}..HEAD").strip() == "1"
    assert git(repo, "status", "--porcelain").strip() == ""
    renames = git(repo, "diff", "-M", "--name-status", "HEAD~1", "HEAD").splitlines()
    assert len(renames) == count
    assert all(line.startswith("R100\t") for line in renames)
    # every episode at its place in the new layout (a sample: each path of the diff above is a rename)
    for n in (0, 1, count // 2, count - 1):
        place = episode_place(n, flat=False)
        assert git(repo, "cat-file", "-t", f"HEAD:{place}/episode.yaml").strip() == "blob"
        assert git(repo, "rev-parse", f"HEAD:{place}/episode.yaml") == git(
            repo, "rev-parse", f"HEAD~1:{episode_place(n, flat=True)}/episode.yaml"
        )
    assert git(repo, "rev-parse", "HEAD~1:state").strip() == flat_state
    largest = max(
        len(git(repo, "ls-tree", f"HEAD:{layout_dir}").splitlines()) for layout_dir in ("state", "state/2000")
    )
    assert largest <= 1000
    assert (repo / episode_place(count - 1, flat=False) / "episode.yaml").is_file()

    proof = run_cli("verify", "--rev", "HEAD", "--strict", "--against", "HEAD~1", cwd=repo)
    assert proof.returncode == 0, proof.stdout + proof.stderr
    retry = run_cli("allocate", "--key", f"existing:{count - 1}", "--week", episode_id(count - 1)[:8], cwd=repo)
    assert (retry.returncode, retry.stdout.strip()) == (0, episode_id(count - 1))


def test_a_move_into_the_new_layout_that_changes_a_mode_is_a_change(history: Path) -> None:
    """Only a move that keeps every byte and the mode is no change; an executable bit added on the way is."""
    flatten(history)
    for path in git(history, "ls-files", "state").split("\n"):
        target = canonical(path) if path else path
        if path and target != path:
            (history / target).parent.mkdir(parents=True, exist_ok=True)
            git(history, "mv", path, target)
    moved = episode_dir("2026-W30-0") + "/episode.yaml"
    git(history, "update-index", "--chmod=+x", moved)
    git(history, "commit", "-qm", "moved by hand, one file made executable")
    found = changed_paths(history, git(history, "rev-parse", "HEAD~1").strip(), "HEAD")
    assert found is not None
    assert found[0] == frozenset({moved})


@pytest.mark.parametrize("mode", ["100755", "120000"])
def test_migrate_refuses_a_file_no_command_writes_with_the_one_code_for_it(history: Path, mode: str) -> None:
    """An executable file or a symlink in a flat episode is refused as every committing command refuses it
    (exit 7, the mode rule), not carried into the new layout and then failed by the migration's proof."""
    flatten(history)
    path = "state/2026-W30-0/episode.yaml"
    if mode == "120000":
        (history / path).unlink()
        (history / path).symlink_to("../../README")
        git(history, "add", path)
    else:
        (history / path).chmod(0o755)
        git(history, "add", path)
    git(history, "commit", "-qm", "a file no command writes")
    head = git(history, "rev-parse", "HEAD")
    refused = run_cli("migrate", cwd=history)
    assert refused.returncode == errors.STATE_INVALID, refused.stderr
    assert refused.stderr == f"jobstate: error: {mode_refusal(path, mode)}\n"  # the one refusal of modes
    assert git(history, "rev-parse", "HEAD") == head
    assert status(history) == ""
