"""git children that talk to a remote: bounded in time, unable to prompt, and read for what is known.

A scheduled job has nobody at a terminal. So every fetch and push:

- runs under a deadline, in a session of its own (no controlling terminal, so neither git nor ssh
  nor a credential helper can open ``/dev/tty``); when the deadline passes its whole process group
  is ended (SIGTERM, so git removes its lock files, then SIGKILL);
- cannot prompt: an empty ``GIT_ASKPASS`` makes git skip ``core.askPass`` and ``SSH_ASKPASS`` too
  and, with ``GIT_TERMINAL_PROMPT=0``, fail at once with "could not read Username";
  ``SSH_ASKPASS_REQUIRE=never`` and ssh's ``BatchMode`` do the same for ssh, ``GCM_INTERACTIVE=never``
  for Git Credential Manager. Non-interactive credential helpers, ``http.extraHeader`` and ssh keys
  or agents still work;
- gives up on a silent server by itself: curl's low-speed limit and ssh's connect and keep-alive
  timeouts, all derived from the deadline.

A push is traced (``GIT_TRACE_PACKET``) to tell a push that never left from one whose answer was
lost: after the update command was sent, only the server's report says whether it landed.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from jobstate.errors import RemoteOutcomeUnknown, RemoteUnavailable, UsageError
from jobstate.git.runner import first_error_line, git_env

if TYPE_CHECKING:
    import subprocess

    from jobstate.git.repo import GitRepo

# ssh keep-alives unanswered before ssh gives up: the interval is a third of the deadline
_ALIVE_COUNT = 3
# after SIGTERM, how long git gets to remove its lock files before SIGKILL
_TERM_GRACE = 1.0
# a packet trace line, as git writes it to stderr: "12:00:00.123456 pkt-line.c:80  packet: ..."
_TRACE = re.compile(r"^\d\d:\d\d:\d\d\.\d+ \S+:\d+ +packet: ")
# errors that prove nothing reached the server (the connection was never made)
_NOT_CONNECTED = (
    "Failed to connect",
    "Connection refused",
    "Could not resolve",
    "Couldn't connect",
    "No route to host",
)
# what git says when a credential was needed and none could be had without asking
_NO_CREDENTIALS = (
    "could not read Username",
    "could not read Password",
    "Authentication failed",
    "terminal prompts disabled",
    "Permission denied (publickey",
    "Host key verification failed",
    "returned error: 401",
    "returned error: 403",
)
_TIMEOUT_HINT = "check that the remote answers, or raise remote_timeout in jobstate.yaml (see docs/git-setups.md)"
# the server's compare-and-swap failed: another host moved the branch between our lease check and its update
_LOST_RACE = ("cannot lock ref", "failed to update ref", "stale info", "fetch first", "non-fast-forward")
_USERINFO = re.compile(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", re.IGNORECASE)
UNKNOWN = "outcome unknown: the change may be on the remote; run the same command again to find out"
CREDENTIALS_HINT = (
    "jobstate never prompts: give credentials through a non-interactive credential helper, "
    "http.extraHeader, or an ssh key or agent (see docs/git-setups.md)"
)


class Outcome(NamedTuple):
    """What one bounded git child did: its output with the trace removed, and whether time ran out."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    sent: bool  # a push's update command left for the server (traced); False for other commands
    timeout: float  # the deadline it ran under


def inert(text: str) -> str:
    """``text`` with every control or unprintable character escaped: what a server says is data."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def remote_reasons(stderr: str, limit: int = 5) -> str:
    """The server's own ``remote:`` lines (a hook's reason), escaped and joined on one line."""
    lines = [line[7:].strip() for line in stderr.splitlines() if line.startswith("remote:")]
    lines = [inert(line) for line in lines if line]
    if not lines:
        return ""
    quoted = " | ".join(lines[:limit]) + (" | ..." if len(lines) > limit else "")
    return f'; the server said: "{quoted[:400]}"'


def failure_line(stderr: str) -> str:
    """git's own line for what went wrong (never a ``remote:`` line), escaped, with a hint when a
    credential was missing."""
    own = [line.strip() for line in stderr.splitlines() if not line.startswith("remote:")]
    # ssh says why on a line of its own ("git@host: Permission denied (publickey)"), before git's fatal
    refused = next((line for line in own if any(marker in line for marker in _NO_CREDENTIALS)), None)
    if refused is not None:
        return f"{inert(refused)}; {CREDENTIALS_HINT}"
    return inert(first_error_line("\n".join(own)))


def never_connected(stderr: str) -> bool:
    """Whether git says the connection to the server was never made."""
    return any(marker in stderr for marker in _NOT_CONNECTED)


def ssh_command(configured: str | None, variant: str | None, deadline: float) -> str | None:
    """The ssh command for a network child: the user's own with jobstate's options added.

    The user's command is, as git picks it, ``$GIT_SSH_COMMAND``, else ``core.sshCommand``
    (``configured``), else ``$GIT_SSH``, else ``ssh``. The options are appended only when it is
    OpenSSH (its first word is ``ssh``, and no ``ssh.variant`` says otherwise): a wrapper or plink
    is left alone (None: git runs it as configured), bounded by the deadline only. ssh takes the
    first value it is given for an option, so options already in the user's command win over ours,
    and ours win over ``~/.ssh/config``.
    """
    import shlex  # noqa: PLC0415 - start-up: only a command that talks to a remote needs it

    base = os.environ.get("GIT_SSH_COMMAND") or configured
    if not base:
        program = os.environ.get("GIT_SSH")
        base = shlex.quote(program) if program else "ssh"
    kind = os.environ.get("GIT_SSH_VARIANT") or variant
    if kind not in (None, "", "auto", "ssh"):
        return None
    try:
        words = shlex.split(base)
    except ValueError:
        return None
    if not words or Path(words[0]).name.removesuffix(".exe") != "ssh":
        return None
    seconds = max(1, math.ceil(deadline))
    alive = max(1, seconds // _ALIVE_COUNT)
    return (
        f"{base} -o BatchMode=yes -o ConnectTimeout={seconds} "
        f"-o ServerAliveInterval={alive} -o ServerAliveCountMax={_ALIVE_COUNT}"
    )


def network_env(deadline: float, ssh: str | None) -> dict[str, str]:
    """The variables that keep a network child from prompting and from waiting on a silent server."""
    env = {
        "GIT_TERMINAL_PROMPT": "0",
        # empty, not unset: git then asks neither core.askPass nor SSH_ASKPASS (prompt.c)
        "GIT_ASKPASS": "",
        "SSH_ASKPASS": "",
        "SSH_ASKPASS_REQUIRE": "never",
        "GCM_INTERACTIVE": "never",
        # a user's own limits win; ours end a transfer that has stalled for the whole deadline
        "GIT_HTTP_LOW_SPEED_LIMIT": os.environ.get("GIT_HTTP_LOW_SPEED_LIMIT", "1"),
        "GIT_HTTP_LOW_SPEED_TIME": os.environ.get("GIT_HTTP_LOW_SPEED_TIME", str(max(1, math.ceil(deadline)))),
    }
    if ssh is not None:
        env["GIT_SSH_COMMAND"] = ssh
    return env


def _end_group(proc: subprocess.Popen[bytes]) -> None:
    """End the child's whole process group: SIGTERM (git removes its lock files), then SIGKILL for
    whatever is left in it (an askpass or ssh that ignores SIGTERM)."""
    import signal  # noqa: PLC0415 - start-up: only a command that talks to a remote needs it
    import subprocess  # noqa: PLC0415 - start-up: a lock-free retry starts no process

    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    with suppress(subprocess.TimeoutExpired):
        proc.wait(_TERM_GRACE)
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run_bounded(
    cwd: Path, *args: str, deadline: float, env: Mapping[str, str], trace_push_ref: str | None = None
) -> Outcome:
    """Run ``git ARGS`` in a session of its own, ended when ``deadline`` seconds pass.

    With ``trace_push_ref``, the push is traced and ``sent`` says whether its update command for
    that ref left for the server.
    """
    import subprocess  # noqa: PLC0415 - start-up: a lock-free retry starts no process

    extra = dict(env)
    if trace_push_ref is not None:
        extra["GIT_TRACE_PACKET"] = "2"
    try:
        proc = subprocess.Popen(
            ["git", *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=git_env(extra),
            start_new_session=True,
        )
    except FileNotFoundError:
        raise UsageError("git is not installed or not on PATH") from None
    timed_out = False
    try:
        out, err = proc.communicate(timeout=deadline)
    except subprocess.TimeoutExpired:
        timed_out = True
        _end_group(proc)
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # a process that left the group holds the pipes
            out, err = b"", b""
    except BaseException:
        _end_group(proc)  # interrupted: leave no git behind that outlives jobstate
        raise
    text = err.decode("utf-8", "replace")
    trace = [line for line in text.splitlines() if _TRACE.match(line)]
    stderr = "\n".join(line for line in text.splitlines() if not _TRACE.match(line))
    sent = False
    if trace_push_ref is not None:
        update = re.compile(
            r"packet: +[\w-]*> [0-9a-f]{40,64} [0-9a-f]{40,64} " + re.escape(trace_push_ref) + r"(\\0|\s|$)"
        )
        sent = any(update.search(line) for line in trace)
    return Outcome(proc.returncode, out.decode("utf-8", "replace"), stderr, timed_out, sent, deadline)


def without_credentials(url: str) -> str:
    """A remote URL fit for a message: user and password (a token) removed."""
    return _USERINFO.sub(r"\1", url)


def fetch_failed(outcome: Outcome, where: str, branch: str) -> bool:
    """Read a fetch that did not succeed: True when the remote has no such branch; otherwise
    RemoteUnavailable (exit 3: a fetch changes nothing that counts)."""
    if outcome.timed_out:
        raise RemoteUnavailable(
            f"fetch of {branch} from {where} timed out after {outcome.timeout:g} s; nothing was changed: "
            f"{_TIMEOUT_HINT}"
        )
    if outcome.returncode == 0:
        return False
    if "couldn't find remote ref" in outcome.stderr:
        return True
    raise RemoteUnavailable(
        f"cannot fetch {branch} from {where}: {failure_line(outcome.stderr)}{remote_reasons(outcome.stderr)}; "
        "nothing was changed"
    )


def push_landed(outcome: Outcome, where: str, commit: str, ref: str) -> bool:
    """Read a push (``git push --porcelain``): True when it landed, False when another host moved the
    branch first (decide again); a refusal or a push that never left is RemoteUnavailable (exit 3,
    the server's reason quoted); one that left but whose answer was lost is RemoteOutcomeUnknown."""
    if outcome.returncode == 0 and not outcome.timed_out:
        return True
    status = next((line for line in outcome.stdout.splitlines() if f":{ref}\t" in line), "")
    # another host moved the branch first (locally known, or the server's compare-and-swap): decide again
    if "[rejected]" in status or any(marker in status for marker in _LOST_RACE):
        return False
    unknown = f"{UNKNOWN} (the push of {commit[:12]} to {where} was sent"
    if outcome.timed_out:
        if outcome.sent:
            raise RemoteOutcomeUnknown(f"{unknown}, then timed out after {outcome.timeout:g} s)")
        raise RemoteUnavailable(
            f"push to {where} timed out after {outcome.timeout:g} s before the change was sent; nothing was changed: "
            f"{_TIMEOUT_HINT}"
        )
    if status and "[remote failure]" not in status:
        raise RemoteUnavailable(
            f"{where} refused the push of {commit[:12]}: {inert(status.split(chr(9))[-1])}"
            f"{remote_reasons(outcome.stderr)}; nothing was changed"
        )
    if outcome.sent and not never_connected(outcome.stderr):
        raise RemoteOutcomeUnknown(f"{unknown}, but its answer was lost: {failure_line(outcome.stderr)})")
    raise RemoteUnavailable(
        f"cannot push to {where}: {failure_line(outcome.stderr)}{remote_reasons(outcome.stderr)}; nothing was changed"
    )


def _remote_child(
    git: GitRepo, remote: str, *args: str, timeout: float, push_ref: str | None = None
) -> tuple[Outcome, str]:
    """Run a git child that talks to ``remote``, bounded by ``timeout``; its outcome, and the remote
    as messages name it."""
    url, configured, variant = git.remote_config(remote)
    ssh = ssh_command(configured, variant, timeout)
    env = network_env(timeout, ssh)
    started = time.time()
    outcome = run_bounded(git.root, *args, deadline=timeout, env=env, trace_push_ref=push_ref)
    if outcome.timed_out:
        _remove_killed_tracking_locks(git, remote, started)
    return outcome, f"{remote} ({inert(without_credentials(url))})"


def _remove_killed_tracking_locks(git: GitRepo, remote: str, since: float) -> None:
    """Remove the remote-tracking ref locks that the git child we just ended left (made after it started)."""
    if git.reftable:
        return
    for lock in (git.common_dir / "refs" / "remotes" / remote).glob("**/*.lock"):
        with suppress(OSError):
            if lock.stat().st_mtime >= since - 1:
                lock.unlink()


def fetch(git: GitRepo, remote: str, ref: str, *, timeout: float) -> str | None:
    """Fetch ``ref`` from ``remote`` within ``timeout`` seconds; its tip, or None when the remote
    has no such branch."""
    branch = ref.removeprefix("refs/heads/")
    tracking = f"refs/remotes/{remote}/{branch}"
    outcome, where = _remote_child(
        git, remote, "fetch", "--quiet", "--no-tags", remote, f"+{ref}:{tracking}", timeout=timeout
    )
    if fetch_failed(outcome, where, branch):
        return None
    return git.resolve_ref(tracking)


def push(git: GitRepo, remote: str, commit: str, ref: str, expect: str | None = None, *, timeout: float) -> bool:
    """Push ``commit`` as ``ref`` on ``remote`` within ``timeout`` seconds; False when rejected as
    not a fast-forward.

    With ``expect`` (``commit``'s parent), the push is a compare-and-swap: the
    remote takes it only while its ``ref`` is exactly ``expect``, so the update
    is always a fast-forward and a remote that went backwards is noticed too.
    A push whose update left for the server but whose answer never came (a lost
    connection, the deadline) is RemoteOutcomeUnknown: it may have landed.
    """
    lease = [f"--force-with-lease={ref}:{expect}"] if expect else []
    outcome, where = _remote_child(
        git, remote, "push", "--porcelain", "--quiet", *lease, remote, f"{commit}:{ref}", timeout=timeout, push_ref=ref
    )
    return push_landed(outcome, where, commit, ref)
