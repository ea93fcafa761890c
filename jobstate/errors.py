"""The one error root of jobstate and the one table of exit codes.

Every failure a user can cause or meet is a ``JobstateError`` whose class says
which exit code the CLI returns; the README documents the same table. One kind
of failure gets one code in every command (tests/test_exit_codes.py runs each
kind through every command that can meet it):

- malformed episode ID (``2026-W32``, ``../x``): 2, bad input, like any malformed value
- unknown episode (well formed, absent or not committed): 5
- dirty state (uncommitted or untracked files where jobstate must write): 2, ``DirtyState``
- uninitialised repository (no state/) or not a Git repository: 2, ``NotInitialized``
- malformed YAML (any state file or jobstate.yaml, too large to read): 7, verify included;
  verify reports other invalid state (schema, names, hashes) as problems: exit 1
- conflict with what is recorded (an allocation key elsewhere, a contradicting charge, a changed request): 4
- the command run by ``jobstate run`` failed: 9, its own code on stderr
- a paid step whose reservation does not fit in its period's budget: 8
- a push whose answer was lost (it may have landed): 10; the next command settles it by fetching
"""

from __future__ import annotations

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
INTERNAL = 70  # EX_SOFTWARE: a bug in jobstate, reported in one line
INTERRUPTED = 130  # SIGINT, as shells report it

EXIT_CODES: dict[int, str] = {
    OK: "ok",
    VERIFY_PROBLEMS: "verify found problems",
    USAGE: "usage or bad input",
    LOCK_OR_REMOTE: "lock or remote not acquired within the timeout",
    ALLOCATION_CONFLICT: "conflict: a key in another period or several episodes, or a changed request",
    EPISODE_UNKNOWN: "episode unknown or not committed",
    SUBMISSION_UNKNOWN: "submission state unknown",
    STATE_INVALID: "state on disk invalid",
    BUDGET_EXCEEDED: "budget exceeded: the step's reservation does not fit in the period's budget",
    COMMAND_FAILED: "the command run by jobstate run failed (its own code is on stderr)",
    REMOTE_OUTCOME_UNKNOWN: "outcome unknown: a push may be on the remote (its answer was lost); run the command again",
    INTERNAL: "internal error: a bug in jobstate (one line on stderr; please report it)",
    INTERRUPTED: "interrupted (Ctrl-C)",
}


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
    """What was asked is already recorded (a decision re-run after a kill that landed): nothing new, exit 0."""

    exit_code = OK


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
