"""Blobs of files that ``.gitattributes`` sends through a filter (Git LFS), written as git would write them.

jobstate writes its own YAML records as plain blobs. An artifact may be
tracked by a clean filter (``*.mp4 filter=lfs``): git commits what the filter
makes of it (a pointer), and so must jobstate, or the index (which git fills
through the filter) would disagree with the commit. ``git hash-object --path``
applies the filter exactly as ``git add`` does; git-lfs need not be installed
for files without a filter.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from jobstate.git.loose import Content, StoredBlob
from jobstate.git.runner import run_git, run_git_piped

_UNFILTERED = (b"unspecified", b"unset")


def _may_be_filtered(path: str) -> bool:
    # jobstate's own records are never filtered: keep the hot path free of subprocesses
    name = path.rsplit("/", 1)[-1]
    return not name.endswith(".yaml") and name not in (".gitkeep", ".gitignore")


def filtered_blobs(cwd: Path, files: Mapping[str, Content | None]) -> dict[str, str]:
    """path -> blob ID for the files a ``filter`` attribute applies to, written through that filter."""
    candidates = [p for p, data in files.items() if data is not None and _may_be_filtered(p)]
    if not candidates:
        return {}
    stdin = b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in candidates)
    out = run_git(cwd, "check-attr", "-z", "--stdin", "filter", input=stdin).stdout.split(b"\0")
    filtered = [
        out[i].decode("utf-8", "surrogateescape") for i in range(0, len(out) - 2, 3) if out[i + 2] not in _UNFILTERED
    ]
    blobs = {}
    for path in filtered:
        data = files[path]
        filtering = ("hash-object", "-w", "--stdin", f"--path={path}")
        if isinstance(data, StoredBlob):  # streamed through the filter, never held whole
            sha = run_git_piped(cwd, ("cat-file", "blob", data.sha), *filtering)
        else:
            assert data is not None
            sha = run_git(cwd, *filtering, input=data).stdout
        blobs[path] = sha.decode("ascii").strip()
    return blobs


def lfs_tracked(cwd: Path, paths: list[str], commit: str | None) -> set[str]:
    """The ``paths`` whose ``filter`` attribute is ``lfs``: as the work tree's attributes say (``commit`` None),
    or as ``commit``'s own ``.gitattributes`` do. Read-only."""
    found = check_attr(cwd, ("filter",), paths, commit)
    return {path for path, values in found.items() if values.get("filter") == "lfs"}


def check_attr(cwd: Path, names: tuple[str, ...], paths: list[str], commit: str | None) -> dict[str, dict[str, str]]:
    """path -> {attribute: value} for ``names`` (``git check-attr``: ``set``, ``unset``, ``unspecified`` or
    the value), as the work tree's attributes say (``commit`` None), or as ``commit``'s own ``.gitattributes``
    do (read through a throwaway index before Git 2.40, which has no ``check-attr --source``). Read-only."""
    if not paths:
        return {}
    stdin = b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths)
    ask = ("check-attr", "-z", "--stdin", *names)
    if commit is None:
        out = run_git(cwd, *ask, input=stdin).stdout
    else:
        proc = run_git(cwd, "check-attr", f"--source={commit}", *ask[1:], input=stdin, check=False)
        if proc.returncode == 0:
            out = proc.stdout
        else:
            import tempfile  # noqa: PLC0415 - start-up: tempfile imports shutil; the retry path imports this module

            with tempfile.TemporaryDirectory(prefix="jobstate-attr-") as tmp:
                env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
                run_git(cwd, "read-tree", commit, env=env)
                out = run_git(cwd, "check-attr", "--cached", *ask[1:], input=stdin, env=env).stdout
    fields = out.split(b"\0")
    found: dict[str, dict[str, str]] = {}
    for i in range(0, len(fields) - 2, 3):
        path = fields[i].decode("utf-8", "surrogateescape")
        found.setdefault(path, {})[fields[i + 1].decode("ascii", "replace")] = fields[i + 2].decode(
            "utf-8", "surrogateescape"
        )
    return found
