"""A repository's configuration: the format extensions read from the file, everything else through git.

The object format and the ref storage are fixed when the repository is
created and live in the ``[extensions]`` section of the repository's own
config file (git reads them from there only, before any include). Reading
that file directly costs no process, which keeps the lock-free retry fast.
Everything else (signing settings, which may come from includes, the global
or the system file) is asked of ``git config``, so it means what it means to git.
"""

from __future__ import annotations

from pathlib import Path

from jobstate.errors import UsageError
from jobstate.git.objects import FORMATS, SHA1, ObjectFormat
from jobstate.git.runner import run_git


def read_extensions(config: Path) -> dict[str, str]:
    """The ``[extensions]`` settings of one config file, keys lower-cased (empty when it has none)."""
    try:
        text = config.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return {}
    out: dict[str, str] = {}
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line[1 : line.find("]")].strip().lower() if "]" in line else ""
            line = line[line.find("]") + 1 :].strip() if "]" in line else ""
            if not line:
                continue
        if section != "extensions":
            continue
        key, _, value = line.partition("=")
        value = value.split("#", 1)[0].split(";", 1)[0].strip().strip('"')
        out[key.strip().lower()] = value.lower()
    return out


def object_format(extensions: dict[str, str]) -> ObjectFormat:
    """The object format a repository with these extensions uses."""
    name = extensions.get("objectformat", SHA1.name) or SHA1.name
    fmt = FORMATS.get(name)
    if fmt is None:
        raise UsageError(f"the repository uses object format {name!r}, which jobstate does not know (sha1, sha256)")
    return fmt


def ref_storage(extensions: dict[str, str]) -> str:
    """``files`` or ``reftable``: how the repository stores its refs."""
    return extensions.get("refstorage", "files") or "files"


def config_value(cwd: Path, key: str, *, kind: str | None = None) -> str | None:
    """``git config --get KEY`` as git resolves it (includes, global and system files); None when unset."""
    args = ["config", "--get"] + ([f"--type={kind}"] if kind else []) + [key]
    proc = run_git(cwd, *args, check=False)
    if proc.returncode == 1:
        return None
    if proc.returncode != 0:
        raise UsageError(f"git config {key} in {cwd} is invalid: {proc.stderr.decode('utf-8', 'replace').strip()}")
    return proc.stdout.decode("utf-8", "replace").strip()


def converted_by_git(cwd: Path, path: str, data: bytes, blob: str) -> bool:
    """Whether ``data`` (a work-tree file) is ``blob`` once git converts it as ``git add`` would
    (core.autocrlf, core.eol, text, eol and ident attributes): a difference git does not see."""
    proc = run_git(cwd, "hash-object", "--stdin", f"--path={path}", input=data, check=False)
    return proc.returncode == 0 and proc.stdout.decode("ascii", "replace").strip() == blob
