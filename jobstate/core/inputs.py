"""One rule for what a user types: every option and environment variable is checked here, at the
edge, before anything is read or written. Pure: text in, a value or a UsageError out.

- A number is a whole or decimal number within its range: never nan, inf, text or out of range.
- Free text (a name, a reason, a path) is one line: no control characters (newline, tab, escape,
  NUL), no format characters (bidi overrides, zero-width) and no line or paragraph separator, because
  it lands in one-line records, commit subjects and terminals, where it must read as what it is.
"""

from __future__ import annotations

import re
import reprlib
import unicodedata
from collections.abc import Mapping

from jobstate.errors import UsageError

# the environment variables jobstate reads as numbers: (what, lowest, highest, whole)
NUMERIC_ENV: dict[str, tuple[str, float, float, bool]] = {
    "JOBSTATE_LOCK_TIMEOUT": ("seconds", 0, 86400, False),
    "JOBSTATE_ATTEMPTS": ("attempts", 1, 1000, True),
}
_NOT_TEXT = frozenset(("Cc", "Cf", "Zl", "Zp"))  # as keys: core.keys.validate_key


def number(text: str, what: str, low: float, high: float, *, whole: bool = False, name: str = "") -> float:
    """``text`` as a number of ``what`` from ``low`` to ``high``; ``name`` says where it came from."""
    where = name if not name or name.endswith("=") else f"{name} "
    # plain ASCII digits only: Python's int() and float() also take spaces, 1_0, full-width digits and 1e3
    if not (_WHOLE if whole else _DECIMAL).fullmatch(text):
        raise UsageError(f"{where}{text!r} is not a {'whole ' if whole else ''}number of {what}")
    value = int(text) if whole else float(text)
    if not low <= value <= high:
        raise UsageError(f"{where}{text!r} is not a number of {what} from {_shown(low)} to {_shown(high)}")
    return value


def _shown(bound: float) -> str:
    return str(int(bound)) if bound == int(bound) else str(bound)  # as the option takes it: plain digits


_WHOLE = re.compile(r"-?[0-9]{1,18}", re.ASCII)
_DECIMAL = re.compile(r"-?([0-9]{1,18}(\.[0-9]{0,9})?|\.[0-9]{1,9})", re.ASCII)


def env_number(env: Mapping[str, str], name: str) -> float | None:
    """The numeric environment variable ``name`` (one of NUMERIC_ENV), None when unset or empty."""
    text = env.get(name)
    if not text:
        return None
    what, low, high, whole = NUMERIC_ENV[name]
    return number(text, what, low, high, whole=whole, name=f"{name}=")


def check_environment(env: Mapping[str, str]) -> None:
    """Refuse a malformed numeric environment variable up front, whatever the command."""
    for name in NUMERIC_ENV:
        env_number(env, name)


def one_line(text: str, option: str) -> str:
    """Free text given as ``option``: refused when it holds a control character or a line break."""
    for ch in text:
        if unicodedata.category(ch) in _NOT_TEXT:
            raise UsageError(
                f"{option} {reprlib.repr(text)}: holds U+{ord(ch):04X}, a control or format character or a line "
                "break; give it on one line without them"
            )
    return text
