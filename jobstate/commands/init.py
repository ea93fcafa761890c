"""``jobstate init``."""

from __future__ import annotations

from jobstate.commands._output import note
from jobstate.setup_repo import init as init_repo
from jobstate.store import repo_path


def init(repo: str | None, *, git_init: bool) -> int:
    """Set up a state repository and print its root."""
    store, changed = init_repo(repo_path(repo), git_init=git_init)
    with store:
        note(f"{'initialized' if changed else 'already initialized'} {store.root}")
    print(store.root)
    return 0
