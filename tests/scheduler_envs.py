"""Environments exactly as each scheduler (or the recipe for it in docs/allocation.md) sets them.

For every scheduler: a first attempt, a retry of it, and the next scheduled run,
with the moment each one starts. Names and formats follow the schedulers' docs:
GitHub Actions' default variables, the Kubernetes CronJob controller's Job names
(<cronjob>-<scheduled minutes since the epoch>) and the Job's pod labels, Airflow's
AIRFLOW_CTX_* variables, systemd's service environment; Dagster and Temporal hand
their context to Python only, so the recipes in docs/allocation.md export it under these names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

MONDAY = datetime(2026, 8, 3, 6, 0, tzinfo=UTC)  # 2026-W32
NEXT_MONDAY = MONDAY + timedelta(days=7)  # 2026-W33


@dataclass(frozen=True)
class Run:
    """One process start: the environment it sees and the moment it starts."""

    env: dict[str, str]
    now: datetime
    args: tuple[str, ...] = field(default=())


def minutes(moment: datetime) -> int:
    return int(moment.timestamp()) // 60


def github(run_id: str, attempt: str, now: datetime, event: str = "schedule") -> Run:
    return Run(
        {
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_REPOSITORY": "acme/media",
            "GITHUB_WORKFLOW": "weekly media",
            "GITHUB_EVENT_NAME": event,
            "GITHUB_RUN_ID": run_id,
            "GITHUB_RUN_NUMBER": "42",
            "GITHUB_RUN_ATTEMPT": attempt,
            "GITHUB_JOB": "episode",
        },
        now,
    )


def kubernetes(job: str, pod_suffix: str, now: datetime) -> Run:
    return Run(
        {
            "KUBERNETES_SERVICE_HOST": "10.96.0.1",
            "KUBERNETES_SERVICE_PORT": "443",
            "HOSTNAME": f"{job}-{pod_suffix}",
            "JOB_NAME": job,
            "POD_NAMESPACE": "media",
        },
        now,
    )


def airflow(run_id: str, logical: str, try_number: str, now: datetime) -> Run:
    return Run(
        {
            "AIRFLOW_CTX_DAG_OWNER": "media",
            "AIRFLOW_CTX_DAG_ID": "weekly_media",
            "AIRFLOW_CTX_TASK_ID": "allocate",
            "AIRFLOW_CTX_LOGICAL_DATE": logical,
            "AIRFLOW_CTX_TRY_NUMBER": try_number,
            "AIRFLOW_CTX_DAG_RUN_ID": run_id,
        },
        now,
    )


def dagster(run_id: str, root: str, scheduled: datetime | None, now: datetime) -> Run:
    env = {"DAGSTER_JOB_NAME": "weekly_media", "DAGSTER_RUN_ID": run_id, "DAGSTER_ROOT_RUN_ID": root}
    if scheduled is not None:
        when = scheduled.isoformat()
        env |= {"DAGSTER_SCHEDULE_NAME": "weekly_media_schedule", "DAGSTER_RUN_KEY": when}
        env["DAGSTER_SCHEDULED_EXECUTION_TIME"] = when
    return Run(env, now)


def temporal(scheduled: datetime, run_id: str, attempt: str, now: datetime) -> Run:
    stamp = scheduled.strftime("%Y-%m-%dT%H:%M:%SZ")
    return Run(
        {
            "TEMPORAL_NAMESPACE": "default",
            "TEMPORAL_WORKFLOW_ID": f"weekly-media-{stamp}",
            "TEMPORAL_RUN_ID": run_id,
            "TEMPORAL_ATTEMPT": attempt,
            "TEMPORAL_SCHEDULED_BY_ID": "weekly-media",
            "TEMPORAL_SCHEDULED_START_TIME": stamp,
        },
        now,
    )


def systemd(invocation: str, now: datetime, elapsed: datetime) -> Run:
    return Run(
        {
            "INVOCATION_ID": invocation,
            "JOURNAL_STREAM": "8:41551",
            "SYSTEMD_EXEC_PID": "4242",
            "TRIGGER_UNIT": "weekly-media.timer",
            "TRIGGER_TIMER_REALTIME_USEC": str(int(elapsed.timestamp() * 1_000_000)),
            "TRIGGER_TIMER_MONOTONIC_USEC": "91234567890",
        },
        now,
        ("--job-name", "weekly-media", "--schedule", "0 6 * * 1"),
    )


def cron(now: datetime) -> Run:
    return Run({"SHELL": "/bin/sh", "LOGNAME": "media"}, now, ("--job-name", "weekly-media", "--schedule", "0 6 * * 1"))


K8S_JOB = f"weekly-media-{minutes(MONDAY)}"
K8S_NEXT = f"weekly-media-{minutes(NEXT_MONDAY)}"

# scheduler -> (first attempt, its retry, the next scheduled run)
RECIPES: dict[str, tuple[Run, Run, Run]] = {
    "github-actions": (
        github("16123456789", "1", MONDAY + timedelta(hours=3)),
        github("16123456789", "2", MONDAY + timedelta(hours=5)),
        github("16198765432", "1", NEXT_MONDAY + timedelta(hours=2)),
    ),
    "kubernetes": (
        kubernetes(K8S_JOB, "x7k2p", MONDAY + timedelta(seconds=9)),
        kubernetes(K8S_JOB, "q9d4m", MONDAY + timedelta(minutes=12)),
        kubernetes(K8S_NEXT, "b2c8w", NEXT_MONDAY + timedelta(seconds=7)),
    ),
    "airflow": (
        airflow("scheduled__2026-08-03T06:00:00+00:00", "2026-08-03T06:00:00+00:00", "1", MONDAY),
        airflow("scheduled__2026-08-03T06:00:00+00:00", "2026-08-03T06:00:00+00:00", "2", MONDAY + timedelta(hours=1)),
        airflow("scheduled__2026-08-10T06:00:00+00:00", "2026-08-10T06:00:00+00:00", "1", NEXT_MONDAY),
    ),
    "dagster": (
        dagster("6b2f0c1e-0d6a-4c3e-9a51-0e8f3b1c7d21", "6b2f0c1e-0d6a-4c3e-9a51-0e8f3b1c7d21", MONDAY, MONDAY),
        dagster(
            "a1d9e7c3-55f0-4b8e-8f0d-2c6b9e4a1f37",
            "6b2f0c1e-0d6a-4c3e-9a51-0e8f3b1c7d21",
            MONDAY,
            MONDAY + timedelta(hours=2),
        ),
        dagster(
            "0f4c2b9a-3e71-4d25-b6a8-9c1d7e5f3a40", "0f4c2b9a-3e71-4d25-b6a8-9c1d7e5f3a40", NEXT_MONDAY, NEXT_MONDAY
        ),
    ),
    "temporal": (
        temporal(MONDAY, "0190f7a2-6c1b-7e3d-9a4f-5b8c2d1e0f93", "1", MONDAY),
        temporal(MONDAY, "0190f7a2-6c1b-7e3d-9a4f-5b8c2d1e0f93", "2", MONDAY + timedelta(minutes=3)),
        temporal(NEXT_MONDAY, "0191a3c4-2b5d-7f6e-8a9b-0c1d2e3f4a5b", "1", NEXT_MONDAY),
    ),
    "systemd": (
        systemd("8d1c4e9f2b7a4c3e9f0a1b2c3d4e5f60", MONDAY + timedelta(seconds=20), MONDAY + timedelta(seconds=19)),
        # Restart=on-failure: a new INVOCATION_ID, twenty minutes later, same slot
        systemd("1f2e3d4c5b6a79880f1e2d3c4b5a6978", MONDAY + timedelta(minutes=20), MONDAY + timedelta(seconds=19)),
        systemd("77aa88bb99cc00dd11ee22ff33445566", NEXT_MONDAY + timedelta(seconds=31), NEXT_MONDAY),
    ),
    "cron": (
        cron(MONDAY + timedelta(seconds=1)),
        cron(MONDAY + timedelta(minutes=40)),
        cron(NEXT_MONDAY + timedelta(seconds=1)),
    ),
}
