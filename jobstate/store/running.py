"""What a killed jobstate leaves, recognised under the lock; which steps are running now; the staging
directories interrupted attempts left.

Called under the jobstate lock, where no live jobstate can be writing: a ``.tmp-*`` file beside the
records is then what a killed atomic write left, and is removed. Nothing else is: a step's command
writes into its own staging directory (jobstate.paid.staging), never into the episode directory, so
any other file there that differs from HEAD is a person's, and the guard refuses it, untouched.

A step runs while its step lock is held: by jobstate, and by CMD, which inherits the lock, so an
orphaned CMD (jobstate killed) still counts as running, and its pid is named.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from jobstate.atomic import TEMP_PREFIX
from jobstate.core.layout import PRIVATE, refused_report_path, result_path, step_lock_path, work_dir
from jobstate.core.result import check_report
from jobstate.errors import UsageError
from jobstate.store.lock import read_holder
from jobstate.store.private import read_private, refused_reports
from jobstate.store.store import Store


def running_holder(holder: dict[str, Any]) -> str:
    """Who runs a step, for messages: CMD's pid and command line when it has started (it holds the step
    lock too, and may be the only holder left), else jobstate's pid."""
    if holder.get("cmd_pid") is not None:
        return (
            f"its command pid {holder.get('cmd_pid')} on {holder.get('host')}: {holder.get('cmd')}; "
            f"started by jobstate pid {holder.get('pid')}"
        )
    return f"jobstate pid {holder.get('pid')} on {holder.get('host')}"


def running_steps(
    store: Store, episode_id: str, *, steps: Iterable[str] | None = None, other_than_us: bool = False
) -> dict[str, dict[str, Any]]:
    """Steps of the episode whose step lock is held now (host-local), each with its holder record:
    of ``steps``, or of all lock files of the episode. This is a read-only operation."""
    directory = store.path(f"{PRIVATE}/steps")
    prefix = f"{episode_id}."
    if steps is None:
        try:
            names = [p.name for p in directory.iterdir() if p.name.startswith(prefix) and p.name.endswith(".lock")]
        except OSError:
            return {}
        steps = [name[len(prefix) : -len(".lock")] for name in names]
    found: dict[str, dict[str, Any]] = {}
    for step in steps:
        holder = read_holder(store.path(step_lock_path(episode_id, step)))
        if holder is not None and not (other_than_us and holder.get("pid") == os.getpid()):
            found[step] = holder
    return found


def steps_running_at(root: Path, episode_id: str, steps: Iterable[str]) -> set[str]:
    """Of ``steps``, those whose step lock is held now in the work tree at ``root`` (host-local): what
    ``running_steps`` answers, for a reader that opens no Store (report). Read-only."""
    return {step for step in steps if read_holder(root / step_lock_path(episode_id, step)) is not None}


def remove_temp_files(store: Store, directory: str, notify: Callable[[str], None]) -> bool:
    """Under the lock: remove the ``.tmp-*`` files killed atomic writes left directly in ``directory``;
    whether there were any."""
    try:
        names = [e.name for e in os.scandir(store.path(directory)) if e.name.startswith(TEMP_PREFIX) and e.is_file()]
    except OSError:
        return False
    for name in names:
        store.path(f"{directory}/{name}").unlink(missing_ok=True)
        notify(f"removed {directory}/{name}, left by an interrupted jobstate write")
    return bool(names)


def kept_outputs(store: Store, episode_id: str, completed: Mapping[str, set[int]]) -> dict[str, list[str]]:
    """Staging directories of the episode's attempts that were not removed (an interrupted attempt's
    output, kept for the operator): step -> repository-relative paths. Those of ``completed`` attempts
    (step -> numbers), whose removal a kill interrupted, are not named. This is a read-only operation."""
    base = store.path(work_dir(episode_id, "x")).parent
    out: dict[str, list[str]] = {}
    try:
        steps = sorted(e.name for e in os.scandir(base) if e.is_dir(follow_symlinks=False))
    except OSError:
        return out
    for step in steps:
        try:
            found = sorted(
                (
                    e.name
                    for e in os.scandir(base / step)
                    if e.is_dir(follow_symlinks=False)
                    and _holds_files(e.path)
                    and not (e.name.isdigit() and int(e.name) in completed.get(step, set()))
                ),
                key=lambda name: (len(name), name),
            )
        except OSError:
            continue
        if found:
            out[step] = [f"{work_dir(episode_id, step)}/{name}" for name in found]
    return out


def _holds_files(path: str) -> bool:
    with os.scandir(path) as entries:
        return any(True for _ in entries)


def attempt_reports(store: Store, episode_id: str, step: str, attempt: int) -> list[tuple[str, dict[str, Any]]]:
    """Every report CMD left for one attempt (its result file, and the ones jobstate refused and kept
    aside), as (repository-relative path, report), each a well-formed one: a file half written or
    contradicting itself proves nothing. Read-only."""
    prefix = refused_report_path(episode_id, step, attempt, "")
    paths = [result_path(episode_id, step, attempt)]
    paths += [p for p in refused_reports(store, episode_id) if p.startswith(prefix)]
    out = []
    for rel in paths:
        data = read_private(store, store.path(rel))  # never a file Git delivered
        try:
            report = json.loads(data.decode("utf-8")) if data else None
        except (ValueError, UnicodeDecodeError):
            continue
        if not isinstance(report, dict):
            continue
        try:
            check_report(report, rel)
        except UsageError:
            continue
        out.append((rel, report))
    return out
