"""Git attributes that would change the bytes of jobstate's files (issue 29, 2).

jobstate compares and commits its files byte for byte. A ``.gitattributes`` line
a pull request adds after jobstate's own (``* text=auto eol=crlf``) makes a fresh
clone check the records out converted, and its retry of its own key then fails.
The rule is ``core.layout.attribute_problem``, judged on what ``git check-attr``
answers; the committing commands, verify and diff all ask it here. Git is asked
only when some attributes file that applies has a line that might convert
(``may_change_bytes``): the usual repository costs no process.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from jobstate.core.layout import BYTE_ATTRIBUTES, CONFIG_FILE, HISTORY, STATE, attribute_problem
from jobstate.errors import StateInvalid
from jobstate.git.attributes import check_attr
from jobstate.git.repoconfig import config_value
from jobstate.git.runner import READ_ONLY_ENV, run_git
from jobstate.git.settings import attributes_file

if TYPE_CHECKING:
    from jobstate.store.store import Store

ATTRIBUTES = ".gitattributes"


def may_change_bytes(text: bytes) -> bool:
    """Whether an attributes file has a line that may change some file's bytes: one that sets, or makes
    unspecified, one of ``layout.BYTE_ATTRIBUTES``, or a macro or quoted pattern (git judges those).
    Conservative and process-free: only a file this says no to spares asking ``git check-attr``."""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(b"#"):
            continue
        if line.startswith((b"[attr]", b'"')):
            return True
        for token in line.split()[1:]:
            name = token.lstrip(b"!-").split(b"=", 1)[0].decode("utf-8", "replace")
            if name in BYTE_ATTRIBUTES and not token.startswith(b"-"):
                return True
    return False


def _read(file: Path) -> bytes:
    with contextlib.suppress(OSError):
        return file.read_bytes()
    return b""


def problems(cwd: Path, paths: Iterable[str], commit: str | None, sources: Iterable[bytes]) -> list[tuple[str, str]]:
    """(path, why) for each of ``paths`` whose attributes would change its bytes, as the work tree's
    attributes say (``commit`` None) or ``commit``'s. ``sources``: the attributes files that apply, to decide
    whether git need be asked at all. Read-only."""
    if not any(may_change_bytes(text) for text in sources):
        return []
    wanted = sorted(set(paths))
    found = check_attr(cwd, BYTE_ATTRIBUTES, wanted, commit)
    return [(p, why) for p in wanted if (why := attribute_problem(p, found.get(p, {}))) is not None]


def local_sources(common_dir: Path, attributes_file: Path) -> list[bytes]:
    """This clone's own attributes (``info/attributes``, ``core.attributesFile``): no merge delivers them,
    but git applies them all the same."""
    return [_read(common_dir / "info" / "attributes"), _read(attributes_file)]


def snapshot_problems(
    cwd: Path, paths: Iterable[str], commit: str | None, read: Callable[[str], bytes]
) -> list[tuple[str, str]]:
    """``problems`` for every file of a snapshot (verify, diff): ``read`` gives an attributes file of the
    work tree or of ``commit``; the nested ones are among ``paths``, which lists every file. Read-only."""
    listed = [*paths, CONFIG_FILE]
    sources = [read(ATTRIBUTES)] + [read(p) for p in listed if p.rsplit("/", 1)[-1] == ATTRIBUTES]
    if not any(may_change_bytes(text) for text in sources):  # this clone's own files are asked for only now
        common = run_git(cwd, "rev-parse", "--git-common-dir", env=READ_ONLY_ENV).stdout.decode().strip()
        configured = config_value(cwd, "core.attributesFile")
        sources = local_sources((cwd / common).resolve(), attributes_file(configured))
    return problems(cwd, [p for p in listed if p.rsplit("/", 1)[-1] != ATTRIBUTES], commit, sources)


def on_the_way(paths: Iterable[str], read: Callable[[str], bytes]) -> list[bytes]:
    """The attributes files of the root and of every directory on the way to ``paths``."""
    dirs = {""}
    for path in paths:
        parts = path.split("/")[:-1]
        dirs.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return [read(f"{d}/{ATTRIBUTES}" if d else ATTRIBUTES) for d in sorted(dirs)]


def refuse_converting(store: Store, paths: Iterable[str]) -> None:
    """Refuse (StateInvalid, exit 7) a change of ``paths`` that git's attributes would convert: committed as
    jobstate writes them, a checkout would not give the same bytes back. Called once the change is in the
    work tree (init writes .gitattributes itself), before it is committed."""
    wanted = [p for p in paths if p == CONFIG_FILE or p.split("/", 1)[0] in (STATE, HISTORY)]
    sources = on_the_way(wanted, lambda rel: _read(store.root / rel))
    sources += local_sources(store.git.common_dir, store.git.settings.attributes_file)
    found = problems(store.root, wanted, None, sources)
    if found:
        path, why = found[0]
        raise StateInvalid(f"{path}: {why}; nothing was written (jobstate verify shows every file it applies to)")


def converted_error(store: Store, path: str) -> StateInvalid | None:
    """When git converted a file of the work tree: the attribute that did it, as an error (exit 7), or None
    when no attribute is to blame (core.autocrlf in an older repository: advice.converted says what to do)."""
    found = check_attr(store.root, BYTE_ATTRIBUTES, [path], None)
    why = attribute_problem(path, found.get(path, {}))
    if why is None:
        return None
    return StateInvalid(f"{path}: {why}; nothing was done (jobstate verify shows every file it applies to)")
