"""Allocation from a scheduler's identity: ``jobstate key --from`` and ``jobstate allocate --from``.

The derivation itself is pure (jobstate.allocation.schedulers); this module adds the
repository's settings (period kind, timezone), the period options and the
allocation with the ``scheduler:`` record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from jobstate.allocation.allocation import allocate
from jobstate.allocation.cron import zone
from jobstate.allocation.schedulers import Derivation, derive
from jobstate.core.layout import CONFIG_FILE
from jobstate.core.periods import Period, parse_date, parse_period, parse_time, period_of
from jobstate.core.records import Allocation
from jobstate.errors import StateInvalid, UsageError
from jobstate.git.repo import find_root
from jobstate.store.config import Config, config_from_text
from jobstate.store.store import Store


@dataclass(frozen=True)
class Request:
    """What the caller says beyond the environment: options of ``--from``."""

    scheduler: str
    job_name: str | None = None
    schedule: str | None = None
    tz: str | None = None  # the schedule's timezone; default: the repository's
    at: str | None = None
    date: str | None = None
    week: str | None = None
    period: str | None = None
    manual: bool = False


def _moment(text: str, tz: str) -> datetime:
    moment = parse_time(text)
    return moment.replace(tzinfo=zone(tz)) if moment.tzinfo is None else moment


def _override(request: Request, kind: str) -> Period | None:
    if request.week is not None:
        return parse_period(request.week, "iso-week")
    if request.period is not None:
        return parse_period(request.period)
    if request.date is not None:
        return period_of(parse_date(request.date), kind)
    return None


def derive_with(
    config: Config, request: Request, env: Mapping[str, str], files: Mapping[str, str], now: datetime
) -> Derivation:
    """The derivation for ``request`` under a repository's settings. Pure."""
    if sum(x is not None for x in (request.at, request.date, request.week, request.period)) > 1:
        raise UsageError("give at most one of --at, --date, --week, --period")
    if request.tz is not None and not request.tz.strip():
        raise UsageError("--tz must not be empty: give an IANA name such as UTC or Europe/Berlin, or leave it out")
    tz = config.timezone
    return derive(
        request.scheduler,
        env,
        now=now,
        job_name=request.job_name,
        schedule=request.schedule,
        tz=tz,
        schedule_tz=request.tz or tz,
        kind=config.period,
        at=_moment(request.at, request.tz or tz) if request.at is not None else None,
        period=_override(request, config.period),
        files=files,
        manual=request.manual,
    )


def settings_at(path: Path) -> Config | None:
    """The settings of the Git repository containing ``path``; None when there is none.

    This is a read-only operation.
    """
    try:
        root = find_root(path)
    except UsageError:  # NotInitialized among them
        return None  # not in a work tree (or in a bare repository): no settings to honour
    config_path = root / CONFIG_FILE
    if not config_path.is_file():
        return Config()
    try:
        data = config_path.read_bytes()
    except OSError as exc:
        raise StateInvalid(f"{CONFIG_FILE}: cannot read: {exc.strerror}") from None
    return config_from_text(data)


def key_for(
    path: Path, request: Request, env: Mapping[str, str], files: Mapping[str, str], now: datetime
) -> Derivation:
    """``jobstate key --from``: the key, intended time and period, under the settings found at ``path``.

    This is a read-only operation.
    """
    config = settings_at(path)
    if config is None:
        # no repository to say where periods turn: the schedule's timezone does
        config = Config(timezone=request.tz or "UTC")
    return derive_with(config, request, env, files, now)


def allocate_from(
    store: Store,
    request: Request,
    env: Mapping[str, str],
    files: Mapping[str, str],
    now: datetime,
    *,
    any_branch: bool = False,
) -> tuple[Allocation, Derivation]:
    """``jobstate allocate --from``: the episode for this scheduler run, with a ``scheduler:`` record.

    Without a time from the scheduler or an option, the period is the start's, and a key
    that already has an episode (a re-run days later) keeps that episode's period.
    """
    found = derive_with(store.config, request, env, files, now)
    result = allocate(
        store,
        found.key,
        found.period,
        extra={"scheduler": found.record()},
        keep_period=found.keep_period,
        any_branch=any_branch,
    )
    return result, found


def notes(result: Allocation, found: Derivation) -> list[str]:
    """What ``allocate --from`` says on stderr: a late start, or a key kept in its own period."""
    out = [f"warning: {line}" for line in found.warnings]
    when = found.to_json()
    if found.late_across_periods and result.period_id == found.period.id:
        why = "set by an option" if found.period_source == "option" else f"scheduled for {when['intended_at']}"
        out.append(
            f"this run started {when['started_at']} in period {found.started_period.id}; "
            f"it counts in {found.period.id} ({why})"
        )
    if result.period_id != found.period.id:
        out.append(
            f"key {found.key!r} already has episode {result.episode_id} in period {result.period_id}; "
            f"it stays there (on its own, this run would count in {found.period.id})"
        )
    return out


def read_podinfo(folder: str | None) -> dict[str, str]:
    """The Downward API files (labels, namespace) mounted at ``folder``. This is a read-only operation."""
    if folder is None:
        return {}
    path = Path(folder)
    if not path.is_dir():
        raise UsageError(f"--podinfo {path}: no such directory (mount the Downward API volume there)")
    return {
        name: (path / name).read_text(encoding="utf-8", errors="replace")
        for name in ("labels", "namespace")
        if (path / name).is_file()
    }
