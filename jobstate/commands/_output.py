"""What every command prints the same way: JSON answers and notes on stderr."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from jobstate.errors import UsageError


def print_json(value: object) -> None:
    """One JSON value on stdout."""
    print(json.dumps(value, sort_keys=False, ensure_ascii=False))


def note(line: str) -> None:
    """A diagnostic line on stderr (stdout carries only the answer); a note may quote state, a result
    file or a command line, so a control character in it is shown escaped, as in every error line."""
    if not line.isprintable():
        from jobstate.review import escape  # noqa: PLC0415 - start-up: only for a line that needs it

        line = escape.text(line)
    print(f"jobstate: {line}", file=sys.stderr)


def emit(text: str, output: str | None) -> None:
    """The answer on stdout, or into ``output`` (then a note says where)."""
    if output is None:
        sys.stdout.write(text)
        return
    target = Path(output)
    if not target.parent.is_dir():  # atomic_write would create it; a typo in the path is the user's to see
        raise UsageError(f"cannot write {output}: No such file or directory")
    # tempfile (under atomic) loads shutil: not for a retried allocate, which prints through this module too
    from jobstate.atomic import atomic_write  # noqa: PLC0415 - start-up

    try:
        atomic_write(target, text.encode("utf-8"))  # a killed report never leaves half a page behind
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc.strerror}") from None
    note(f"wrote {output}")
