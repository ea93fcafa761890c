"""Signed commits, made and checked as ``git commit`` and ``git verify-commit`` do.

git's plumbing (``commit-tree``) ignores ``commit.gpgsign``: only porcelain
honours it. So jobstate reads the setting itself and, when it asks for
signing, has git build the commit with ``commit-tree -S``: git then signs with
the configured program and key (``gpg.format`` openpgp, ssh or x509,
``user.signingkey``), exactly as ``git commit`` would.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from jobstate.errors import UsageError
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


def refuse_shallow(cwd: Path) -> None:
    """A shallow clone hides the commits before its cut: a signature check there proves nothing."""
    proc = run_git(cwd, "rev-parse", "--is-shallow-repository", env=READ_ONLY_ENV)
    if proc.stdout.decode("ascii", "replace").strip() == "true":
        raise UsageError(
            f"{cwd} is a shallow clone: its history is cut, so signatures cannot be checked; fetch the history "
            "with: git fetch --unshallow (actions/checkout: fetch-depth: 0)"
        )


def _trust(allowed_signers: Path | None) -> tuple[str, ...]:
    # an explicit file replaces the repository's: the pull request's config is not the reviewer's trust
    return () if allowed_signers is None else ("-c", f"gpg.ssh.allowedSignersFile={allowed_signers}")


class CommitSignature(NamedTuple):
    """One commit and its signature as git checks it (``%G?``, and ``%GS``: the signer)."""

    sha: str
    parents: tuple[str, ...]
    status: str
    signer: str


def signatures(
    cwd: Path, tip: str, base: str | None, paths: tuple[str, ...], *, allowed_signers: Path | None = None
) -> list[CommitSignature]:
    """Every commit that changed ``paths`` (since ``base``), merges included, oldest first, with its parents
    and signature.

    ``G`` is a good signature from a trusted key: for ssh, one whose principal the allowed-signers
    file lists (the signer is that principal); for openpgp, a key the keyring trusts. This is a
    read-only operation; it refuses in a shallow clone.
    """
    refuse_shallow(cwd)
    rng = [tip] + ([f"^{base}"] if base else [])
    proc = run_git(
        cwd,
        *_trust(allowed_signers),
        "log",
        "--full-history",
        "--reverse",
        "--format=%H%x09%P%x09%G?%x09%GS",
        *rng,
        "--",
        *paths,
        env=READ_ONLY_ENV,
    )
    out = []
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        sha, parents, status, signer = [*line.split("\t", 3), "", "", ""][:4]
        out.append(CommitSignature(sha, tuple(parents.split()), status, signer.strip()))
    return out


def signature_problems(
    cwd: Path, tip: str, base: str | None, paths: tuple[str, ...], *, allowed_signers: Path | None = None
) -> list[tuple[str, str]]:
    """(commit, problem) for every commit that changed ``paths`` (since ``base``) without a good
    signature (``%G?`` = G) from a trusted key. This is a read-only operation."""
    found = signatures(cwd, tip, base, paths, allowed_signers=allowed_signers)
    return [(c.sha, _STATUS.get(c.status, f"does not verify ({c.status})")) for c in found if c.status != "G"]
