"""Allocation keys from a scheduler's own identity for a run. Pure: values in, values out.

Each scheduler keeps something stable across retries (GitHub's run ID, a Kubernetes
Job name, Airflow's run_id, ...) and something that changes on every retry (the run
attempt, the pod name, the try number, ...). ``derive`` builds the key from the
first only, and refuses (UsageError, exit 2) when only the second is there. The
period comes from the time the run was scheduled for, when the scheduler says it.
The environment, the Downward API files and the clock are passed in.

Longer than most modules on purpose: one small reader per scheduler (seven), side by side so
that their keys, refusals and intended times can be compared.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from jobstate.allocation.cron import latest_fire, zone
from jobstate.core.clock import format_time
from jobstate.core.keys import SCHEDULERS, canonical_key
from jobstate.core.periods import Period, period_of
from jobstate.errors import UsageError

# a scheduler's time before this, or more than a day after now, is not a schedule (kubectl create job backfill-20260807)
_EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
_AHEAD = timedelta(days=1)
# no CronJob ran before Kubernetes 1.0: this also keeps a date suffix (-20260807, minutes of 2008) from being a time
_K8S_EARLIEST = datetime(2015, 7, 21, tzinfo=UTC)
_ENV_TIMES = frozenset({"airflow", "dagster", "temporal"})  # their intended time is an environment variable
_DNS_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
_K8S_SCHEDULED = re.compile(r"(?P<cronjob>.+)-(?P<minutes>\d{1,10})")
_TEMPORAL_SUFFIX = re.compile(r"-(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}))$")
_LABEL_LINE = re.compile(r'([^=\s]+)="(.*)"')


@dataclass(frozen=True)
class Derivation:
    """What a scheduler said about one run, and the key and period jobstate makes of it."""

    scheduler: str
    key: str
    run_id: str
    attempt: str | None
    manual: bool
    intended: datetime | None
    started: datetime
    period: Period
    # "intended" (the scheduler's time), "option" (--at/--date/...), "schedule" (GitHub's cron: a guess),
    # "start" (no time given)
    period_source: str
    started_period: Period
    details: dict[str, str] = field(default_factory=dict)
    # why a time the scheduler seemed to give was not taken (said on stderr, and in key --json)
    warnings: tuple[str, ...] = ()

    @property
    def late_across_periods(self) -> bool:
        """The run started in another period than the one it counts in."""
        return self.period_source in ("intended", "schedule", "option") and self.started_period != self.period

    @property
    def keep_period(self) -> bool:
        """The period is a guess (no time was given): an existing episode of the key keeps its own."""
        return self.period_source in ("start", "schedule")

    def record(self) -> dict[str, Any]:
        """The ``scheduler:`` mapping of episode.yaml."""
        out: dict[str, Any] = {"name": self.scheduler, "run_id": self.run_id}
        if self.attempt is not None:
            out["attempt"] = self.attempt
        out["manual"] = self.manual
        out["intended_at"] = format_time(self.intended) if self.intended is not None else None
        out["started_at"] = format_time(self.started)
        out["period_from"] = self.period_source
        if self.late_across_periods:
            out["started_in_period"] = self.started_period.id
        out.update(self.details)
        return out

    def to_json(self) -> dict[str, Any]:
        """The ``jobstate key --json`` object."""
        return {
            "scheduler": self.scheduler,
            "key": self.key,
            "intended_at": format_time(self.intended) if self.intended is not None else None,
            "started_at": format_time(self.started),
            "period_id": self.period.id,
            "period_from": self.period_source,
            "started_in_period": self.started_period.id,
            "manual": self.manual,
            "run_id": self.run_id,
            "attempt": self.attempt,
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class _Identity:
    key: str
    run_id: str
    attempt: str | None
    manual: bool
    intended: datetime | None
    details: dict[str, str]
    warnings: tuple[str, ...] = ()


def implausible(moment: datetime, now: datetime, earliest: datetime = _EARLIEST) -> str | None:
    """Why a time a scheduler's name or variable seems to give cannot be an intended time (None: it can)."""
    if moment < earliest:
        return f"{format_time(moment)}, before {format_time(earliest)}"
    if moment > now + _AHEAD:
        return f"{format_time(moment)}, more than a day after now ({format_time(now)})"
    return None


@dataclass(frozen=True)
class _Inputs:
    env: Mapping[str, str]
    now: datetime
    job_name: str | None
    schedule: str | None
    schedule_tz: str
    at: datetime | None
    files: Mapping[str, str]
    manual: bool


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    return value.strip() if isinstance(value, str) and value.strip() else None


def _changing(value: str | None, name: str, when: str) -> str:
    """What a refusal adds when only the identity that changes on every retry is there."""
    return f" ({name} is set, but it changes on every {when})" if value else ""


def _time(text: str, what: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)  # Python 3.11 reads a trailing Z itself
    except ValueError:
        raise UsageError(f"{what} {text!r} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        raise UsageError(f"{what} {text!r} has no timezone offset: jobstate cannot tell which moment it means")
    return moment.astimezone(UTC)


def _github(i: _Inputs) -> _Identity:
    run_id, repo = _get(i.env, "GITHUB_RUN_ID"), _get(i.env, "GITHUB_REPOSITORY")
    attempt = _get(i.env, "GITHUB_RUN_ATTEMPT")
    if run_id is None:
        seen = _changing(attempt, "GITHUB_RUN_ATTEMPT", "re-run")
        raise UsageError(
            f"--from github-actions needs GITHUB_RUN_ID, which a re-run keeps{seen}: "
            "run jobstate inside a GitHub Actions step, or pass --key"
        )
    if not run_id.isdigit():
        raise UsageError(f"GITHUB_RUN_ID {run_id!r} is not a GitHub run ID (digits)")
    if repo is None:
        raise UsageError("--from github-actions needs GITHUB_REPOSITORY (owner/name), which GitHub Actions sets")
    event = _get(i.env, "GITHUB_EVENT_NAME") or ""
    key = f"github-actions:{repo}:run:{run_id}" + (f":{i.job_name}" if i.job_name else "")
    details = {"repository": repo, "event": event}
    if workflow := _get(i.env, "GITHUB_WORKFLOW"):
        details["workflow"] = workflow
    intended = None
    if i.schedule is not None and event == "schedule":
        # GitHub hands over no scheduled time and a tick may be hours late: the latest fire
        # time of the workflow's own cron (always UTC) is a guess, which an existing key overrides
        intended = latest_fire(i.schedule, "UTC", i.at or i.now)
        details["schedule"] = i.schedule
    return _Identity(key, run_id, attempt, event == "workflow_dispatch", intended, details)


def _labels(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _LABEL_LINE.fullmatch(line.strip())
        if m:
            out[m[1]] = m[2].replace('\\"', '"').replace("\\\\", "\\")
    return out


def _kubernetes(i: _Inputs) -> _Identity:
    labels = _labels(i.files.get("labels", ""))
    name = i.job_name or _get(i.env, "JOB_NAME") or labels.get("batch.kubernetes.io/job-name") or labels.get("job-name")
    pod = _get(i.env, "HOSTNAME")
    if name is None:
        in_pod = pod is not None and _get(i.env, "KUBERNETES_SERVICE_HOST") is not None
        seen = f" (the pod name {pod!r} changes on every retry)" if in_pod else ""
        raise UsageError(
            f"--from kubernetes needs the Job's name{seen}: expose it through the Downward API as env JOB_NAME "
            "(fieldRef metadata.labels['batch.kubernetes.io/job-name']), or a labels file with --podinfo DIR, "
            "or pass --job-name"
        )
    if not _DNS_NAME.fullmatch(name) or len(name) > 253:
        raise UsageError(f"Kubernetes Job name {name!r} is not a valid object name")
    if pod is not None and name == pod:
        raise UsageError(
            f"the Job name {name!r} equals the pod name, which changes on every retry: expose "
            "metadata.labels['batch.kubernetes.io/job-name'], not metadata.name"
        )
    namespace = _get(i.env, "POD_NAMESPACE") or i.files.get("namespace", "").strip() or None
    details: dict[str, str] = {"job": name}
    if namespace:
        details["namespace"] = namespace
    intended: datetime | None = None
    warnings: tuple[str, ...] = ()
    m = _K8S_SCHEDULED.fullmatch(name)
    if m:
        # the CronJob controller names each Job <cronjob>-<scheduled time in minutes since the epoch>
        moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(minutes=int(m["minutes"]))
        why = implausible(moment, i.now, _K8S_EARLIEST)
        if why is None:
            intended = moment
            details["cronjob"] = m["cronjob"]
        else:
            warnings = (
                f"the Job name {name!r} ends in a number, but read as a CronJob's minutes since 1970 it gives "
                f"{why}: not a scheduled run, so it counts as manual (period from the start time)",
            )
    key = f"kubernetes:{namespace + '/' if namespace else ''}{name}"
    # a kubectl create job --from=cronjob/... Job has a name of its own: it never takes a slot's key
    return _Identity(key, name, pod, intended is None, intended, details, warnings)


def _airflow(i: _Inputs) -> _Identity:
    dag, run_id = _get(i.env, "AIRFLOW_CTX_DAG_ID"), _get(i.env, "AIRFLOW_CTX_DAG_RUN_ID")
    tries = _get(i.env, "AIRFLOW_CTX_TRY_NUMBER")
    if dag is None or run_id is None:
        seen = _changing(tries, "AIRFLOW_CTX_TRY_NUMBER", "try")
        raise UsageError(
            f"--from airflow needs AIRFLOW_CTX_DAG_ID and AIRFLOW_CTX_DAG_RUN_ID, which retries and clears keep{seen}: "
            "run jobstate from an Airflow task, or pass --key"
        )
    logical = _get(i.env, "AIRFLOW_CTX_LOGICAL_DATE") or _get(i.env, "AIRFLOW_CTX_EXECUTION_DATE")
    intended = _time(logical, "AIRFLOW_CTX_LOGICAL_DATE") if logical else None
    details = {"dag_id": dag}
    if task := _get(i.env, "AIRFLOW_CTX_TASK_ID"):
        details["task_id"] = task
    return _Identity(f"airflow:{dag}:{run_id}", run_id, tries, run_id.startswith("manual__"), intended, details)


def _dagster(i: _Inputs) -> _Identity:
    job, root = _get(i.env, "DAGSTER_JOB_NAME"), _get(i.env, "DAGSTER_ROOT_RUN_ID")
    run = _get(i.env, "DAGSTER_RUN_ID")
    if job is None or root is None:
        seen = _changing(run, "DAGSTER_RUN_ID", "re-execution")
        raise UsageError(
            f"--from dagster needs DAGSTER_JOB_NAME and DAGSTER_ROOT_RUN_ID{seen}: pass "
            "context.job_name and context.run.root_run_id or context.run_id "
            "(see the Dagster recipe, docs/allocation.md)"
        )
    schedule = _get(i.env, "DAGSTER_SCHEDULE_NAME")
    details = {"job": job, "root_run_id": root}
    for var, name in (("DAGSTER_RUN_KEY", "run_key"), ("DAGSTER_PARTITION_KEY", "partition"), (None, "schedule")):
        value = schedule if var is None else _get(i.env, var)
        if value:
            details[name] = value
    # the root run ID survives every re-execution; tags such as the run key need not
    key = f"dagster:{job}:{root}"
    when = _get(i.env, "DAGSTER_SCHEDULED_EXECUTION_TIME")
    intended = _time(when, "DAGSTER_SCHEDULED_EXECUTION_TIME") if when else None
    return _Identity(key, root, run, schedule is None, intended, details)


def _temporal(i: _Inputs) -> _Identity:
    workflow, run = _get(i.env, "TEMPORAL_WORKFLOW_ID"), _get(i.env, "TEMPORAL_RUN_ID")
    if workflow is None:
        seen = _changing(run, "TEMPORAL_RUN_ID", "retry")
        raise UsageError(
            f"--from temporal needs TEMPORAL_WORKFLOW_ID, which retries keep{seen}: "
            "pass activity.info().workflow_id (see the Temporal recipe in docs/allocation.md)"
        )
    when = _get(i.env, "TEMPORAL_SCHEDULED_START_TIME")
    suffix = _TEMPORAL_SUFFIX.search(workflow)
    intended = _time(when, "TEMPORAL_SCHEDULED_START_TIME") if when else None
    if intended is None and suffix:
        # a Schedule names each workflow <schedule's workflow ID>-<RFC 3339 scheduled time>
        intended = _time(suffix[1], "the time in TEMPORAL_WORKFLOW_ID")
    scheduled_by = _get(i.env, "TEMPORAL_SCHEDULED_BY_ID")
    namespace = _get(i.env, "TEMPORAL_NAMESPACE")
    details = {"workflow_id": workflow}
    if scheduled_by:
        details["scheduled_by"] = scheduled_by
    key = f"temporal:{namespace + '/' if namespace else ''}{workflow}"
    attempt = _get(i.env, "TEMPORAL_ATTEMPT")
    label = f"{run} attempt {attempt}" if run and attempt else run or attempt
    return _Identity(key, workflow, label, scheduled_by is None and suffix is None, intended, details)


def _slot(i: _Inputs, scheduler: str, name: str | None, *, manual: bool) -> _Identity:
    if i.schedule is None:
        varying = " (INVOCATION_ID changes on every start)" if _get(i.env, "INVOCATION_ID") else ""
        raise UsageError(
            f"--from {scheduler} needs --schedule 'CRON EXPR', the schedule the job runs on{varying}: "
            "the slot it gives is what stays the same across a late start and its retries"
        )
    if name is None:
        raise UsageError(f"--from {scheduler} needs --job-name NAME, so that two jobs never share a slot's key")
    slot = latest_fire(i.schedule, i.schedule_tz, i.at or i.now)
    details = {"schedule": i.schedule, "timezone": i.schedule_tz}
    key = f"{scheduler}:{name}:{'manual:' if manual else ''}{format_time(slot)}"
    return _Identity(key, format_time(slot), None, manual, slot, details)


def _cron(i: _Inputs) -> _Identity:
    return _slot(i, "cron", i.job_name, manual=i.manual)


def _systemd(i: _Inputs) -> _Identity:
    # TRIGGER_* are recorded, never used: a restart need not carry them, and the elapse
    # time can be an older one; a run by hand says --manual
    found = _slot(i, "systemd", i.job_name, manual=i.manual)
    details = dict(found.details)
    for var in ("TRIGGER_UNIT", "TRIGGER_TIMER_REALTIME_USEC"):
        if value := _get(i.env, var):
            details[var.lower()] = value
    invocation = _get(i.env, "INVOCATION_ID")
    return _Identity(found.key, found.run_id, invocation, found.manual, found.intended, details)


_DERIVE: dict[str, Callable[[_Inputs], _Identity]] = {
    "github-actions": _github,
    "kubernetes": _kubernetes,
    "airflow": _airflow,
    "dagster": _dagster,
    "temporal": _temporal,
    "systemd": _systemd,
    "cron": _cron,
}


def derive(
    scheduler: str,
    env: Mapping[str, str],
    *,
    now: datetime,
    job_name: str | None = None,
    schedule: str | None = None,
    tz: str = "UTC",
    schedule_tz: str | None = None,
    kind: str = "iso-week",
    at: datetime | None = None,
    period: Period | None = None,
    files: Mapping[str, str] | None = None,
    manual: bool = False,
) -> Derivation:
    """The key and period for this run of ``scheduler``, from what it keeps stable across retries.

    ``at`` is the intended time (for cron and systemd: the time whose slot counts);
    ``period`` overrides the period outright. Periods map in ``tz`` (the repository's
    timezone); a cron schedule runs in ``schedule_tz`` (default ``tz``). Raises UsageError when the stable
    identity is missing. Pure: the same inputs always give the same Derivation.
    """
    if scheduler not in _DERIVE:
        raise UsageError(f"unknown scheduler {scheduler!r}: use one of {', '.join(SCHEDULERS)}")
    if now.tzinfo is None or (at is not None and at.tzinfo is None):
        raise UsageError("times must carry a timezone offset, e.g. 2026-08-07T06:00:00+00:00")
    if manual and scheduler not in ("cron", "systemd"):
        raise UsageError(f"--manual is for cron and systemd only: {scheduler} tells manual runs apart itself")
    if job_name is not None and not job_name.strip():
        raise UsageError("--job-name must not be empty")
    unused = [
        option
        for option, given, users in (
            ("--job-name", job_name is not None, ("github-actions", "kubernetes", "cron", "systemd")),
            ("--schedule", schedule is not None, ("github-actions", "cron", "systemd")),
            ("--podinfo", bool(files), ("kubernetes",)),
        )
        if given and scheduler not in users
    ]
    if unused:
        raise UsageError(f"{unused[0]} means nothing to --from {scheduler}: leave it out")
    place = zone(tz)
    inputs = _Inputs(env, now, job_name, schedule, schedule_tz or tz, at, files or {}, manual)
    found = _DERIVE[scheduler](inputs)
    canonical_key(found.key)
    # a time the scheduler's environment gave (not a cron or systemd slot, which is the key itself, nor --at)
    judged = found.intended if scheduler in _ENV_TIMES and at is None else None
    why = None if judged is None else implausible(judged, now)
    if why is not None:  # a backfill of long ago, a clock or variable gone wrong: not this run's slot
        found = replace(
            found,
            manual=True,
            intended=None,
            warnings=(
                *found.warnings,
                f"the scheduler's intended time is {why}: it counts as manual (period from the start time)",
            ),
        )
    intended = found.intended
    source = "schedule" if scheduler == "github-actions" else "intended"
    if at is not None and scheduler not in ("cron", "systemd"):
        intended, source = at.astimezone(UTC), "option"
    started_period = period_of(now.astimezone(place).date(), kind)
    if period is not None:
        chosen, source = period, "option"
    elif intended is not None:
        chosen = period_of(intended.astimezone(place).date(), kind)
    else:
        chosen, source = started_period, "start"
    return Derivation(
        scheduler=scheduler,
        key=found.key,
        run_id=found.run_id,
        attempt=found.attempt,
        manual=found.manual,
        intended=intended,
        started=now.astimezone(UTC),
        period=chosen,
        period_source=source,
        started_period=started_period,
        details=found.details,
        warnings=found.warnings,
    )
