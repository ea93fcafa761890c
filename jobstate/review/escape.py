"""The one escaping policy per output format: what Git delivers is shown, never obeyed. Pure.

- ``text``: control, format (bidi overrides, zero-width) and separator characters are shown
  as Python escapes (``\\x1b``, ``\\u202e``), so a terminal never receives one from state.
- ``markdown``: ``text`` first (so CR and LF cannot end a table row), then every character
  CommonMark or GitHub would act on is neutralised: backslash escapes for emphasis, code,
  links, strikethrough and math; entities for ``<``, ``>`` and ``&`` (so ``&lt;`` in state
  shows as ``&lt;``); a zero-width space after ``@`` and ``#`` and inside ``://`` and ``www.``,
  so no mention, issue reference or autolink comes from state.
- ``shell_command``: every argument of a suggested command is shell-quoted.

HTML output uses ``html.escape`` and GitHub annotations their own percent-encoding
(``review.annotations``); JSON is JSON.
"""

from __future__ import annotations

import re
import shlex
import unicodedata

# the categories a terminal (or a reader) may act on rather than show
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_NOT_PLAIN = re.compile(r"[^\x20-\x7e]")


def _shown(ch: str) -> str:
    if unicodedata.category(ch) not in _HIDDEN:
        return ch
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def text(value: object) -> str:
    """``value`` for a terminal or a log: invisible and controlling characters shown escaped."""
    s = str(value)
    return _NOT_PLAIN.sub(lambda m: _shown(m[0]), s) if _NOT_PLAIN.search(s) else s


_ZW = "\u200b"  # only ever ours: ``text`` has already escaped every one that came from state
_MARKDOWN = {
    **{ch: "\\" + ch for ch in "\\`*_[]!|~$"},
    "<": "&lt;",
    ">": "&gt;",
    "&": "&amp;",
    "@": "@&#8203;",
    "#": "\\#&#8203;",
    _ZW: "&#8203;",
}
_SPECIAL = re.compile("[" + re.escape("".join(_MARKDOWN)) + "]")
_LINKISH = re.compile(r"(?i)(:)(//)|(w)(ww\.)")


def markdown(value: object) -> str:
    """``value`` as literal text inside a Markdown paragraph or table cell (CommonMark and GitHub)."""
    s = text(value)
    if "//" in s or "ww" in s or "WW" in s or "wW" in s or "Ww" in s:
        s = _LINKISH.sub(lambda m: _ZW.join(g for g in m.groups() if g is not None), s)
    return _SPECIAL.sub(lambda m: _MARKDOWN[m[0]], s)


def markdown_code(value: object) -> str:
    """``value`` as a Markdown code span (nothing inside one is rendered), or escaped text if it holds a backtick."""
    shown = text(value)
    return markdown(shown) if "`" in shown else f"`{shown}`"


def shell_command(*argv: str, tail: str = "") -> str:
    """A command to suggest: each argument shell-quoted; ``tail`` is placeholder text of ours."""
    line = " ".join(shlex.quote(a) for a in argv)
    return f"{line} {tail}" if tail else line
