"""What a killed ``jobstate run`` (or its command) leaves in an episode directory, recognised under the lock.

Called under the jobstate lock, where no live jobstate can be writing: a ``.tmp-*`` file in the
episode directory is then what a killed atomic write left, and is removed. Any other untracked
file is what a killed step's command wrote and nobody recorded: unless a step of the episode is
running now (its command may still be writing), it is moved, never deleted, to
``.jobstate/leftovers/<episode_id>/<time>/`` and the caller is told where. Files that git tracks
and that differ from HEAD are edits by a person: they stay, and the guard refuses.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from jobstate.atomic import TEMP_PREFIX
from jobstate.core.layout import PRIVATE, RECORD_FILES, episode_dir, step_lock_path
from jobstate.store.lock import read_holder
from jobstate.store.store import Store

LEFTOVERS = f"{PRIVATE}/leftovers"


def running_steps(
    store: Store, episode_id: str, *, steps: Iterable[str] | None = None, other_than_us: bool = False
) -> set[str]:
    """Steps of the episode whose step lock is held now (host-local): of ``steps``, or of all
    lock files of the episode. This is a read-only operation."""
    directory = store.path(f"{PRIVATE}/steps")
    prefix = f"{episode_id}."
    if steps is None:
        try:
            names = [p.name for p in directory.iterdir() if p.name.startswith(prefix) and p.name.endswith(".lock")]
        except OSError:
            return set()
        steps = [name[len(prefix) : -len(".lock")] for name in names]
    found = set()
    for step in steps:
        holder = read_holder(store.path(step_lock_path(episode_id, step)))
        if holder is not None and not (other_than_us and holder.get("pid") == os.getpid()):
            found.add(step)
    return found


def put_aside(
    store: Store, episode_id: str, dirty: list[tuple[str, str]], stamp: str, notify: Callable[[str], None]
) -> bool:
    """Under the lock: remove killed writes' temp files and move a killed step's unrecorded output aside.

    ``dirty`` is git's status of the episode directory; returns whether anything was removed or moved.
    """
    directory = episode_dir(episode_id)
    untracked = [path for code, path in dirty if code == "??"]
    if not untracked or running_steps(store, episode_id, other_than_us=True):
        return False  # a step running now may still be writing them: the guard refuses with a file's name
    # jobstate's own atomic writes put their temp files beside the records, nowhere deeper
    changed = remove_temp_files(store, directory, notify)
    target: Path | None = None
    for rel in untracked:
        source = store.path(rel)
        if not os.path.lexists(source):
            continue  # one of those temp files
        if Path(rel).name in RECORD_FILES or store.git.in_head(rel):
            continue  # committed content seen as untracked means a wrong index: never move it, refuse
        if target is None:
            store.ensure_private()
            base = store.path(f"{LEFTOVERS}/{episode_id}")
            base.mkdir(parents=True, exist_ok=True)
            target = Path(tempfile.mkdtemp(prefix=stamp.replace(":", "") + "-", dir=base))
        dest = target / Path(rel).relative_to(directory)
        dest.parent.mkdir(parents=True, exist_ok=True)
        source.replace(dest)
        changed = True
        notify(
            f"moved {rel} to {dest.relative_to(store.root)}: written by an interrupted step and never "
            "recorded (nothing deleted)"
        )
    return changed


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
