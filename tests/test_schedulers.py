"""schedulers.derive and cron slots: pure functions of the environment, the options and the clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobstate.allocation.cron import latest_fire
from jobstate.allocation.schedulers import Derivation, derive
from jobstate.allocation.unstable_keys import unstable_key_warning
from jobstate.core.keys import SCHEDULERS
from jobstate.core.periods import Period
from jobstate.errors import UsageError

from .scheduler_envs import K8S_JOB, MONDAY, RECIPES, Run, minutes


def _derive(scheduler: str, run: Run, **options: Any) -> Derivation:
    args = dict(zip(run.args[::2], run.args[1::2], strict=True))
    return derive(
        scheduler,
        run.env,
        now=run.now,
        job_name=args.get("--job-name"),
        schedule=args.get("--schedule"),
        **options,
    )


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_a_retry_gets_the_first_attempts_key_and_the_next_run_a_new_one(scheduler: str) -> None:
    first, retry, following = (_derive(scheduler, run) for run in RECIPES[scheduler])
    assert retry.key == first.key
    assert following.key != first.key
    assert first.attempt != retry.attempt or scheduler == "cron"
    assert first.manual is False


@pytest.mark.parametrize("scheduler", [s for s in SCHEDULERS if s != "github-actions"])
def test_the_period_is_the_scheduled_one_for_every_scheduler_that_says_it(scheduler: str) -> None:
    first = _derive(scheduler, RECIPES[scheduler][0])
    assert first.intended == MONDAY
    assert first.period == Period("iso-week", "2026-W32")
    assert first.period_source == "intended"
    assert first.record()["intended_at"] == "2026-08-03T06:00:00Z"


def test_github_gives_no_intended_time_so_the_period_is_the_starts_and_kept_for_an_existing_key() -> None:
    first = _derive("github-actions", RECIPES["github-actions"][0])
    assert first.intended is None
    assert first.period_source == "start"
    assert first.keep_period is True
    assert first.late_across_periods is False
    assert first.key == "github-actions:acme/media:run:16123456789"
    at = _derive("github-actions", RECIPES["github-actions"][0], at=MONDAY - timedelta(days=7))
    assert (at.period.id, at.period_source, at.keep_period) == ("2026-W31", "option", False)


def test_github_schedule_guesses_the_tick_for_a_late_scheduled_run_but_an_existing_key_wins() -> None:
    late = RECIPES["github-actions"][0]
    sunday_tick = datetime(2026, 8, 9, 23, 0, tzinfo=UTC)
    found = derive("github-actions", late.env, now=sunday_tick + timedelta(hours=4), schedule="0 23 * * 0")
    assert (found.intended, found.period.id, found.started_period.id) == (sunday_tick, "2026-W32", "2026-W33")
    assert (found.keep_period, found.late_across_periods) == (True, True)
    dispatched = dict(late.env, GITHUB_EVENT_NAME="workflow_dispatch")
    by_hand = derive("github-actions", dispatched, now=sunday_tick + timedelta(hours=4), schedule="0 23 * * 0")
    assert (by_hand.intended, by_hand.manual) == (None, True)


def test_kubernetes_reads_the_job_name_minutes_as_the_scheduled_time() -> None:
    late = MONDAY + timedelta(days=6, hours=23)
    found = derive("kubernetes", {"JOB_NAME": K8S_JOB}, now=late)
    assert found.intended == MONDAY
    assert found.details["cronjob"] == "weekly-media"
    assert found.key == f"kubernetes:{K8S_JOB}"


def test_kubernetes_reads_the_downward_api_labels_file() -> None:
    labels = f'app="media"\nbatch.kubernetes.io/job-name="{K8S_JOB}"\njob-name="{K8S_JOB}"\ncontroller-uid="1a2b"\n'
    found = derive("kubernetes", {}, now=MONDAY, files={"labels": labels, "namespace": "media"})
    assert found.key == f"kubernetes:media/{K8S_JOB}"


def test_a_manual_kubernetes_job_never_takes_a_slots_key() -> None:
    found = derive("kubernetes", {"JOB_NAME": "weekly-media-manual-7fq2x"}, now=MONDAY)
    assert found.manual is True
    assert found.intended is None
    assert found.key == "kubernetes:weekly-media-manual-7fq2x"


def test_airflow_manual_runs_are_recorded_as_manual_and_keyed_by_their_own_run_id() -> None:
    env = dict(RECIPES["airflow"][0].env, AIRFLOW_CTX_DAG_RUN_ID="manual__2026-08-03T06:00:00+00:00")
    found = derive("airflow", env, now=MONDAY)
    assert found.manual is True
    assert found.key != _derive("airflow", RECIPES["airflow"][0]).key


def test_airflow_2_execution_date_is_read_when_there_is_no_logical_date() -> None:
    env = dict(RECIPES["airflow"][0].env)
    env["AIRFLOW_CTX_EXECUTION_DATE"] = env.pop("AIRFLOW_CTX_LOGICAL_DATE")
    assert derive("airflow", env, now=MONDAY).intended == MONDAY


@pytest.mark.parametrize("scheduler", ["airflow", "dagster", "temporal"])
@pytest.mark.parametrize(
    ("moment", "why"),
    [("2030-01-01T00:00:00+00:00", "more than a day after now"), ("1990-01-01T00:00:00+00:00", "before 2000")],
)
def test_a_schedulers_time_long_ago_or_ahead_is_no_slot_the_run_counts_as_manual(
    scheduler: str, moment: str, why: str
) -> None:
    """As a Kubernetes Job name's minutes are judged: every scheduler's time, by the one rule (``implausible``)."""
    variable = {
        "airflow": "AIRFLOW_CTX_LOGICAL_DATE",
        "dagster": "DAGSTER_SCHEDULED_EXECUTION_TIME",
        "temporal": "TEMPORAL_SCHEDULED_START_TIME",
    }[scheduler]
    run = RECIPES[scheduler][0]
    found = derive(scheduler, {**run.env, variable: moment}, now=run.now)
    assert (found.manual, found.intended, found.period_source) == (True, None, "start")
    assert found.period == found.started_period
    assert [w for w in found.warnings if why in w and "counts as manual" in w]


def test_dagster_without_a_schedule_is_manual_with_its_own_key() -> None:
    env = {"DAGSTER_JOB_NAME": "weekly_media", "DAGSTER_RUN_ID": "r1", "DAGSTER_ROOT_RUN_ID": "r1"}
    found = derive("dagster", env, now=MONDAY)
    assert (found.manual, found.key) == (True, "dagster:weekly_media:r1")


def test_dagster_re_execution_keeps_the_key_even_without_the_schedules_tags() -> None:
    first = _derive("dagster", RECIPES["dagster"][0])
    env = {k: v for k, v in RECIPES["dagster"][1].env.items() if k not in ("DAGSTER_RUN_KEY", "DAGSTER_SCHEDULE_NAME")}
    assert derive("dagster", env, now=MONDAY).key == first.key


def test_temporal_reads_the_time_from_the_schedules_workflow_id() -> None:
    env = {"TEMPORAL_WORKFLOW_ID": "weekly-media-2026-08-03T06:00:00Z", "TEMPORAL_RUN_ID": "r"}
    found = derive("temporal", env, now=MONDAY + timedelta(hours=1))
    assert (found.intended, found.manual) == (MONDAY, False)
    manual = derive("temporal", {"TEMPORAL_WORKFLOW_ID": "media-by-hand"}, now=MONDAY)
    assert (manual.intended, manual.manual) == (None, True)


def test_a_manual_cron_or_systemd_run_gets_a_key_of_its_own() -> None:
    scheduled = derive("cron", {}, now=MONDAY, job_name="w", schedule="0 6 * * 1")
    by_hand = derive("cron", {}, now=MONDAY, job_name="w", schedule="0 6 * * 1", manual=True)
    assert by_hand.key != scheduled.key
    assert by_hand.manual is True
    by_hand = _derive("systemd", RECIPES["systemd"][0], manual=True)
    assert by_hand.manual is True
    assert by_hand.key != _derive("systemd", RECIPES["systemd"][0]).key


def test_a_systemd_restart_without_the_trigger_variables_keeps_the_slots_key() -> None:
    first = _derive("systemd", RECIPES["systemd"][0])
    retry = RECIPES["systemd"][1]
    env = {k: v for k, v in retry.env.items() if not k.startswith("TRIGGER_")}
    assert _derive("systemd", Run(env, retry.now, retry.args)).key == first.key


MISSING = [
    ("github-actions", {"GITHUB_RUN_ATTEMPT": "2"}, (), "GITHUB_RUN_ID"),
    ("github-actions", {"GITHUB_RUN_ID": "1"}, (), "GITHUB_REPOSITORY"),
    ("kubernetes", {"HOSTNAME": "weekly-1-x7k2p", "KUBERNETES_SERVICE_HOST": "10.0.0.1"}, (), "pod name"),
    ("kubernetes", {"JOB_NAME": "weekly-x7k2p", "HOSTNAME": "weekly-x7k2p"}, (), "equals the pod name"),
    ("airflow", {"AIRFLOW_CTX_TRY_NUMBER": "2"}, (), "AIRFLOW_CTX_DAG_RUN_ID"),
    ("dagster", {"DAGSTER_RUN_ID": "r2", "DAGSTER_JOB_NAME": "j"}, (), "DAGSTER_ROOT_RUN_ID"),
    ("temporal", {"TEMPORAL_RUN_ID": "r2"}, (), "TEMPORAL_WORKFLOW_ID"),
    ("systemd", {"INVOCATION_ID": "8d1c4e9f2b7a4c3e"}, (), "--schedule"),
    ("cron", {}, (), "--schedule"),
    ("cron", {}, ("--schedule", "0 6 * * 1"), "--job-name"),
    ("cron", {}, ("--schedule", "0 6 * *", "--job-name", "w"), "five fields"),
    ("cron", {}, ("--schedule", "0 25 * * *", "--job-name", "w"), "invalid cron schedule"),
]


@pytest.mark.parametrize(("scheduler", "env", "args", "needle"), MISSING)
def test_missing_or_retry_varying_identity_is_refused_saying_what_to_provide(
    scheduler: str, env: dict[str, str], args: tuple[str, ...], needle: str
) -> None:
    with pytest.raises(UsageError, match=needle) as caught:
        _derive(scheduler, Run(env, MONDAY, args))
    assert caught.value.exit_code == 2


def test_late_start_across_a_period_boundary_counts_in_the_intended_period() -> None:
    sunday_night = datetime(2026, 8, 9, 23, 59, tzinfo=UTC)  # 2026-W32
    found = derive("kubernetes", {"JOB_NAME": f"weekly-{minutes(sunday_night)}"}, now=sunday_night + timedelta(hours=1))
    assert (found.period.id, found.started_period.id) == ("2026-W32", "2026-W33")
    assert found.late_across_periods is True
    assert found.record()["started_in_period"] == "2026-W33"


def test_periods_map_in_the_repository_timezone() -> None:
    # 22:30 UTC on Sunday is Monday in Auckland: the next ISO week there
    sunday = datetime(2026, 8, 9, 22, 30, tzinfo=UTC)
    env = {"JOB_NAME": f"weekly-{minutes(sunday)}"}
    assert derive("kubernetes", env, now=sunday, tz="UTC").period.id == "2026-W32"
    assert derive("kubernetes", env, now=sunday, tz="Pacific/Auckland").period.id == "2026-W33"


def test_a_period_option_overrides_the_intended_one() -> None:
    found = _derive("airflow", RECIPES["airflow"][0], period=Period("iso-week", "2026-W40"))
    assert (found.period.id, found.period_source) == ("2026-W40", "option")


BERLIN = "Europe/Berlin"


def test_cron_skipped_hour_fires_after_the_gap_and_its_retry_keeps_the_slot() -> None:
    # 2026-03-29: 02:00 CET jumps to 03:00 CEST; cron's 02:30 job runs at 03:00 local (01:00 UTC)
    slot = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    assert latest_fire("30 2 * * *", BERLIN, slot + timedelta(minutes=10)) == slot
    assert latest_fire("30 2 * * *", BERLIN, slot + timedelta(hours=20)) == slot
    assert latest_fire("30 2 * * *", BERLIN, slot - timedelta(seconds=1)) == datetime(2026, 3, 28, 1, 30, tzinfo=UTC)
    first = derive("cron", {}, now=slot + timedelta(seconds=2), job_name="n", schedule="30 2 * * *", tz=BERLIN)
    retry = derive("cron", {}, now=slot + timedelta(hours=3), job_name="n", schedule="30 2 * * *", tz=BERLIN)
    assert first.key == retry.key == "cron:n:2026-03-29T01:00:00Z"


def test_cron_repeated_hour_fires_once_for_a_fixed_time_and_twice_for_an_hourly_job() -> None:
    # 2026-10-25: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice
    first_0230 = datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # 02:30 CEST
    second_0230 = datetime(2026, 10, 25, 1, 30, tzinfo=UTC)  # 02:30 CET
    assert latest_fire("30 2 * * *", BERLIN, second_0230 + timedelta(minutes=5)) == first_0230
    assert latest_fire("30 * * * *", BERLIN, second_0230 + timedelta(minutes=5)) == second_0230
    assert latest_fire("30 * * * *", BERLIN, second_0230 - timedelta(minutes=5)) == first_0230


def test_cron_at_is_the_reference_and_a_fire_time_itself_belongs_to_its_own_slot() -> None:
    found = derive("cron", {}, now=MONDAY + timedelta(days=30), job_name="w", schedule="0 6 * * 1", at=MONDAY)
    assert found.intended == MONDAY
    assert found.late_across_periods is True


def test_unstable_key_warnings() -> None:
    now = MONDAY + timedelta(seconds=17)
    gh = {"GITHUB_RUN_ID": "16123456789", "GITHUB_RUN_ATTEMPT": "2"}
    assert unstable_key_warning("weekly-16123456789-2", gh, now) is not None
    assert unstable_key_warning("weekly-16123456789", gh, now) is None
    systemd_env = {"INVOCATION_ID": "8d1c4e9f2b7a4c3e9f0a1b2c3d4e5f60"}
    assert unstable_key_warning("run-8d1c4e9f2b7a4c3e9f0a1b2c3d4e5f60", systemd_env, now) is not None
    pod = {"HOSTNAME": "weekly-29762280-x7k2p", "KUBERNETES_SERVICE_HOST": "10.96.0.1"}
    assert unstable_key_warning("weekly-29762280-x7k2p", pod, now) is not None
    assert unstable_key_warning("weekly-29762280-x7k2p", {"HOSTNAME": "weekly-29762280-x7k2p"}, now) is None
    assert unstable_key_warning("2026-08-03T06:00:17Z", {}, now) is not None
    assert unstable_key_warning(str(int(now.timestamp())), {}, now) is not None
    assert unstable_key_warning("2026-08-03T06:00:00Z", {}, now) is None  # a slot, not a start time
    assert unstable_key_warning("2026-08-03", {}, now) is None
    assert unstable_key_warning("scheduled-run:2026-08-03", {}, now) is None


names = st.from_regex(r"[a-z][a-z0-9-]{0,18}[a-z0-9]", fullmatch=True)
moments = st.datetimes(min_value=datetime(2001, 1, 1), max_value=datetime(2199, 1, 1), timezones=st.just(UTC)).map(
    lambda d: d.replace(microsecond=0)
)


@given(
    scheduler=st.sampled_from(SCHEDULERS),
    run_id=st.integers(1, 10**12),
    attempt=st.integers(1, 99),
    name=names,
    now=moments,
    tz=st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Pacific/Auckland"]),
    kind=st.sampled_from(["iso-week", "day", "month"]),
)
def test_derive_is_a_pure_function_of_its_inputs_and_retry_identities_never_change_the_key(  # noqa: PLR0917
    scheduler: str, run_id: int, attempt: int, name: str, now: datetime, tz: str, kind: str
) -> None:
    def env(n: int) -> dict[str, str]:
        return {
            "GITHUB_RUN_ID": str(run_id),
            "GITHUB_REPOSITORY": f"o/{name}",
            "GITHUB_RUN_ATTEMPT": str(n),
            "JOB_NAME": f"{name}-{minutes(now)}",
            "HOSTNAME": f"{name}-{minutes(now)}-pod{n}",
            "AIRFLOW_CTX_DAG_ID": name,
            "AIRFLOW_CTX_DAG_RUN_ID": f"scheduled__{now.isoformat()}",
            "AIRFLOW_CTX_LOGICAL_DATE": now.isoformat(),
            "AIRFLOW_CTX_TRY_NUMBER": str(n),
            "DAGSTER_JOB_NAME": name,
            "DAGSTER_ROOT_RUN_ID": str(run_id),
            "DAGSTER_RUN_ID": f"{run_id}-{n}",
            "DAGSTER_SCHEDULE_NAME": "s",
            "TEMPORAL_WORKFLOW_ID": name,
            "TEMPORAL_RUN_ID": f"run-{n}",
            "TRIGGER_UNIT": f"{name}.timer",
            "INVOCATION_ID": f"{n:032x}",
        }

    options: dict[str, Any] = {"now": now, "tz": tz, "kind": kind}
    if scheduler in ("cron", "systemd"):
        options |= {"job_name": name, "schedule": "*/15 * * * *"}
    first_env = env(attempt)
    snapshot = dict(first_env)
    one = derive(scheduler, first_env, **options)
    two = derive(scheduler, dict(first_env), **options)
    assert one == two
    assert first_env == snapshot  # the environment is read, never changed
    retry = derive(scheduler, env(attempt + 1), **options)
    assert retry.key == one.key
    assert retry.period == one.period


def test_an_unknown_timezone_of_a_cron_schedule_is_said_as_such() -> None:
    with pytest.raises(UsageError, match="unknown timezone 'Mars/X'"):
        latest_fire("0 6 * * 1", "Mars/X", MONDAY)


def test_an_explicit_at_far_ahead_keeps_its_slot_for_key_and_period_alike() -> None:
    """--at names the slot of cron and systemd (it is the key): it is never judged as a scheduler's time."""
    now = datetime(2026, 8, 7, 10, tzinfo=UTC)
    at = datetime(2026, 8, 20, 6, tzinfo=UTC)
    found = derive("cron", {}, now=now, job_name="weekly", schedule="0 6 * * 1", at=at)
    later = derive("cron", {}, now=datetime(2026, 8, 17, 6, 5, tzinfo=UTC), job_name="weekly", schedule="0 6 * * 1")
    assert (found.key, found.period.id, found.manual) == ("cron:weekly:2026-08-17T06:00:00Z", "2026-W34", False)
    assert (later.key, later.period.id) == (found.key, found.period.id)
