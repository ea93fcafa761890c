"""jobstate key --from and allocate --from, in-process with a fixed clock, on real Git repositories.

The recipes are read from docs/allocation.md itself and run with the environment each
scheduler sets (tests/scheduler_envs.py).
"""

from __future__ import annotations

import json
import re
import shlex
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jobstate.allocation.allocation import allocate
from jobstate.core.layout import episode_dir
from jobstate.core.periods import Period
from jobstate.errors import UsageError
from jobstate.main import main
from jobstate.store.store import Store
from jobstate.store.yamlio import load_file

from .conftest import git, run_cli, status
from .scheduler_envs import (
    MONDAY,
    NEXT_MONDAY,
    RECIPES,
    Run,
    airflow,
    cron,
    dagster,
    github,
    kubernetes,
    minutes,
    systemd,
    temporal,
)
from .snapshots import tree_state

RECIPES_PAGE = Path(__file__).resolve().parents[1] / "docs" / "allocation.md"
SCHEDULER_VARS = ("GITHUB_", "AIRFLOW_CTX_", "DAGSTER_", "TEMPORAL_", "TRIGGER_", "KUBERNETES_")
SCHEDULER_NAMES = ("INVOCATION_ID", "JOB_NAME", "POD_NAMESPACE", "HOSTNAME", "CI")


def recipe_commands() -> dict[str, list[str]]:
    """Every ``jobstate ... --from X`` command in the "Recipes" section of docs/allocation.md."""
    text = RECIPES_PAGE.read_text(encoding="utf-8")
    recipes = text[text.index("## Recipes") : text.index("## When state is removed with Git")]
    found: dict[str, list[str]] = {}
    for m in re.finditer(r"\$\((jobstate [^)]*)\)|\"(jobstate [^\"]*)\"", recipes):
        argv = [a for a in shlex.split(m[1] or m[2]) if a != "$@"][1:]
        scheduler = argv[argv.index("--from") + 1]
        assert scheduler not in found, f"two recipes for {scheduler}"
        found[scheduler] = argv
    return found


@pytest.fixture
def scheduler_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for name in list(os.environ):
        if name.startswith(SCHEDULER_VARS) or name in SCHEDULER_NAMES:
            monkeypatch.delenv(name)
    return monkeypatch


def launch(
    mp: pytest.MonkeyPatch, repo: Path, run: Run, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    with mp.context() as m:
        for name, value in run.env.items():
            m.setenv(name, value)
        code = main([*argv, "--repo", str(repo)], now=lambda: run.now)
    out, err = capsys.readouterr()
    return code, out, err


def test_every_scheduler_has_exactly_one_recipe() -> None:
    assert sorted(recipe_commands()) == sorted(RECIPES)


@pytest.mark.parametrize("scheduler", sorted(RECIPES))
def test_readme_recipe_retry_gets_the_same_episode_and_the_next_run_a_new_one(
    scheduler: str, repo: Path, scheduler_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = recipe_commands()[scheduler]
    first, retry, following = RECIPES[scheduler]
    code, out, err = launch(scheduler_env, repo, first, argv, capsys)
    assert code == 0, err
    episode = out.strip()
    assert episode == "2026-W32-0"
    head = git(repo, "rev-parse", "HEAD")
    code, out, err = launch(scheduler_env, repo, retry, argv, capsys)
    assert (code, out.strip()) == (0, episode), err
    assert git(repo, "rev-parse", "HEAD") == head  # a retry writes nothing
    code, out, err = launch(scheduler_env, repo, following, argv, capsys)
    assert (code, out.strip()) == (0, "2026-W33-0"), err
    record = load_file(repo / episode_dir(episode) / "episode.yaml", "episode.yaml")["scheduler"]
    assert record["name"] == scheduler
    assert record["manual"] is False
    assert record["started_at"] == first.now.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert status(repo) == ""
    assert main(["verify", "--repo", str(repo), "--strict"]) == 0, capsys.readouterr()


MISSING = [
    ("github-actions", {"GITHUB_RUN_ATTEMPT": "2", "GITHUB_REPOSITORY": "acme/media"}, [], "GITHUB_RUN_ID"),
    ("kubernetes", {"HOSTNAME": "weekly-media-29762280-x7k2p", "KUBERNETES_SERVICE_HOST": "10.96.0.1"}, [], "pod name"),
    ("airflow", {"AIRFLOW_CTX_DAG_ID": "weekly_media", "AIRFLOW_CTX_TRY_NUMBER": "2"}, [], "AIRFLOW_CTX_DAG_RUN_ID"),
    ("dagster", {"DAGSTER_JOB_NAME": "weekly_media", "DAGSTER_RUN_ID": "a1d9"}, [], "DAGSTER_ROOT_RUN_ID"),
    ("temporal", {"TEMPORAL_RUN_ID": "0190f7a2"}, [], "TEMPORAL_WORKFLOW_ID"),
    ("systemd", {"INVOCATION_ID": "8d1c4e9f2b7a4c3e9f0a1b2c3d4e5f60"}, [], r"INVOCATION_ID changes"),
    ("cron", {}, ["--job-name", "weekly-media"], "--schedule"),
    ("kubernetes", {"JOB_NAME": "weekly-media-29762280"}, ["--podinfo", "nowhere"], "--podinfo"),
    (
        "github-actions",
        {"GITHUB_RUN_ID": "1", "GITHUB_REPOSITORY": "a/b"},
        ["--key", "k"],
        "not both|unrecognized arguments: --key",
    ),
    ("airflow", RECIPES["airflow"][0].env, ["--at", "yesterday"], "invalid time"),
    ("temporal", RECIPES["temporal"][0].env, ["--manual"], "--manual is for cron and systemd only"),
    ("airflow", RECIPES["airflow"][0].env, ["--schedule", "0 6 * * 1"], "--schedule means nothing to --from airflow"),
]


@pytest.mark.parametrize(("scheduler", "env", "extra", "needle"), MISSING)
def test_missing_or_unstable_identity_is_exit_2_and_nothing_written(  # noqa: PLR0917 - pytest passes these
    scheduler: str,
    env: dict[str, str],
    extra: list[str],
    needle: str,
    repo: Path,
    scheduler_env: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    head = git(repo, "rev-parse", "HEAD")
    before = tree_state(repo, skip=".jobstate")
    for command in ("allocate", "key"):
        code, out, err = launch(scheduler_env, repo, Run(env, MONDAY), [command, "--from", scheduler, *extra], capsys)
        assert code == 2, err
        assert re.search(needle, err), err
        assert out == ""
        assert len(err.strip().splitlines()) == 1
    assert git(repo, "rev-parse", "HEAD") == head
    assert tree_state(repo, skip=".jobstate") == before


SUNDAY_TICK = datetime(2026, 8, 9, 23, 0, tzinfo=UTC)  # 2026-W32
LATE = SUNDAY_TICK + timedelta(hours=1, minutes=30)  # Monday 00:30, 2026-W33
SUNDAY_CRON = ("--schedule", "0 23 * * 0")
LATE_RUNS = {
    "github-actions": (github("16123456789", "1", LATE), SUNDAY_CRON),
    "kubernetes": (kubernetes(f"weekly-media-{minutes(SUNDAY_TICK)}", "x7k2p", LATE), ()),
    "airflow": (airflow("scheduled__2026-08-09T23:00:00+00:00", "2026-08-09T23:00:00+00:00", "1", LATE), ()),
    "dagster": (dagster("r-1", "r-1", SUNDAY_TICK, LATE), ()),
    "temporal": (temporal(SUNDAY_TICK, "0190f7a2", "1", LATE), ()),
    "systemd": (systemd("8d1c4e9f2b7a4c3e9f0a1b2c3d4e5f60", LATE, LATE), ("--job-name", "weekly-media", *SUNDAY_CRON)),
    "cron": (cron(LATE), ("--job-name", "weekly-media", *SUNDAY_CRON)),
}


@pytest.mark.parametrize("scheduler", sorted(LATE_RUNS))
def test_every_scheduler_counts_a_late_start_in_the_scheduled_period_and_says_so(
    scheduler: str, repo: Path, scheduler_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run, options = LATE_RUNS[scheduler]
    code, out, err = launch(scheduler_env, repo, run, ["allocate", "--from", scheduler, *options], capsys)
    assert (code, out) == (0, "2026-W32-0\n"), err
    assert "in period 2026-W33; it counts in 2026-W32 (scheduled for 2026-08-09T23:00:00Z)" in err
    record = load_file(repo / episode_dir("2026-W32-0") / "episode.yaml", "episode.yaml")["scheduler"]
    assert (record["intended_at"], record["started_in_period"]) == ("2026-08-09T23:00:00Z", "2026-W33")


def test_late_start_across_a_period_boundary_is_counted_in_the_scheduled_period_and_reported(
    repo: Path, scheduler_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sunday_night = datetime(2026, 8, 9, 23, 59, tzinfo=UTC)
    run = kubernetes(f"weekly-media-{minutes(sunday_night)}", "x7k2p", sunday_night + timedelta(minutes=5))
    code, out, err = launch(scheduler_env, repo, run, ["allocate", "--from", "kubernetes"], capsys)
    assert (code, out) == (0, "2026-W32-0\n"), err
    assert "started 2026-08-10T00:04:00Z in period 2026-W33; it counts in 2026-W32" in err
    record = load_file(repo / episode_dir("2026-W32-0") / "episode.yaml", "episode.yaml")["scheduler"]
    assert record["started_in_period"] == "2026-W33"
    assert record["intended_at"] == "2026-08-09T23:59:00Z"
    assert record["attempt"] == f"weekly-media-{minutes(sunday_night)}-x7k2p"


def test_a_github_re_run_days_later_finds_its_episode_and_never_moves_it(
    repo: Path, scheduler_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["allocate", "--from", "github-actions"]
    code, out, err = launch(scheduler_env, repo, github("16123456789", "1", MONDAY), argv, capsys)
    assert (code, out) == (0, "2026-W32-0\n"), err
    rerun = github("16123456789", "2", NEXT_MONDAY + timedelta(days=2))
    code, out, err = launch(scheduler_env, repo, rerun, argv, capsys)
    assert (code, out) == (0, "2026-W32-0\n"), err
    assert "already has episode 2026-W32-0 in period 2026-W32" in err
    (repo / ".jobstate" / "catalog.sqlite").unlink()  # no lock-free answer: decided under the lock
    code, out, err = launch(
        scheduler_env, repo, github("16123456789", "3", NEXT_MONDAY + timedelta(days=3)), argv, capsys
    )
    assert (code, out) == (0, "2026-W32-0\n"), err
    head = git(repo, "rev-parse", "HEAD")
    code, out, err = launch(scheduler_env, repo, rerun, [*argv, "--date", "2026-08-12"], capsys)
    assert code == 4, err  # an explicit period that disagrees is a conflict, never a move
    assert "a key cannot move between periods" in err
    assert git(repo, "rev-parse", "HEAD") == head


def test_a_manual_run_never_takes_a_scheduled_slots_key(
    repo: Path, scheduler_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    scheduled = ["allocate", "--from", "cron", "--job-name", "w", "--schedule", "0 6 * * 1"]
    code, out, err = launch(scheduler_env, repo, Run({}, MONDAY), scheduled, capsys)
    assert (code, out) == (0, "2026-W32-0\n"), err
    code, out, err = launch(scheduler_env, repo, Run({}, MONDAY + timedelta(hours=1)), [*scheduled, "--manual"], capsys)
    assert (code, out) == (0, "2026-W32-1\n"), err
    record = load_file(repo / episode_dir("2026-W32-1") / "episode.yaml", "episode.yaml")["scheduler"]
    assert record["manual"] is True
    dispatch = github("16300000000", "1", MONDAY, event="workflow_dispatch")
    code, out, err = launch(scheduler_env, repo, dispatch, ["allocate", "--from", "github-actions", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["scheduler"]["manual"] is True


def test_key_prints_key_intended_time_and_period_and_writes_nothing(
    repo: Path, scheduler_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "jobstate.yaml").write_text("period: day\ntimezone: Pacific/Auckland\n")
    git(repo, "commit", "-qam", "nz days")
    before = tree_state(repo)
    run = RECIPES["kubernetes"][0]
    code, out, err = launch(scheduler_env, repo, run, ["key", "--from", "kubernetes"], capsys)
    assert code == 0, err
    assert out.splitlines() == [
        "key: kubernetes:media/weekly-media-29762280",
        "intended: 2026-08-03T06:00:00Z",
        "period: 2026-08-03 (from the intended time)",
    ]
    code, out, err = launch(scheduler_env, repo, run, ["key", "--from", "kubernetes", "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert (data["key"], data["period_id"], data["attempt"]) == (
        "kubernetes:media/weekly-media-29762280",
        "2026-08-03",
        "weekly-media-29762280-x7k2p",
    )
    again = launch(scheduler_env, repo, run, ["key", "--from", "kubernetes", "--json"], capsys)
    assert again == (0, out, err)  # the same inputs, the same answer
    assert tree_state(repo) == before


def test_key_works_without_a_repository(
    tmp_path: Path, scheduler_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    argv = ["key", "--from", "cron", "--job-name", "n", "--schedule", "30 2 * * *", "--tz", "Europe/Berlin", "--json"]
    code, out, err = launch(scheduler_env, plain, Run({}, datetime(2026, 3, 29, 1, 10, tzinfo=UTC)), argv, capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data["key"] == "cron:n:2026-03-29T01:00:00Z"  # 02:30 was skipped: cron ran at 03:00 CEST
    assert data["period_id"] == "2026-W13"
    assert list(plain.iterdir()) == []


@pytest.mark.parametrize(("tz", "said"), [("Mars/X", "unknown timezone 'Mars/X'"), ("", "--tz must not be empty")])
def test_a_bad_tz_is_exit_2_saying_so(
    tmp_path: Path, scheduler_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tz: str, said: str
) -> None:
    argv = ["key", "--from", "cron", "--job-name", "n", "--schedule", "30 2 * * *", "--tz", tz]
    code, out, err = launch(scheduler_env, tmp_path, Run({}, datetime(2026, 3, 29, 1, 10, tzinfo=UTC)), argv, capsys)
    assert (code, out) == (2, "")
    assert said in err


def test_an_unstable_key_gets_a_warning_and_is_still_allocated(
    repo: Path, scheduler_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = github("16123456789", "2", MONDAY)
    argv = ["allocate", "--key", "weekly-16123456789-2", "--date", "2026-08-03"]
    code, out, err = launch(scheduler_env, repo, run, argv, capsys)
    assert (code, out) == (0, "2026-W32-0\n"), err
    assert "warning: key 'weekly-16123456789-2' contains GITHUB_RUN_ATTEMPT (2)" in err
    code, out, err = launch(
        scheduler_env, repo, run, ["allocate", "--key", "weekly:2026-08-03", "--week", "2026-W32"], capsys
    )
    assert (code, err) == (0, ""), err


def test_allocate_without_key_or_from_says_what_is_missing(
    repo: Path, scheduler_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = launch(scheduler_env, repo, Run({}, MONDAY), ["allocate", "--date", "2026-08-03"], capsys)
    assert (code, out) == (2, "")
    assert "--key (or --from SCHEDULER)" in err
    argv = ["allocate", "--key", "k", "--date", "2026-08-03", "--schedule", "0 6 * * 1"]
    code, out, err = launch(scheduler_env, repo, Run({}, MONDAY), argv, capsys)
    assert (code, out) == (2, "")
    assert "--schedule works with --from SCHEDULER only" in err


def test_extra_fields_cannot_replace_jobstates_own(store: Store) -> None:
    with pytest.raises(UsageError, match="'status'"):
        allocate(store, "k", Period("iso-week", "2026-W32"), extra={"status": "done"})
    assert store.episodes() == []


def test_a_pod_and_its_retry_as_real_processes_get_one_episode(repo: Path, scheduler_env: pytest.MonkeyPatch) -> None:
    first, retry, _ = RECIPES["kubernetes"]
    answers = [run_cli("allocate", "--from", "kubernetes", cwd=repo, env=run.env) for run in (first, retry)]
    assert [(p.returncode, p.stdout) for p in answers] == [(0, "2026-W32-0\n")] * 2, answers[0].stderr
    proc = run_cli("allocate", "--from", "kubernetes", cwd=repo, env={"HOSTNAME": "weekly-media-29762280-zz9zz"})
    assert (proc.returncode, proc.stdout) == (2, "")
    assert "needs the Job's name" in proc.stderr
