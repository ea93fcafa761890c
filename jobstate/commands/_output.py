"""What every command prints the same way: JSON answers and notes on stderr."""

from __future__ import annotations

import json
import sys


def print_json(value: object) -> None:
    """One JSON value on stdout."""
    print(json.dumps(value, sort_keys=False, ensure_ascii=False))


def note(line: str) -> None:
    """A diagnostic line on stderr (stdout carries only the answer)."""
    print(f"jobstate: {line}", file=sys.stderr)
