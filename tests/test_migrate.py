from __future__ import annotations

from pathlib import Path

import pytest

from jobstate.allocation.allocation import allocate
from jobstate.core.layout import episode_dir, history_path
from jobstate.core.periods import parse_period
from jobstate.store.store import Store
from jobstate.store.yamlio import loads

from .conftest import both_formats, git, run_cli, status
from .fakegit import fake_git, run_killed
from .legacy import make_legacy_repo, write_legacy_week
from .snapshots import tree_state

WEEKS = ["2026-W30", "2026-W31", "2026-W53"]


@pytest.fixture
def legacy(tmp_path: Path, object_format: str) -> Path:
    repo = tmp_path / "legacy"
    make_legacy_repo(repo, WEEKS, object_format)
    return repo


def test_dry_run_prints_plan_and_diff_and_writes_nothing(legacy: Path) -> None:
    before = tree_state(legacy)
    proc = run_cli("migrate", "--dry-run", cwd=legacy)
    assert proc.returncode == 0, proc.stderr
    assert "state/2026-W30 -> state/2026/2026-W30/2026-W30-0" in proc.stdout
    assert "history/2026-W53.yaml -> history/2026/2026-W53/2026-W53-0.yaml" in proc.stdout
    assert "+episode_id: 2026-W31-0" in proc.stdout
    assert "--- a/state/2026-W31/episode.yaml" in proc.stdout
    assert tree_state(legacy) == before


@both_formats
def test_migration_is_one_commit_of_renames_keeping_every_value(legacy: Path) -> None:
    old = {w: loads((legacy / "state" / w / "episode.yaml").read_bytes(), w) for w in WEEKS}
    old_hist = {w: loads((legacy / "history" / f"{w}.yaml").read_bytes(), w) for w in WEEKS}
    base = git(legacy, "rev-parse", "HEAD").strip()
    proc = run_cli("migrate", cwd=legacy)
    assert proc.returncode == 0, proc.stderr
    assert git(legacy, "rev-parse", "HEAD~1").strip() == base
    message = git(legacy, "log", "-1", "--format=%B")
    for w in WEEKS:
        assert f"state/{w} -> {episode_dir(w + '-0')}" in message
        new = loads((legacy / episode_dir(f"{w}-0") / "episode.yaml").read_bytes(), w)
        assert all(new[k] == v for k, v in old[w].items())
        assert (new["episode_id"], new["week_id"], new["sequence"]) == (f"{w}-0", w, 0)
        assert new["migration"]["from_id"] == w
        hist = loads((legacy / history_path(f"{w}-0")).read_bytes(), w)
        assert all(hist[k] == v for k, v in old_hist[w].items())
        assert not (legacy / "state" / w).exists()
    moves = git(legacy, "diff", "-M", "--name-status", "HEAD~1", "HEAD")
    assert "R100\tstate/2026-W30/final.mp4\tstate/2026/2026-W30/2026-W30-0/final.mp4" in moves
    # every change is a move (plus small additions): no file is added or deleted outright
    assert all(line.startswith("R") for line in moves.splitlines()), moves
    assert "\tstate/2026-W30/episode.yaml\tstate/2026/2026-W30/2026-W30-0/episode.yaml" in moves
    assert "\thistory/2026-W53.yaml\thistory/2026/2026-W53/2026-W53-0.yaml" in moves
    assert status(legacy) == ""
    proof = run_cli("verify", "--rev", "HEAD", "--against", base, cwd=legacy)
    assert proof.returncode == 0, proof.stdout
    assert "preserved" in proof.stdout
    # a second run is a no-op
    head = git(legacy, "rev-parse", "HEAD")
    again = run_cli("migrate", cwd=legacy)
    assert "nothing to migrate" in again.stdout
    assert git(legacy, "rev-parse", "HEAD") == head


def test_after_migration_allocation_continues_the_week(legacy: Path) -> None:
    run_cli("migrate", cwd=legacy)
    run_cli("init", cwd=legacy)
    with Store(legacy) as store:
        assert allocate(store, "scheduled-run:2026-07-24", parse_period("2026-W30")).episode_id == "2026-W30-1"
        assert allocate(store, "legacy:2026-W31", parse_period("2026-W31")).episode_id == "2026-W31-0"


def _assert_refused(legacy: Path, code: int, says: str, week: str) -> None:
    before = git(legacy, "rev-parse", "HEAD")
    proc = run_cli("migrate", cwd=legacy)
    assert proc.returncode == code, proc.stderr
    assert says in proc.stderr
    assert git(legacy, "rev-parse", "HEAD") == before
    assert (legacy / "state" / week).is_dir()


def test_refuses_a_dirty_tree(legacy: Path) -> None:
    (legacy / "state" / "2026-W30" / "notes.txt").write_text("wip")
    _assert_refused(legacy, 2, "clean tree", "2026-W30")


def test_refuses_a_sequence_clash(legacy: Path) -> None:
    run_cli("init", cwd=legacy)
    clash = legacy / episode_dir("2026-W31-0")
    clash.mkdir(parents=True)
    (clash / "episode.yaml").write_text(
        "schema: 1\nepisode_id: 2026-W31-0\nperiod_id: 2026-W31\nweek_id: 2026-W31\nsequence: 0\n"
        "allocation_key: new-style\nallocated_at: '2026-07-30T00:00:00Z'\nstatus: allocated\n"
    )
    git(legacy, "add", "-A")
    git(legacy, "commit", "-qm", "a versioned episode in a legacy week")
    before = tree_state(legacy, skip=".jobstate/")
    proc = run_cli("migrate", cwd=legacy)
    assert proc.returncode == 4
    assert "2026-W31-0" in proc.stderr
    assert tree_state(legacy, skip=".jobstate/") == before  # the lock file's holder record aside


def test_refuses_when_an_artifact_no_longer_matches(legacy: Path) -> None:
    (legacy / "state" / "2026-W31" / "cover.png").write_bytes(b"changed")
    git(legacy, "commit", "-qam", "someone re-rendered the cover")
    _assert_refused(legacy, 7, "state/2026-W31/cover.png", "2026-W31")


def test_refuses_hostile_or_malformed_legacy_yaml(legacy: Path) -> None:
    (legacy / "state" / "2026-W30" / "episode.yaml").write_text("!!python/object/apply:os.system ['touch x']\n")
    git(legacy, "commit", "-qam", "hostile")
    proc = run_cli("migrate", cwd=legacy)
    assert proc.returncode == 7
    assert "state/2026-W30/episode.yaml" in proc.stderr
    assert not (legacy / "x").exists()


def test_kill_after_the_commit_is_finished_by_the_next_command(legacy: Path, tmp_path: Path) -> None:
    env = fake_git(tmp_path, "update-index")
    run_killed(legacy, env, "migrate")
    assert "jobstate migrate" in git(legacy, "log", "-1", "--format=%s")
    run_cli("init", cwd=legacy)  # any state-changing command finishes the work tree and index first
    assert status(legacy) == ""
    assert (legacy / episode_dir("2026-W30-0") / "final.mp4").exists()
    assert run_cli("verify", cwd=legacy).returncode == 0


def test_history_only_legacy_week(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    make_legacy_repo(repo, ["2026-W30"])
    write_legacy_week(repo, "2026-W20", 5)
    (repo / "state" / "2026-W20" / "episode.yaml").unlink()
    for f in (repo / "state" / "2026-W20").iterdir():
        f.unlink()
    (repo / "state" / "2026-W20").rmdir()
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "old week only in history")
    proc = run_cli("migrate", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert (repo / history_path("2026-W20-0")).exists()


W32 = parse_period("2026-W32")


def test_migrate_is_not_blamed_for_problems_it_did_not_make(tmp_path: Path) -> None:
    legacy = tmp_path / "legacy"
    make_legacy_repo(legacy, ["2026-W30"])
    (legacy / "state" / "junk").mkdir()
    (legacy / "state" / "junk" / "f").write_text("x")
    git(legacy, "add", "-A")
    git(legacy, "commit", "-qm", "junk that predates the migration")
    proc = run_cli("migrate", cwd=legacy)
    assert proc.returncode == 0, proc.stderr
    assert (legacy / episode_dir("2026-W30-0") / "episode.yaml").exists()


def test_unquoted_yaml_timestamps_are_taken_as_they_are_and_preserved(legacy: Path) -> None:
    # pipelines wrote completed_at without quotes: YAML reads a timestamp, not a string
    for path in [legacy / "state" / "2026-W30" / "episode.yaml", legacy / "history" / "2026-W30.yaml"]:
        path.write_text(
            path.read_text().replace("completed_at: '2026-07-11T18:00:00Z'", "completed_at: 2026-07-11T18:00:00Z")
        )
    git(legacy, "commit", "-qam", "timestamps as the pipeline wrote them")
    base = git(legacy, "rev-parse", "HEAD").strip()
    proc = run_cli("migrate", cwd=legacy)
    assert proc.returncode == 0, proc.stderr
    assert "completed_at: 2026-07-11T18:00:00Z" in (legacy / history_path("2026-W30-0")).read_text()
    proof = run_cli("verify", "--rev", "HEAD", "--against", base, cwd=legacy)
    assert "preserved:" in proof.stdout, proof.stdout
    assert status(legacy) == ""


@pytest.mark.parametrize("approval", ["{status: approved, by: editor}", "{status: pending}", "approved"])
def test_a_legacy_approval_in_any_old_shape_migrates_as_it_was(legacy: Path, approval: str) -> None:
    # pipelines recorded approvals loosely; a migration keeps them, it does not judge them
    path = legacy / "state" / "2026-W30" / "episode.yaml"
    text = path.read_text()
    old = text[text.index("approval: ") : text.index("\n", text.index("approval: "))]
    path.write_text(text.replace(old, f"approval: {approval}"))
    git(legacy, "commit", "-qam", "an approval as an old pipeline wrote it")
    base = git(legacy, "rev-parse", "HEAD").strip()
    proc = run_cli("migrate", cwd=legacy)
    assert proc.returncode == 0, proc.stderr
    assert f"approval: {approval}" in (legacy / episode_dir("2026-W30-0") / "episode.yaml").read_text()
    proof = run_cli("verify", "--rev", "HEAD", "--against", base, cwd=legacy)
    assert proof.returncode == 0, proof.stdout
    assert "preserved:" in proof.stdout, proof.stdout


def test_a_migration_whose_proof_fails_writes_nothing(legacy: Path) -> None:
    # a legacy history that disagrees with its episode on when it completed: the migrated pair would
    # not verify; the proof runs on the commit before the branch moves, so nothing is written
    path = legacy / "history" / "2026-W31.yaml"
    path.write_text(path.read_text().replace("2026-07-12T18:00:00Z", "2026-07-30T09:00:00Z"))
    git(legacy, "commit", "-qam", "a history file that disagrees with its episode")

    def files() -> dict[str, tuple[bytes, int, int]]:
        # unreferenced objects of the refused commit may stay in .git/objects until git gc
        return {k: v for k, v in tree_state(legacy).items() if not k.startswith((".jobstate/", ".git/objects"))}

    before = files()
    head = git(legacy, "rev-parse", "HEAD")
    proc = run_cli("migrate", cwd=legacy)
    assert proc.returncode == 1, proc.stderr
    assert "completed_at" in proc.stderr
    assert "nothing was written" in proc.stderr
    assert git(legacy, "rev-parse", "HEAD") == head
    assert files() == before


def test_a_migrated_episode_was_allocated_no_later_than_its_own_records_say(legacy: Path) -> None:
    assert run_cli("migrate", cwd=legacy).returncode == 0
    episode = loads((legacy / episode_dir("2026-W30-0") / "episode.yaml").read_bytes(), "episode.yaml")
    # the legacy record's approval (2026-07-10T10:00) comes before its completion (2026-07-11T18:00)
    assert episode["allocated_at"] == "2026-07-10T10:00:00Z"
    assert episode["allocated_at"] < episode["completed_at"]
    assert "status" not in episode  # a status is derived, never stored
    shown = run_cli("show", "2026-W30-0", "--json", cwd=legacy)
    assert '"status": "completed"' in shown.stdout, shown.stdout


def test_an_episode_the_legacy_record_names_no_time_for_is_allocated_at_the_migration(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    make_legacy_repo(repo, ["2026-W30"])
    path = repo / "state" / "2026-W30" / "episode.yaml"
    path.write_text(
        "".join(line + "\n" for line in path.read_text().splitlines() if not line.startswith(("approval", "completed")))
    )
    (repo / "history" / "2026-W30.yaml").unlink()
    git(repo, "commit", "-qam", "an episode that was never approved")
    assert run_cli("migrate", cwd=repo).returncode == 0
    episode = loads((repo / episode_dir("2026-W30-0") / "episode.yaml").read_bytes(), "episode.yaml")
    assert episode["allocated_at"] == episode["migration"]["migrated_at"]


def test_bare_hex_artifacts_of_a_legacy_record_migrate_and_verify(legacy: Path) -> None:
    for path in (legacy / "state" / "2026-W31" / "episode.yaml", legacy / "history" / "2026-W31.yaml"):
        path.write_text(path.read_text().replace("'sha256:", "'"))
    git(legacy, "commit", "-qam", "hashes as another pipeline wrote them")
    base = git(legacy, "rev-parse", "HEAD").strip()
    proc = run_cli("migrate", cwd=legacy)
    assert proc.returncode == 0, proc.stderr
    proof = run_cli("verify", "--rev", "HEAD", "--against", base, cwd=legacy)
    assert proof.returncode == 0, proof.stdout
    assert "preserved:" in proof.stdout


def test_migrate_check_lists_what_no_command_reads_and_writes_nothing(legacy: Path) -> None:
    path = legacy / "state" / "2026-W30" / "episode.yaml"
    text = path.read_text().replace("currency: USD, remote_ref", "currency: USD, vendor: acme, remote_ref", 1)
    path.write_text(text + "notes: re-cut after legal review\nduration_s: 1260\n")
    hist = legacy / "history" / "2026-W31.yaml"
    hist.write_text(hist.read_text() + "published_url: https://example.test/w31\n")
    git(legacy, "commit", "-qam", "fields other pipelines kept")
    before = tree_state(legacy)
    proc = run_cli("migrate", "--check", cwd=legacy)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines() == [
        "state/2026-W30/episode.yaml: notes",
        "state/2026-W30/episode.yaml: duration_s",
        "state/2026-W30/episode.yaml: costs[0].vendor",
        "history/2026-W31.yaml: published_url",
    ]
    assert "4 legacy field(s) in 3 legacy episode(s)" in proc.stderr
    as_json = run_cli("migrate", "--check", "--json", cwd=legacy)
    assert as_json.returncode == 1
    assert '"unread_fields": ["state/2026-W30/episode.yaml: notes"' in as_json.stdout
    assert tree_state(legacy) == before
    # the migration itself keeps them as text, byte for byte
    assert run_cli("migrate", cwd=legacy).returncode == 0
    assert "notes: re-cut after legal review" in (legacy / episode_dir("2026-W30-0") / "episode.yaml").read_text()


def test_migrate_check_of_a_clean_legacy_state_exits_0_and_meets_the_migrations_refusals(legacy: Path) -> None:
    proc = run_cli("migrate", "--check", cwd=legacy)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert "every field of 3 legacy episode(s) is carried over" in proc.stderr
    (legacy / "state" / "2026-W30" / "final.mp4").write_bytes(b"tampered")
    git(legacy, "commit", "-qam", "a file that no longer matches its hash")
    refused = run_cli("migrate", "--check", cwd=legacy)
    assert refused.returncode == 7, refused.stderr
    assert "no longer matches" in refused.stderr
    both = run_cli("migrate", "--check", "--dry-run", cwd=legacy)
    assert both.returncode == 2


def test_migrate_check_escapes_a_hostile_field_name(legacy: Path) -> None:
    path = legacy / "state" / "2026-W30" / "episode.yaml"
    path.write_text(path.read_text() + '"evil\\e[31mred": 1\n')
    git(legacy, "commit", "-qam", "a field name with an escape sequence")
    proc = run_cli("migrate", "--check", cwd=legacy)
    assert proc.returncode == 1, proc.stderr
    assert "\x1b" not in proc.stdout
    assert "evil" in proc.stdout


def test_complete_again_of_a_migrated_completed_episode_is_a_repeat_not_a_crash(legacy: Path) -> None:
    """Its history file is the legacy one (no cost totals): the repeat says so and answers nothing more."""
    assert run_cli("migrate", cwd=legacy).returncode == 0
    for argv in (("complete", "--episode", "2026-W30-0"), ("complete", "--episode", "2026-W30-0", "--json")):
        proc = run_cli(*argv, cwd=legacy)
        assert (proc.returncode, proc.stdout) == (0, ""), proc.stderr
        assert proc.stderr == "jobstate: episode 2026-W30-0 is already completed; nothing new recorded\n"
