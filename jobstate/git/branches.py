"""Which branches, local or remote-tracking, hold given paths: asked only on the way to a refusal or an init."""

from __future__ import annotations

from pathlib import Path

from jobstate.git.runner import run_git


def branches_holding(root: Path, paths: tuple[str, ...], *, besides: str | None = None) -> list[str]:
    """Full names (``refs/heads/trunk``, ``refs/remotes/origin/trunk``) of the branches whose tip has every
    one of ``paths``, ``besides`` left out. Two git processes, whatever the number of branches."""
    listed = run_git(root, "for-each-ref", "--format=%(refname)", "refs/heads", "refs/remotes", check=False)
    refs = [
        ref
        for ref in listed.stdout.decode("utf-8", "surrogateescape").splitlines()
        if ref and ref != besides and not ref.endswith("/HEAD")  # origin/HEAD names another branch
    ]
    if not refs:
        return []
    # one line in, one line out: "<ref>:<path> missing" or "<sha> <type> <size>"
    asked = "".join(f"{ref}:{path}\n" for ref in refs for path in paths).encode("utf-8", "surrogateescape")
    answers = run_git(root, "cat-file", "--batch-check", input=asked, check=False).stdout.splitlines()
    if len(answers) != len(refs) * len(paths):
        return []
    holding = []
    for i, ref in enumerate(refs):
        if all(not line.endswith(b" missing") for line in answers[i * len(paths) : (i + 1) * len(paths)]):
            holding.append(ref)
    return holding
