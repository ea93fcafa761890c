"""Signed commits, made and checked as ``git commit`` and ``git verify-commit`` do.

git's plumbing (``commit-tree``) ignores ``commit.gpgsign``: only porcelain
honours it. So jobstate reads the setting itself and, when it asks for
signing, has git build the commit with ``commit-tree -S``: git then signs with
the configured program and key (``gpg.format`` openpgp, ssh or x509,
``user.signingkey``), exactly as ``git commit`` would.
"""

from __future__ import annotations

from pathlib import Path

from jobstate.errors import UsageError
from jobstate.git.repoconfig import config_value
from jobstate.git.runner import READ_ONLY_ENV, first_error_line, run_git

# what ``%G?`` says when a signature is not good, in words
_STATUS = {
    "N": "is not signed",
    "B": "has a bad signature",
    "U": "is signed by a key that is not trusted (not in gpg.ssh.allowedSignersFile or the keyring's trust)",
    "X": "has an expired signature",
    "Y": "is signed by an expired key",
    "R": "is signed by a revoked key",
    "E": "has a signature that cannot be checked (missing key or signing program)",
}


def signing_requested(cwd: Path) -> bool:
    """Whether the repository's configuration asks for signed commits (``commit.gpgsign``)."""
    return config_value(cwd, "commit.gpgsign", kind="bool") == "true"


def signed_commit(cwd: Path, tree: str, parent: str | None, message: str) -> str:
    """Have git write a signed commit of ``tree`` on ``parent``; a signing failure is a UsageError."""
    args = ["commit-tree", "-S", tree] + (["-p", parent] if parent else [])
    proc = run_git(cwd, *args, input=message.rstrip("\n").encode("utf-8") + b"\n", check=False)
    if proc.returncode != 0:
        why = first_error_line(proc.stderr.decode("utf-8", "replace"))
        raise UsageError(
            f"cannot sign the commit as commit.gpgsign asks ({why}); nothing was changed: fix the signing setup "
            "(gpg.format, user.signingkey, the agent) or set commit.gpgsign to false"
        )
    return proc.stdout.decode("ascii").strip()


def signature_problems(cwd: Path, tip: str, base: str | None, paths: tuple[str, ...]) -> list[tuple[str, str]]:
    """(commit, problem) for every commit that changed ``paths`` (since ``base``) and does not verify.

    A commit verifies when ``git verify-commit`` accepts it. This is a read-only operation.
    """
    rng = [tip] + ([f"^{base}"] if base else [])
    proc = run_git(cwd, "log", "--full-history", "--format=%H %G?", *rng, "--", *paths, env=READ_ONLY_ENV)
    problems = []
    for line in proc.stdout.decode("ascii", "replace").splitlines():
        sha, _, status = line.partition(" ")
        if status == "G":
            continue
        if status != "N":  # git's own verdict decides, with its trust settings
            check = run_git(cwd, "verify-commit", sha, env=READ_ONLY_ENV, check=False)
            if check.returncode == 0:
                continue
        problems.append((sha, _STATUS.get(status, f"does not verify ({status})")))
    return problems
