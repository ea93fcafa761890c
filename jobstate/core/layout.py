"""Every path and file name of a state repository, defined once."""

from __future__ import annotations

STATE = "state"
HISTORY = "history"
PRIVATE = ".jobstate"
CONFIG_FILE = "jobstate.yaml"

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


def history_path(episode_id: str) -> str:
    """``history/<id>.yaml``."""
    return f"{HISTORY}/{episode_id}.yaml"


def describes_episode(path: str) -> str | None:
    """The episode ID a committed path describes, if it is an episode or history file."""
    parts = path.split("/")
    if len(parts) == 3 and parts[0] == STATE and parts[2] == EPISODE_FILE:
        return parts[1]
    if len(parts) == 2 and parts[0] == HISTORY and parts[1].endswith(".yaml"):
        return parts[1][:-5]
    return None
