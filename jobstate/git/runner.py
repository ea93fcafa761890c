"""How jobstate starts git: no shell, no prompts, and a fixed policy for inherited ``GIT_*`` variables.

Called from a Git hook or ``git rebase --exec``, the environment carries
``GIT_DIR``, ``GIT_INDEX_FILE`` and friends that point at the repository the
hook runs for. jobstate always names its repository itself (the work tree it
was given), so every variable that would redirect git to another repository,
index or object store is dropped; identity, configuration and transport
variables (``GIT_AUTHOR_NAME``, ``GIT_CONFIG_*``, ``GIT_SSH_COMMAND``) are kept. A child that
talks to a remote gets more (no prompts of any kind, a deadline): see jobstate.git.network.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

from jobstate.errors import GitError, UsageError

if TYPE_CHECKING:
    import subprocess

# variables that would point git at another repository, index or object store
REDIRECTING = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
)


# for commands that only read: git then takes no optional lock (not even git status's index.lock)
READ_ONLY_ENV = {"GIT_OPTIONAL_LOCKS": "0"}


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment every git child gets (see the module docstring)."""
    env = {k: v for k, v in os.environ.items() if k not in REDIRECTING}
    env["GIT_TERMINAL_PROMPT"] = "0"
    if extra:
        env.update(extra)
    return env


def first_error_line(text: str) -> str:
    """The line of git's output that says what went wrong."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("fatal:", "error:", "!")):
            return line
    return lines[-1] if lines else "no output"


_DUBIOUS = re.compile(r"detected dubious ownership in repository at '(.*)'")


def refuse_dubious(stderr: bytes) -> None:
    """Turn git's ``safe.directory`` refusal into a UsageError that says how to allow the repository."""
    found = _DUBIOUS.search(stderr.decode("utf-8", "replace"))
    if found:
        raise UsageError(
            f"git refuses {found.group(1)}: it is owned by another user; if you trust it, allow it with: "
            f"git config --global --add safe.directory {found.group(1)}"
        )


def run_git(
    cwd: Path,
    *args: str,
    input: bytes | None = None,  # noqa: A002 - mirrors subprocess
    env: Mapping[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``git ARGS`` in ``cwd`` without a shell; with ``check``, a failure is a GitError."""
    import subprocess  # noqa: PLC0415 - start-up: a lock-free retry starts no process (subprocess costs 3 ms)

    try:
        proc = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True, env=git_env(env), check=False)
    except FileNotFoundError:
        raise UsageError("git is not installed or not on PATH") from None
    if proc.returncode != 0:
        refuse_dubious(proc.stderr)
    if check and proc.returncode != 0:
        raise GitError(f"git {args[0]} failed in {cwd}: {first_error_line(proc.stderr.decode('utf-8', 'replace'))}")
    return proc


def run_git_piped(cwd: Path, source: tuple[str, ...], *args: str) -> bytes:
    """The output of ``git SOURCE | git ARGS``, streamed between the two (a blob too large to hold); a
    failure of either is a GitError."""
    import subprocess  # noqa: PLC0415 - start-up: a lock-free retry starts no process

    try:
        first = subprocess.Popen(
            ["git", *source], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=git_env()
        )
    except FileNotFoundError:
        raise UsageError("git is not installed or not on PATH") from None
    assert first.stdout is not None
    with first:
        proc = subprocess.run(
            ["git", *args], cwd=cwd, stdin=first.stdout, capture_output=True, env=git_env(), check=False
        )
        first.stdout.close()
    if first.returncode != 0 or proc.returncode != 0:
        refuse_dubious(proc.stderr)
        raise GitError(f"git {args[0]} failed in {cwd}: {first_error_line(proc.stderr.decode('utf-8', 'replace'))}")
    return proc.stdout


def popen_git(cwd: Path, *args: str, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """A long-running git child with pipes for stdin and stdout (``cat-file --batch``)."""
    import subprocess  # noqa: PLC0415 - start-up: a lock-free retry starts no process

    try:
        return subprocess.Popen(
            ["git", *args], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=git_env(env)
        )
    except FileNotFoundError:
        raise UsageError("git is not installed or not on PATH") from None


def spawn_detached_git(cwd: Path, *args: str) -> None:
    """Start ``git ARGS`` detached, its output discarded; a failure to start is ignored.

    Through sh with ``&``: git is nobody's child then, so nothing is left to reap
    or to wait for, and it holds none of our descriptors (the jobstate lock).
    """
    import shlex  # noqa: PLC0415 - start-up: housekeeping after a commit only
    import subprocess  # noqa: PLC0415 - start-up: a lock-free retry starts no process

    line = " ".join(shlex.quote(a) for a in ("git", *args))
    with suppress(OSError):  # housekeeping only: the command it follows has already succeeded
        subprocess.run(
            ["sh", "-c", f"{line} </dev/null >/dev/null 2>&1 &"],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=git_env(),
            check=False,
        )


def argv_parts(paths: tuple[str, ...], limit: int = 64 * 1024) -> list[tuple[str, ...]]:
    """Pathspecs in parts a command line can hold, at most ``limit`` bytes each (a migration names every
    episode: 100,000 paths are past the system's limit); no paths stays one part, meaning everything."""
    parts: list[tuple[str, ...]] = []
    part: list[str] = []
    size = 0
    for path in paths:
        length = len(path.encode("utf-8", "surrogateescape")) + 1
        if part and size + length > limit:
            parts.append(tuple(part))
            part, size = [], 0
        part.append(path)
        size += length
    return [*parts, tuple(part)]  # no paths: one empty part
