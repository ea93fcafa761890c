"""What commits hold under a directory, and which paths two commits differ in, with their modes. Read-only."""

from __future__ import annotations

from jobstate.git.objects import TREE_MODE
from jobstate.git.repo import GitRepo


def files_under(git: GitRepo, commit: str, directory: str) -> dict[str, str]:
    """path -> object ID of every entry under ``directory`` in ``commit`` that is not a tree, read through
    the command's own object reader (no git process). Read-only."""
    top = git.entry(git.commit_tree_of(commit), directory)
    out: dict[str, str] = {}
    stack = [(directory, top)] if top is not None else []
    while stack:
        path, (mode, sha) = stack.pop()
        if mode != TREE_MODE:
            out[path] = sha
            continue
        tree = git.tree(sha)
        for key in tree.keys:
            name = key.removesuffix(b"/")
            found = tree.get(name)
            if found is not None:
                stack.append((f"{path}/{name.decode('utf-8', 'surrogateescape')}", found))
    return out


def diff_modes(git: GitRepo, old: str, new: str, *paths: str) -> list[tuple[str, str]] | None:
    """(mode in ``new``, path) of the paths changed between two commits ("000000" for a path ``new``
    no longer has), or None if ``old`` is gone. Read-only."""
    proc = git.run("diff-tree", "-r", "-z", "--no-renames", "--raw", "--no-abbrev", old, new, "--", *paths, check=False)
    if proc.returncode != 0:
        return None
    fields = proc.stdout.split(b"\0")
    return [
        (meta.decode("ascii").split()[1], raw.decode("utf-8", "surrogateescape"))
        for meta, raw in zip(fields[0::2], fields[1::2], strict=False)
        if meta
    ]
