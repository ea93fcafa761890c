"""One finding of verify: the file, what is wrong, and whether it fails verify."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One finding: the file, what is wrong, and whether it fails verify."""

    path: str
    message: str
    severity: str = "error"
    line: int | None = None  # 1-based line in the YAML file, when known
    unreadable: bool = False  # not YAML at all, or not readable: verify exits 7, as every command does

    def to_json(self, strict: bool = False) -> dict[str, object]:
        """For ``--json``; the severity is the one the text report prints (``--strict`` makes warnings errors)."""
        out: dict[str, object] = {
            "path": self.path,
            "message": self.message,
            "severity": "error" if strict else self.severity,
            "unreadable": self.unreadable,
        }
        if self.line is not None:
            out["line"] = self.line
        return out


def problems_of(found: list[tuple[str, str]]) -> list[Problem]:
    """The malformed parts a record reader left out, as errors."""
    return [Problem(path, message) for path, message in found]
