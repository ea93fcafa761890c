"""Answers about HEAD and the index that one command asks again and again, asked of git once per version.

A committing command checks that nothing under ``.jobstate`` is tracked before each transaction and
before it reads a private file, and a paid step's guard lists HEAD's episode directory before the lock
and again under it (issue 27: these were 8 of a paid step's 29 git processes). A commit never changes,
and git replaces the index file whole (a new inode) on every write, so an answer keyed on HEAD's commit
and the index file's identity holds until either moves; jobstate's own commits carry it over.
"""

from __future__ import annotations

from pathlib import Path
from weakref import WeakKeyDictionary

from jobstate.errors import GitError
from jobstate.git.objects import TREE_MODE, Tree
from jobstate.git.repo import GitRepo
from jobstate.git.runner import READ_ONLY_ENV, run_git

_Key = tuple[object, ...]
_TRACKED: WeakKeyDictionary[GitRepo, dict[str, tuple[_Key, list[str]]]] = WeakKeyDictionary()
_HEAD_FILES: WeakKeyDictionary[GitRepo, tuple[tuple[str, str], list[tuple[str, str, str]]]] = WeakKeyDictionary()


def head_files(git: GitRepo, directory: str) -> list[tuple[str, str, str]]:
    """``git.ls_tree(HEAD, directory)``, asked of git once per HEAD commit and directory. Read-only."""
    head = git.head_commit()
    if head is None:
        raise GitError(f"{git.root} has no commit yet")
    cached = _HEAD_FILES.get(git)
    if cached is None or cached[0] != (head, directory):
        cached = _HEAD_FILES[git] = ((head, directory), git.ls_tree(head, directory))  # one: HEAD moves on
    return cached[1]


def blob_at(git: GitRepo, commit: str, path: str) -> str | None:
    """The blob ID at ``path`` in ``commit`` (None when there is none), read from the trees on the path:
    loose objects in Python, packed ones through the repository's one ``git cat-file``. Read-only."""
    tree = git.commit_tree_of(commit)
    parts = path.split("/")
    for n, part in enumerate(parts):
        kind, body = git.read_object(tree)
        if kind != b"tree":
            raise GitError(f"{tree} is not a tree")
        entry = Tree(body, git.format.width).get(part.encode("utf-8", "surrogateescape"))
        if entry is None or (entry[0] == TREE_MODE) == (n == len(parts) - 1):
            return None
        tree = entry[1]
    return tree


def index_key(git: GitRepo) -> _Key:
    """What identifies this version of the index file (empty when there is none)."""
    try:
        info = (git.git_dir / "index").stat()
    except FileNotFoundError:
        return ()
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def tracked_in_work_tree(cwd: Path, path: str) -> list[str]:
    """What HEAD or the index has at or under ``path`` (a staged ``git rm --cached`` still counts: HEAD
    keeps it until the next commit), asked of git every time. Read-only."""
    proc = run_git(cwd, "ls-files", "-z", "--with-tree=HEAD", "--", path, env=READ_ONLY_ENV, check=False)
    if proc.returncode != 0:  # no HEAD yet: the index alone
        proc = run_git(cwd, "ls-files", "-z", "--", path, env=READ_ONLY_ENV)
    return [p.decode("utf-8", "surrogateescape") for p in proc.stdout.split(b"\0") if p]


def tracked(git: GitRepo, path: str) -> list[str]:
    """What HEAD or the index has at or under ``path`` (``git ls-files --with-tree=HEAD``), asked of git
    again only when HEAD or the index changed. Read-only."""
    key = (git.head_commit(), index_key(git))
    answers = _TRACKED.setdefault(git, {})
    cached = answers.get(path)
    if cached is not None and cached[0] == key:
        return cached[1]
    head = key[0]
    if head is not None and git.entry(git.commit_tree_of(head), path) is None:
        # HEAD has nothing there (the usual answer): the index alone, without --with-tree, which reads
        # all of HEAD's tree (a quarter of a second at 100,000 episodes, after every outside commit)
        proc = git.run("ls-files", "-z", "--", path, env=READ_ONLY_ENV)
        names = [p.decode("utf-8", "surrogateescape") for p in proc.stdout.split(b"\0") if p]
    else:
        names = tracked_in_work_tree(git.root, path)
    answers[path] = (key, names)
    return names


def carry_tracked(git: GitRepo, old: _Key, new_commit: str, changed: list[str]) -> None:
    """After jobstate's own commit of ``changed`` (under index.lock: nobody else wrote the index), what
    was tracked at a path none of them is under still is: the answers for ``old`` (HEAD, index) hold
    for the new HEAD and index too."""
    key = (new_commit, index_key(git))
    answers = _TRACKED.get(git, {})
    for path, (was, names) in list(answers.items()):
        if was == old and not any(c == path or c.startswith(f"{path}/") for c in changed):
            answers[path] = (key, names)
