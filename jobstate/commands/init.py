"""``jobstate init``."""

from __future__ import annotations

from jobstate.commands._output import note
from jobstate.errors import UsageError
from jobstate.store.init import init as init_repo
from jobstate.store.store import repo_path


def init(repo: str | None, *, git_init: bool, force: bool = False, remote: str | None = None) -> int:
    """Set up a state repository and print its root; ``remote`` is refused (init does not set one up)."""
    if remote is not None:
        # accepting it and ignoring it would leave a host that believes it allocates through the remote
        raise UsageError(
            f"jobstate init does not set up a remote: run jobstate init without --remote, then add "
            f"'remote: {remote}' to jobstate.yaml, commit it and push the branch (git push {remote} HEAD)"
        )
    store, changed = init_repo(repo_path(repo), git_init=git_init, force=force)
    with store:
        note(f"{'initialized' if changed else 'already initialized'} {store.root}")
    print(store.root)
    return 0
