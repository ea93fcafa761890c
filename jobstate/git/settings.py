"""What one ``git var -l`` says about committing: the identities, ``commit.gpgsign`` and the gc thresholds.

One process per command instead of three (``git config commit.gpgsign``, ``git var GIT_AUTHOR_IDENT``,
``git var GIT_COMMITTER_IDENT``; issue 27), with the configuration resolved by git itself (includes,
``includeIf``, the global and system files).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from jobstate.errors import UsageError
from jobstate.git.runner import run_git


class CommitSettings(NamedTuple):
    """What a commit of this repository is made with."""

    author: bytes  # "Name <email>", without the time
    committer: bytes
    signs: bool  # commit.gpgsign
    gc_auto: int  # gc.auto: loose objects before git gc --auto packs
    gc_pack_limit: int  # gc.autoPackLimit
    attributes_file: Path  # core.attributesFile, or git's default place for it


def _git_bool(key: str, value: str | None) -> bool:
    """A boolean configuration value as git reads it (a key without ``=`` is true; an empty value false)."""
    if value is None:
        return True
    text = value.strip().lower()
    if text in ("true", "yes", "on"):
        return True
    if text in ("false", "no", "off", ""):
        return False
    try:
        return int(text, 0) != 0
    except ValueError:
        raise UsageError(f"git config {key} is not a boolean ({value!r}): set it to true or false") from None


def _git_int(value: str | None, default: int) -> int:
    """An integer configuration value (``k``, ``m``, ``g`` suffixes as git reads them); ``default`` if unset
    or unreadable (git then refuses it itself when it runs)."""
    if not value:
        return default
    text = value.strip().lower()
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(text[-1:], 1)
    try:
        return int(text[:-1] if scale > 1 else text) * scale
    except ValueError:
        return default


def read_commit_settings(root: Path) -> CommitSettings:
    """The settings from ``git var -l``.

    ``git var -l`` reports identities leniently (a guessed ``user@host.(none)`` e-mail, an empty name); when
    one looks like that, or ``user.useConfigOnly`` is set, git's strict answer decides, as ``git commit``'s."""
    proc = run_git(root, "var", "-l", check=False)
    settings: dict[str, str | None] = {}
    for line in proc.stdout.decode("utf-8", "surrogateescape").splitlines():
        key, eq, value = line.partition("=")
        settings[key if key.startswith("GIT_") else key.lower()] = value if eq else None
    idents = []
    for var in ("GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"):
        ident = (settings.get(var) or "").encode("utf-8", "surrogateescape").rsplit(b" ", 2)[0]
        name = ident.split(b" <", 1)[0].strip()
        doubtful = not name or b".(none)>" in ident or settings.get("user.useconfigonly") is not None
        if proc.returncode != 0 or doubtful:
            strict = run_git(root, "var", var, check=False)
            if strict.returncode != 0:
                raise UsageError(
                    "git has no identity to commit with: set it with "
                    "git config user.name NAME and git config user.email EMAIL"
                )
            ident = strict.stdout.strip().rsplit(b" ", 2)[0]
        idents.append(ident)
    return CommitSettings(
        idents[0],
        idents[1],
        _git_bool("commit.gpgsign", settings.get("commit.gpgsign", "false")),
        _git_int(settings.get("gc.auto"), 6700),
        _git_int(settings.get("gc.autopacklimit"), 50),
        attributes_file(settings.get("core.attributesfile")),
    )


def attributes_file(configured: str | None) -> Path:
    """Where git reads the user's own attributes (``core.attributesFile``, else the XDG default)."""
    if configured:
        return Path(os.path.expanduser(configured))
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(xdg) / "git" / "attributes"


def gc_due(objects: Path, loose_name_length: int, settings: CommitSettings) -> bool:
    """Whether ``git gc --auto`` would pack now, by git's own estimate (too_many_loose_objects and
    too_many_packs in git's builtin/gc.c): more loose objects in ``objects/17`` than ``gc.auto``/256, or
    more packs without a ``.keep`` than ``gc.autoPackLimit``. Read-only."""
    if settings.gc_auto <= 0:
        return False  # gc.auto 0 turns automatic packing off
    try:
        with os.scandir(objects / "17") as entries:
            loose = sum(1 for e in entries if len(e.name) == loose_name_length)
    except OSError:
        loose = 0
    if loose > -(-settings.gc_auto // 256):
        return True
    if settings.gc_pack_limit <= 0:
        return False
    try:
        names = set(os.listdir(objects / "pack"))
    except OSError:
        return False
    packs = [n for n in names if n.endswith(".pack") and n[:-5] + ".keep" not in names]
    return len(packs) > settings.gc_pack_limit
