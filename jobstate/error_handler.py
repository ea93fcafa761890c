"""The one place where exceptions become an exit code and one line on stderr (never a traceback)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from jobstate.errors import INTERNAL, INTERRUPTED, USAGE, CommandFailed, JobstateError


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
