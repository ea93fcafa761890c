"""The one place where exceptions become an exit code and one line on stderr (never a traceback)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

from jobstate.errors import INTERNAL, INTERRUPTED, STDOUT_CLOSED, USAGE, CommandFailed, JobstateError


def run_handled(command: Callable[[], int]) -> int:
    """Run ``command``; map what it raises to the exit-code table in jobstate.errors."""
    if sys.stdout is None:  # started with stdout closed (>&-): the answer (a new episode ID) would be lost
        print("jobstate: error: stdout is closed, and the answer goes there; nothing was done", file=sys.stderr)
        return STDOUT_CLOSED
    real = sys.stdout
    sys.stdout = _Answer(real)
    try:
        return _handled(command)
    finally:
        sys.stdout = real


def _handled(command: Callable[[], int]) -> int:
    try:
        code = command()
        sys.stdout.flush()  # a full disk (>/dev/full) fails here, not silently at exit
        return code
    except _AnswerLost as lost:
        print(
            f"jobstate: error: cannot write the answer to stdout ({lost.args[0]}); what the command "
            "committed stays committed: run it again to be answered",
            file=sys.stderr,
        )
        _quiet_stdout()
        return STDOUT_CLOSED
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


class _AnswerLost(Exception):
    """stdout refused what was written to it (other than a reader gone away: BrokenPipeError)."""


class _Answer:
    """sys.stdout, telling its own write failures apart from every other file's."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        try:
            return self._inner.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _AnswerLost(exc.strerror or str(exc)) from None

    def flush(self) -> None:
        try:
            self._inner.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _AnswerLost(exc.strerror or str(exc)) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _quiet_stdout() -> None:
    """The reader of stdout went away (``| head``): end quietly, as git does. What is still buffered
    goes nowhere, so that the interpreter's flush at exit does not complain either."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass  # no real stdout (tests capture it): nothing will be flushed to a closed pipe
