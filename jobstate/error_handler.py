"""The one place where exceptions become an exit code and one line on stderr (never a traceback)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from jobstate.errors import INTERNAL, INTERRUPTED, STDOUT_CLOSED, USAGE, CommandFailed, JobstateError


def run_handled(command: Callable[[], int]) -> int:
    """Run ``command``; map what it raises to the exit-code table in jobstate.errors."""
    try:
        return command()
    except JobstateError as exc:
        label = "" if exc.exit_code == 0 or isinstance(exc, CommandFailed) else "error: "
        # messages may quote state (file names, fields): shown, never obeyed by the terminal;
        # imported here, not at start-up: the lock-free retry path stays light
        from jobstate.review import escape  # noqa: PLC0415 - start-up: not on the retry path

        print(f"jobstate: {label}{escape.text(exc)}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        _quiet_stdout()
        return STDOUT_CLOSED
    except KeyboardInterrupt:
        print("jobstate: interrupted", file=sys.stderr)
        return INTERRUPTED
    except OSError as exc:
        print(f"jobstate: error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return USAGE
    except Exception as exc:
        text = " ".join(str(exc).split())[:300]
        print(f"jobstate: internal error: {type(exc).__name__}: {text} (a bug: please report it)", file=sys.stderr)
        return INTERNAL


def _quiet_stdout() -> None:
    """The reader of stdout went away (``| head``): end quietly, as git does. What is still buffered
    goes nowhere, so that the interpreter's flush at exit does not complain either."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass  # no real stdout (tests capture it): nothing will be flushed to a closed pipe
