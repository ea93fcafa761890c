"""The one error root of jobstate and the one table of exit codes.

Every failure a user can cause or meet is a ``JobstateError`` whose class says which exit code
the CLI returns. ``EXIT_TABLE`` below is the table, as data: ``jobstate --help`` prints it and
docs/exit-codes.md is generated from it (by ``REGENERATE`` below; a test compares them).
One kind of failure gets one code in every command (tests/test_exit_codes.py runs each kind
through every command that can meet it).
"""

from __future__ import annotations

from typing import Any, NamedTuple

OK = 0
VERIFY_PROBLEMS = 1
USAGE = 2
LOCK_OR_REMOTE = 3
ALLOCATION_CONFLICT = 4
EPISODE_UNKNOWN = 5
SUBMISSION_UNKNOWN = 6
STATE_INVALID = 7
BUDGET_EXCEEDED = 8
COMMAND_FAILED = 9
REMOTE_OUTCOME_UNKNOWN = 10
EPISODE_COMPLETED = 11
INTERNAL = 70  # EX_SOFTWARE: a bug in jobstate, reported in one line
INTERRUPTED = 130  # SIGINT, as shells report it
STDOUT_CLOSED = 141  # 128 + SIGPIPE, what a shell shows for git ... | head


class ExitCode(NamedTuple):
    """One row of the table: the code, what it means in one line, and when a command gives it."""

    code: int
    meaning: str
    when: str


EXIT_TABLE: tuple[ExitCode, ...] = (
    ExitCode(
        OK,
        "ok",
        "done; also a repeat of what already landed: the step already completed, the same decision "
        "(approve, reject, resolve, supersede) already recorded, the episode already completed",
    ),
    ExitCode(
        VERIFY_PROBLEMS,
        "verify found problems",
        "verify (and diff --strict) found state that breaks a rule; migrate --check found legacy fields "
        "no command reads",
    ),
    ExitCode(
        USAGE,
        "usage or bad input",
        "a malformed option, environment variable, key, period, time, amount or episode ID (control characters, "
        "nan, out of range, a calendar edge); not a Git repository or not initialised (jobstate init), or a "
        "shallow clone (its history is cut: git fetch --unshallow); dirty "
        "state: uncommitted, staged or untracked files where jobstate must read committed state (in state/ too), "
        "or a committed file that CMD changed without reporting it (its step is recorded); a result file "
        "from CMD that jobstate refuses (when CMD itself succeeded); a decision the state does not allow "
        "(complete before approval, resolve a step that is not unknown, run a step of an approved episode)",
    ),
    ExitCode(
        LOCK_OR_REMOTE,
        "busy: a lock, a remote, or a step that runs",
        "jobstate's lock, a step's lock or git's index.lock not acquired within the timeout; a remote that "
        "cannot be reached, refuses the push or was rewritten; a step of the episode runs now, or is open at "
        "the vendor (accepted, not collected yet) when approve, complete or retire needs it closed: "
        "run the step again to collect it, then retry",
    ),
    ExitCode(
        ALLOCATION_CONFLICT,
        "conflict with what is recorded",
        "an allocation key in another period, in several episodes, or of a retired episode; a charge "
        "reported again with another amount or currency; a paid step asked to run a changed request; "
        "a change the record model refuses",
    ),
    ExitCode(EPISODE_UNKNOWN, "episode unknown", "well formed, but not allocated or not committed"),
    ExitCode(
        SUBMISSION_UNKNOWN,
        "submission state unknown",
        "an earlier attempt's acceptance by the vendor is not recorded: settle it with jobstate resolve",
    ),
    ExitCode(
        STATE_INVALID,
        "state on disk invalid",
        "committed state cannot be read: malformed YAML (jobstate.yaml included), an unknown schema, a name "
        "that is not its episode_id, a committed file in state/ that is not an episode; diff and report list "
        "unreadable files and exit 0 (verify is the check)",
    ),
    ExitCode(
        BUDGET_EXCEEDED,
        "budget exceeded",
        "a paid step's --max-cost does not fit in its period's budget; nothing ran",
    ),
    ExitCode(
        COMMAND_FAILED,
        "the command run by jobstate run failed",
        "CMD exited non-zero or was killed (its own code, 128+N for signal N, is on stderr), or could not be "
        "started (said as 127: not found, 126: not executable); also when CMD failed and its result file was "
        "refused as well (both are said)",
    ),
    ExitCode(
        REMOTE_OUTCOME_UNKNOWN,
        "outcome unknown: a push may be on the remote",
        "the push's answer was lost; run the same command again: the next command fetches and settles it",
    ),
    ExitCode(
        EPISODE_COMPLETED,
        "episode completed: nothing more can be paid or decided",
        "run, resolve or approve on an episode whose history/ record exists (except a repeat of what "
        "already landed: 0)",
    ),
    ExitCode(INTERNAL, "internal error: a bug in jobstate", "said in one line on stderr; please report it"),
    ExitCode(INTERRUPTED, "interrupted (Ctrl-C)", "SIGINT; a committing command is recovered by the next one"),
    ExitCode(
        STDOUT_CLOSED,
        "stdout closed early",
        "the reader went away (jobstate list | head): the output stops quietly, with no error line, "
        "as git does (a shell reports git's death by SIGPIPE as 141 too); stdout closed from the start "
        "(>&-: said, and nothing is done) or refusing the answer (a full disk: said, and what the command "
        "committed stays committed: the same command again answers it)",
    ),
)
EXIT_CODES: dict[int, str] = {row.code: row.meaning for row in EXIT_TABLE}


REGENERATE = "python -c 'import jobstate.errors as e; print(e.markdown_table(), end=\"\")' > docs/exit-codes.md"


def help_table() -> str:
    """The table as ``jobstate --help`` ends: one line per code."""
    return "\n".join(f"  {row.code:>3}  {row.meaning}" for row in EXIT_TABLE)


def markdown_table() -> str:
    """docs/exit-codes.md, generated from EXIT_TABLE (a test checks the committed page equals it)."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    rows = "\n".join(f"| {row.code} | {cell(row.meaning)} | {cell(row.when)} |" for row in EXIT_TABLE)
    return (
        "# Exit codes\n\n"
        f"<!-- generated from jobstate/errors.py; do not edit: {REGENERATE} -->\n\n"
        "One kind of failure gets one code in every command; `tests/test_exit_codes.py` runs each kind "
        "through every command that can meet it. Every error is one line on stderr naming the file or "
        "value and what to do; never a traceback, and nothing is written.\n\n"
        "| code | meaning | when |\n"
        "|---|---|---|\n"
        f"{rows}\n"
    )


class JobstateError(Exception):
    """Base of every error jobstate raises on purpose; ``exit_code`` maps it for the CLI."""

    exit_code: int = USAGE


class UsageError(JobstateError, ValueError):
    """Bad input: a malformed key, week, path, option or a repository in the wrong shape."""

    exit_code = USAGE


class NotInitialized(UsageError):
    """Not a Git repository, or one that ``jobstate init`` has not set up (no state/)."""


class DirtyState(UsageError):
    """Uncommitted or untracked files where jobstate must read committed state or write."""


class LockTimeout(JobstateError, TimeoutError):
    """The jobstate lock was not acquired within the timeout."""

    exit_code = LOCK_OR_REMOTE

    def __init__(self, message: str, path: str, holder: dict[str, object] | None) -> None:
        super().__init__(message)
        self.path = path
        self.holder = holder


class StepRunning(JobstateError):
    """A step of the episode is running now (its step lock is held); its output is not recorded yet."""

    exit_code = LOCK_OR_REMOTE


class RemoteUnavailable(JobstateError, ConnectionError):
    """The shared Git remote could not be reached or kept rejecting our update."""

    exit_code = LOCK_OR_REMOTE


class RemoteRewritten(JobstateError):
    """The remote branch no longer contains the tip this clone last pushed or fetched (a force-push)."""

    exit_code = LOCK_OR_REMOTE


class RemoteOutcomeUnknown(JobstateError, ConnectionError):
    """A push left for the remote but its answer was lost: it may have landed. Never "nothing was changed"."""

    exit_code = REMOTE_OUTCOME_UNKNOWN


class ConcurrentUpdate(JobstateError, RuntimeError):
    """The branch kept moving under us (a compare-and-swap lost too many times)."""

    exit_code = LOCK_OR_REMOTE


class AllocationConflict(JobstateError):
    """A key already belongs to an episode of another period, or to several episodes."""

    exit_code = ALLOCATION_CONFLICT


class FingerprintMismatch(JobstateError):
    """A paid step was asked to run a request that differs from the one its attempt recorded."""

    exit_code = ALLOCATION_CONFLICT


class ChargeConflict(JobstateError):
    """A reported charge contradicts the recorded one with the same identity (another amount or currency)."""

    exit_code = ALLOCATION_CONFLICT


class ModelRefused(JobstateError):
    """A change the lifecycle model refuses (core.model): what no jobstate command may write."""

    exit_code = ALLOCATION_CONFLICT


class EpisodeUnknown(JobstateError, LookupError):
    """The episode does not exist, is malformed, or is not committed and clean."""

    exit_code = EPISODE_UNKNOWN


class SubmissionUnknown(JobstateError):
    """Nobody can confirm whether the vendor accepted an earlier attempt (``attempt``, when known)."""

    exit_code = SUBMISSION_UNKNOWN

    def __init__(self, message: str, attempt: int | None = None) -> None:
        super().__init__(message)
        self.attempt = attempt


class BudgetExceeded(JobstateError):
    """A paid step's reservation would take its period past the budget; nothing was run."""

    exit_code = BUDGET_EXCEEDED


class StateInvalid(JobstateError):
    """State on disk cannot be trusted: malformed YAML, unknown schema, mismatched names."""

    exit_code = STATE_INVALID


class VerifyFailed(JobstateError):
    """verify found problems (raised only where a caller asked for an exception)."""

    exit_code = VERIFY_PROBLEMS


class GitError(JobstateError, RuntimeError):
    """A git command failed in a way jobstate cannot recover from by itself."""


class IndexBusy(JobstateError, TimeoutError):
    """Another git command holds ``.git/index.lock``."""

    exit_code = LOCK_OR_REMOTE


class AlreadyRecorded(JobstateError):
    """What was asked is already recorded (a decision re-run after a kill that landed): nothing new, exit 0.
    ``answer``: what the command answered when it landed, when it has one to give again."""

    exit_code = OK

    def __init__(self, message: str, answer: Any = None) -> None:
        super().__init__(message)
        self.answer = answer


class GitLockHeld(JobstateError, TimeoutError):
    """A git lock file (a ref's, HEAD's) stayed in place: another git command, or a killed one's leftover."""

    exit_code = LOCK_OR_REMOTE


class StepAlreadyCompleted(AlreadyRecorded):
    """The step finished earlier; nothing is run or paid again (exit 0)."""


class CommandFailed(JobstateError):
    """The command run by ``jobstate run`` failed: exit 9, never one of jobstate's own codes.

    The command's own exit code (128+N for signal N) is in ``command_code`` and on stderr.
    """

    exit_code = COMMAND_FAILED

    def __init__(self, message: str, command_code: int) -> None:
        super().__init__(message)
        self.command_code = command_code


class EpisodeCompleted(JobstateError):
    """The episode's history record exists: nothing more can be paid for it or decided on it."""

    exit_code = EPISODE_COMPLETED

    def __init__(self, message: str, episode_id: str) -> None:
        super().__init__(message)
        self.episode_id = episode_id
