"""Every path and file name of a state repository, defined once."""

from __future__ import annotations

STATE = "state"
HISTORY = "history"
PRIVATE = ".jobstate"
CONFIG_FILE = "jobstate.yaml"
# tombstones of retired episodes: their ID and key are never handed out again
RETIRED = f"{HISTORY}/retired"
# overruns of a budget period a person reviewed and accepted (jobstate budget acknowledge), append-only
BUDGET_ACKNOWLEDGED = f"{HISTORY}/budget/acknowledged.yaml"
# the remote tip this clone last pushed or fetched (host-local)
REMOTE_TIP_FILE = f"{PRIVATE}/remote-tip.json"
# a command's report jobstate refused to record, kept for the operator instead of read again
REFUSED = f"{PRIVATE}/refused"

EPISODE_FILE = "episode.yaml"
SUBMISSIONS = "submissions.yaml"
COSTS = "costs.yaml"
ARTIFACTS = "artifacts.yaml"
APPROVAL = "approval.yaml"
# files jobstate itself writes in an episode directory; never artifacts
RECORD_FILES = frozenset({EPISODE_FILE, SUBMISSIONS, COSTS, ARTIFACTS, APPROVAL})


def episode_dir(episode_id: str) -> str:
    """``state/<id>``."""
    return f"{STATE}/{episode_id}"


def episode_path(episode_id: str) -> str:
    """``state/<id>/episode.yaml``."""
    return f"{STATE}/{episode_id}/{EPISODE_FILE}"


def record_path(episode_id: str, name: str) -> str:
    """``state/<id>/<name>`` for one of the record files."""
    return f"{STATE}/{episode_id}/{name}"


def step_lock_path(episode_id: str, step: str) -> str:
    """``.jobstate/steps/<id>.<step>.lock``: held while a paid step runs (host-local, git-ignored)."""
    return f"{PRIVATE}/steps/{episode_id}.{step}.lock"


def work_dir(episode_id: str, step: str, attempt: int | None = None) -> str:
    """``.jobstate/work/<id>/<step>/<attempt>``: where one attempt's CMD writes its output (host-local,
    git-ignored); reported artifacts move from there into the episode directory when recorded."""
    base = f"{PRIVATE}/work/{episode_id}/{step}"
    return base if attempt is None else f"{base}/{attempt}"


def result_path(episode_id: str, step: str, attempt: int) -> str:
    """``.jobstate/results/<id>.<step>.<attempt>.json``: one attempt's ``$JOBSTATE_RESULT`` (host-local)."""
    return f"{PRIVATE}/results/{episode_id}.{step}.{attempt}.json"


def refused_report_path(episode_id: str, step: str, attempt: int, stamp: str) -> str:
    """``.jobstate/refused/<id>.<step>.<attempt>.<stamp>.json``: a refused report, kept (host-local)."""
    return f"{REFUSED}/{episode_id}.{step}.{attempt}.{stamp}.json"


def history_path(episode_id: str) -> str:
    """``history/<id>.yaml``."""
    return f"{HISTORY}/{episode_id}.yaml"


def retired_path(episode_id: str) -> str:
    """``history/retired/<id>.yaml``: the tombstone of a retired episode."""
    return f"{RETIRED}/{episode_id}.yaml"


def is_retired_path(path: str) -> bool:
    """Whether ``path`` is a tombstone's place (``history/retired/<name>.yaml``)."""
    parts = path.split("/")
    return len(parts) == 3 and f"{parts[0]}/{parts[1]}" == RETIRED and parts[2].endswith(".yaml")


def describes_episode(path: str) -> str | None:
    """The episode ID a committed path describes, if it is an episode, history or tombstone file."""
    parts = path.split("/")
    if len(parts) == 3 and parts[0] == STATE and parts[2] == EPISODE_FILE:
        return parts[1]
    if is_retired_path(path):
        return parts[2][:-5]
    if len(parts) == 2 and parts[0] == HISTORY and parts[1].endswith(".yaml"):
        return parts[1][:-5]
    return None


def episode_of(path: str) -> tuple[str, str] | None:
    """Which episode a repository path describes, and as what: (ID, path inside its directory) for a
    file under ``state/<id>/``, (ID, ``HISTORY``) for ``history/<id>.yaml``; None for any other path.
    The one reading of the layout every reader of paths uses."""
    parts = path.split("/")
    if parts[0] == STATE and len(parts) >= 3:
        return parts[1], "/".join(parts[2:])
    if parts[0] == HISTORY and len(parts) == 2 and parts[1].endswith(".yaml"):
        return parts[1][:-5], HISTORY
    return None


def is_private(path: str) -> bool:
    """Whether ``path`` is ``.jobstate`` or under it: host-local files only jobstate writes."""
    return path == PRIVATE or path.startswith(f"{PRIVATE}/")


def record_path_problem(path: object, *, tracked: bool = False) -> str | None:
    """Why a path read from one of jobstate's own records (undo, pending, a result file) may not be used,
    or None. Such a path is normalised and relative, never ``..``, never inside ``.git`` or ``.jobstate``;
    and under state/ or history/, or jobstate.yaml or the root .gitignore or .gitattributes. With ``tracked`` (a
    fast-forward, whose files come from a commit HEAD contains, not from the record), any other path
    Git tracks is allowed too.
    Symlinks on the way are the store's to check (store.private)."""
    if not isinstance(path, str) or not path:
        return "is not a path"
    parts = path.split("/")
    if path.startswith("/") or "\\" in path or "\0" in path:
        return "is not a relative path inside the repository"
    if any(part in ("", ".", "..") for part in parts):
        return "is not a normalised path (no empty, '.' or '..' part)"
    if any(part.casefold() in (".git", PRIVATE) for part in parts):
        return f"is inside .git or {PRIVATE}"
    if (
        tracked
        or path in (CONFIG_FILE, ".gitignore", ".gitattributes")
        or (parts[0] in (STATE, HISTORY) and len(parts) > 1)
    ):
        return None  # .gitignore, .gitattributes: init writes them through the transaction; its records name them
    return f"is not under {STATE}/ or {HISTORY}/, nor {CONFIG_FILE}, .gitignore or .gitattributes"
