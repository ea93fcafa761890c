"""Every path and file name of a state repository, defined once."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

from jobstate.errors import StateInvalid

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


# an episode ID as the layout reads it (periods.parse_episode_id checks the dates): year, period, sequence
_ID = re.compile(r"((\d{4})(?:-W\d{2}|-\d{2}-\d{2}|-\d{2}))-(?:0|[1-9]\d{0,5})")


def _place(name: str) -> str:
    """``<year>/<period>/<id>``: where an episode lives under state/ and history/. Trees stay small at any
    size: the root holds one entry a year, a year at most 366 periods, a period that period's episodes
    (the earlier flat layout, ``state/<id>/``, held one entry per episode: a million entries
    rewritten by every commit). The leaf keeps the whole ID, so a path names its episode in any diff.
    A legacy week-only name (``2026-W32``, before ``jobstate migrate``) stays where it always was."""
    m = _ID.fullmatch(name)
    return name if m is None else f"{m[2]}/{m[1]}/{name}"


def episode_dir(episode_id: str) -> str:
    """``state/<year>/<period>/<id>``."""
    return f"{STATE}/{_place(episode_id)}"


def episode_path(episode_id: str) -> str:
    """``state/<year>/<period>/<id>/episode.yaml``."""
    return f"{episode_dir(episode_id)}/{EPISODE_FILE}"


def record_path(episode_id: str, name: str) -> str:
    """``state/<year>/<period>/<id>/<name>`` for one of the record files."""
    return f"{episode_dir(episode_id)}/{name}"


def year_dir(episode_id: str) -> str:
    """``state/<year>``: the directory whose mtime ``Store.state_mtime`` watches for ``episode_id``'s period."""
    return episode_dir(episode_id).rsplit("/", 2)[0]


def period_dir(period_id: str) -> str:
    """``state/<year>/<period>``: the directory of one period's episodes."""
    return f"{STATE}/{period_id[:4]}/{period_id}"


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
    """``history/<year>/<period>/<id>.yaml``."""
    return f"{HISTORY}/{_place(episode_id)}.yaml"


def retired_path(episode_id: str) -> str:
    """``history/retired/<year>/<period>/<id>.yaml``: the tombstone of a retired episode."""
    return f"{RETIRED}/{_place(episode_id)}.yaml"


_PERIOD = re.compile(r"(\d{4})(?:-W\d{2}|-\d{2}-\d{2}|-\d{2})")


def is_year_dir(name: str) -> bool:
    """Whether ``name`` is a year's directory of state/ or history/ (``2026``)."""
    return len(name) == 4 and name.isdigit()


def is_period_dir(year: str, name: str) -> bool:
    """Whether ``name`` is a period's directory in the year directory ``year`` (``2026-W32`` in ``2026``)."""
    m = _PERIOD.fullmatch(name)
    return m is not None and m[1] == year


def _placed(year: str, period: str, name: str) -> str | None:
    """The ID of ``<year>/<period>/<name>`` when it is an episode's place (``2026/2026-W32/2026-W32-0``)."""
    m = _ID.fullmatch(name)
    return name if m is not None and m[2] == year and m[1] == period else None


def _flat(path: str) -> tuple[str, str] | None:
    """(ID, what) of an episode path in the flat layout: (ID, path inside its directory) for
    ``state/<id>/...``, (ID, ``HISTORY``) for ``history/<id>.yaml``, (ID, ``RETIRED``) for
    ``history/retired/<id>.yaml``; None for any other path."""
    parts = path.split("/")
    if parts[0] == STATE and len(parts) >= 2 and _ID.fullmatch(parts[1]):
        return parts[1], "/".join(parts[2:])
    if parts[0] == HISTORY and len(parts) == 2 and parts[1].endswith(".yaml") and _ID.fullmatch(parts[1][:-5]):
        return parts[1][:-5], HISTORY
    if (
        len(parts) == 3
        and f"{parts[0]}/{parts[1]}" == RETIRED
        and parts[2].endswith(".yaml")
        and _ID.fullmatch(parts[2][:-5])
    ):
        return parts[2][:-5], RETIRED
    return None


def is_flat(path: str) -> bool:
    """Whether ``path`` is an episode's place in the flat layout, which ``jobstate migrate`` moves."""
    return _flat(path) is not None


def is_flat_name(name: str) -> bool:
    """Whether an entry of state/ is an episode directory of the flat layout (``state/2026-W32-0``)."""
    return _ID.fullmatch(name) is not None


def canonical(path: str) -> str:
    """``path`` in today's layout: a flat layout's episode path moved where it lives now, any other
    path unchanged. Snapshots list their files this way, so that one reader reads both layouts (old
    revisions stay readable) and a migration's renames compare as no change at all."""
    found = _flat(path)
    if found is None:
        return path
    eid, rest = found
    if rest == HISTORY:
        return history_path(eid)
    if rest == RETIRED:
        return retired_path(eid)
    return f"{episode_dir(eid)}/{rest}" if rest else episode_dir(eid)


def is_retired_path(path: str) -> bool:
    """Whether ``path`` is a tombstone's place (``history/retired/<year>/<period>/<id>.yaml``)."""
    return _retired(canonical(path).split("/")) is not None


def _retired(parts: list[str]) -> str | None:
    if len(parts) == 5 and f"{parts[0]}/{parts[1]}" == RETIRED and parts[4].endswith(".yaml"):
        return _placed(parts[2], parts[3], parts[4][:-5])
    return None


def episode_of(path: str) -> tuple[str, str] | None:
    """Which episode a repository path describes, and as what: (ID, path inside its directory) for a
    file under ``state/<year>/<period>/<id>/`` ("" for the directory), (ID, ``HISTORY``) for its history
    file; None for any other path. A legacy week-only name (``state/2026-W32/``, ``history/2026-W32.yaml``)
    and any other name directly under state/ describe themselves, for verify to judge. The one reading of the layout
    every reader of paths uses; a flat layout's path reads as the place it moves to."""
    parts = canonical(path).split("/")
    if parts[0] == STATE and len(parts) >= 2:
        if not is_year_dir(parts[1]):
            if len(parts) == 2 and parts[1].startswith("."):
                return None  # state/.gitkeep, a temp file
            return parts[1], "/".join(parts[2:])
        eid = _placed(*parts[1:4]) if len(parts) >= 4 else None
        return None if eid is None else (eid, "/".join(parts[4:]))  # "" for the directory itself
    if parts[0] == HISTORY and len(parts) == 2 and parts[1].endswith(".yaml"):
        return parts[1][:-5], HISTORY
    if parts[0] == HISTORY and len(parts) == 4 and parts[3].endswith(".yaml"):
        eid = _placed(parts[1], parts[2], parts[3][:-5])
        return None if eid is None else (eid, HISTORY)
    return None


def misplaced(path: str) -> str | None:
    """Why a file of state/ or history/ is no file jobstate writes there (verify's error, diff's alarm),
    or None: an episode's or history file, a tombstone, the budget's acknowledgements, a .gitkeep."""
    parts = canonical(path).split("/")
    if (
        episode_of(path) is not None
        or is_retired_path(path)
        or path == BUDGET_ACKNOWLEDGED
        or parts[1:2] == [".gitkeep"]
    ):
        return None
    if parts[0] == STATE:
        return "state/ holds only episode directories"
    if parts[0] == HISTORY:
        retired = "" if len(parts) == 2 else " and retired/<year>/<period>/<episode_id>.yaml"
        return f"history/ holds only <year>/<period>/<episode_id>.yaml files{retired}"
    return None


UNRECORDED = "file is not a jobstate record nor a recorded artifact"


def unrecorded(name: str, paths: Iterable[str], artifacts: Iterable[str]) -> list[str]:
    """The files of episode ``name``'s directory among ``paths`` that are neither one of its records nor an
    artifact its records name (verify's warning, diff's alarm)."""
    base = episode_dir(name)
    named = {f"{base}/{rel}" for rel in artifacts}
    return sorted(
        p for p in paths if p.startswith(f"{base}/") and p[len(base) + 1 :] not in RECORD_FILES and p not in named
    )


def describes_episode(path: str) -> str | None:
    """The episode ID a committed path describes, if it is an episode, history or tombstone file
    (either layout)."""
    parts = canonical(path).split("/")
    stone = _retired(parts)
    if stone is not None:
        return stone
    found = episode_of(path)
    if found is None or found[1] not in (EPISODE_FILE, HISTORY):
        return None
    return found[0]


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


# the largest record any reader takes: what a pull request delivers larger is refused unread (by the size a
# file or a Git object header gives), so review never holds a 256 MiB costs.yaml in memory
MAX_RECORD_BYTES = 4 * 1024 * 1024


def record_size_problem(size: int) -> str | None:
    """Why a record of ``size`` bytes is not read, or None: the one size rule of every reader."""
    if size <= MAX_RECORD_BYTES:
        return None
    return f"{size} bytes is over the {MAX_RECORD_BYTES // (1024 * 1024)} MiB limit for a state file; it was not read"


# jobstate writes every file of the state as a plain, non-executable blob; Git can hold others there
FILE_MODE = "100644"
_MODE_PROBLEMS = {
    "100755": "is executable, and jobstate never writes an executable file: chmod -x it and commit that",
    "120000": "is a symlink; state holds regular files only",
    "160000": "is a submodule (gitlink); state holds regular files only",
}


def mode_problem(mode: str) -> str | None:
    """Why a Git entry of ``mode`` under state/ or history/ (or jobstate.yaml) is none jobstate wrote, or None."""
    if mode == FILE_MODE:
        return None
    return _MODE_PROBLEMS.get(mode, f"has Git mode {mode}; state holds regular files only")


def mode_refusal(path: str, mode: str) -> StateInvalid | None:
    """The refusal (exit 7) of every command that would act on ``path`` committed with ``mode`` in HEAD
    (a merge may deliver a symlink, a submodule or an executable file), or None; review flags the same."""
    problem = mode_problem(mode)
    if problem is None:
        return None
    return StateInvalid(
        f"{path} in HEAD {problem}; jobstate acts only on files as it writes them, so it did nothing "
        "(jobstate verify --rev HEAD shows it)"
    )


# the attributes with which git changes a file's bytes between the commit and the work tree (gitattributes(5):
# end of lines, $Id$ expansion, re-encoding, clean and smudge filters; crlf is text's old name)
BYTE_ATTRIBUTES = ("text", "eol", "crlf", "filter", "ident", "working-tree-encoding")
_LEFT_ALONE = ("unset", "unspecified")


def is_artifact_path(path: str) -> bool:
    """Whether ``path`` is a file a paid step reported (under an episode's directory, not one of its records)."""
    found = episode_of(path)
    return found is not None and found[1] not in ("", HISTORY) and found[1] not in RECORD_FILES


def attribute_problem(path: str, values: dict[str, str]) -> str | None:
    """Why git's attributes for one of jobstate's files (``git check-attr`` values of ``BYTE_ATTRIBUTES``,
    ``unspecified`` for any not given) would change its bytes, or None. jobstate compares and commits its
    files byte for byte, so a conversion makes a fresh clone's copy differ from what was committed. Git LFS
    may keep an artifact (verify checks its pointer); a record is always a plain blob."""

    def value(name: str) -> str:
        return values.get(name, "unspecified")

    def shown(name: str) -> str:
        v = value(name)
        return name if v == "set" else f"{name}={v}"

    found = None
    if value("text") not in _LEFT_ALONE:
        found = "text"
    elif value("crlf") not in _LEFT_ALONE:
        found = "crlf"
    elif value("text") == "unspecified" and value("eol") not in _LEFT_ALONE:
        found = "eol"  # eol implies text where text is not unset
    elif value("ident") not in _LEFT_ALONE:
        found = "ident"
    elif value("working-tree-encoding") not in _LEFT_ALONE:
        found = "working-tree-encoding"
    elif value("filter") not in _LEFT_ALONE and not (value("filter") == "lfs" and is_artifact_path(path)):
        found = "filter"
    if found is None:
        return None
    return (
        f"git's attributes give it {shown(found)}, which changes its bytes between the commit and a checkout; "
        "jobstate keeps its files exactly as committed: remove that line from .gitattributes, or add after it "
        "the lines jobstate init writes (/state/** -text -ident -working-tree-encoding, and the same for "
        f"/history/** and /jobstate.yaml) (git check-attr {found} -- {shlex.quote(path)} shows what applies)"
    )
