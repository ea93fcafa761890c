"""The Git commands jobstate suggests in its messages: shell-quoted, and each one does what the
message says in the situation it names (tests/test_advice.py runs them). Pure: values in, text out.
"""

from __future__ import annotations

import shlex


def restore(path: str, code: str = " M") -> str:
    """The command that puts ``path`` back as HEAD has it, for its ``git status --porcelain`` XY code.

    A new file that is only staged (``A``) is unstaged and kept (``git checkout`` would not unstage
    it); anything else (changed, deleted, staged or not, a whole directory) is checked out from HEAD,
    which also works when the deletion was staged (``git checkout -- PATH`` alone would not).
    """
    if code.startswith("A"):
        return f"git restore --staged -- {shlex.quote(path)}"
    return f"git checkout HEAD -- {shlex.quote(path)}"


def commit_or_restore(path: str, code: str = " M") -> str:
    """The advice for an uncommitted change where jobstate reads committed state."""
    if code.startswith("A"):
        return f"commit it, or unstage it with: {restore(path, code)}"
    if code == "??":
        return f"commit it, or move it out of the repository ({shlex.quote(path)} is untracked)"
    return f"commit it, or restore it with: {restore(path, code)}"


# put back as HEAD has them: the index must forget them first, or checkout skips files it thinks unchanged
UNCONVERT = (
    "git rm -rq --cached jobstate.yaml state history && "
    "git -c core.autocrlf=false -c core.eol=lf checkout HEAD -- jobstate.yaml state history"
)


def converted(path: str) -> str:
    """The advice for a file that differs from HEAD only by git's end-of-line conversion in this clone."""
    return (
        f"{shlex.quote(path)} differs from HEAD only by git's end-of-line conversion in this clone (core.autocrlf, "
        "core.eol or a text attribute), and jobstate compares its files byte for byte: put them back unconverted "
        f"with: {UNCONVERT}; then run jobstate init, which commits .gitattributes lines that keep them "
        "unconverted in every clone (docs/git-setups.md#line-endings-core-autocrlf-and-attributes)"
    )


def branch_name(ref: str) -> str:
    """How git shows a branch: ``trunk`` for refs/heads/trunk, ``origin/trunk`` for refs/remotes/origin/trunk."""
    return ref.removeprefix("refs/heads/").removeprefix("refs/remotes/")


def switch_to(ref: str) -> str:
    """The command that checks out branch ``ref`` (a remote-tracking one becomes a local branch tracking it)."""
    local = ref.removeprefix("refs/heads/")
    if ref.startswith("refs/remotes/"):
        local = ref.removeprefix("refs/remotes/").split("/", 1)[-1]
    return f"git switch {shlex.quote(local)}"


def state_elsewhere(where: str, refs: list[str], current: str | None = None) -> str:
    """The advice when ``where`` has no state but other branches do: check one out (or, when it is this
    branch's own remote-tracking branch, bring it in), never start a second."""
    here = None if current is None else current.removeprefix("refs/heads/")
    for ref in refs:
        if here is not None and ref.startswith("refs/remotes/") and ref.split("/", 3)[-1] == here:
            return (
                f"{where} has no state/ directory, but {branch_name(ref)} holds a jobstate state this branch does "
                f"not have yet: bring it in with git merge --ff-only {shlex.quote(branch_name(ref))} (or git pull), "
                "then run the command again"
            )
    names = [branch_name(ref) for ref in refs]
    more = f" (also {', '.join(names[1:4])}{' and more' if len(names) > 4 else ''})" if len(names) > 1 else ""
    return (
        f"{where} has no state/ directory, but branch {names[0]}{more} holds a jobstate state: check it out "
        f"with {switch_to(refs[0])}, then run the command again"
    )
