"""The only module that imports PyYAML: safe loading and stable dumping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from jobstate.errors import StateInvalid

# state files are small (an episode.yaml is a few hundred bytes); parsing costs about 100 times a
# file's size in memory, so anything larger is refused before parsing (exit 7)
MAX_STATE_BYTES = 4 * 1024 * 1024

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def loads(data: bytes | str, source: str) -> Any:
    """Parse YAML with the safe loader only; any error names ``source`` (exit 7).

    Aliases are refused: state files never need them, and nested aliases can
    expand a small file into an enormous value (a "billion laughs"). Files over
    MAX_STATE_BYTES are refused before parsing.
    """
    _check_size(len(data), source)
    try:
        if ("&" in data) if isinstance(data, str) else (b"&" in data):
            for event in yaml.parse(data, Loader=_Loader):
                if isinstance(event, yaml.AliasEvent):
                    mark = event.start_mark
                    raise StateInvalid(
                        f"{source}: YAML alias *{event.anchor} (line {mark.line + 1 if mark else '?'}): "
                        "aliases are not allowed in state files; write the value out"
                    )
        return yaml.load(data, Loader=_Loader)  # noqa: S506 - a safe loader class
    except yaml.YAMLError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise StateInvalid(
            f"{source}: invalid YAML{where}: {first}; fix or restore the file (git checkout -- {source})"
        ) from None


def _check_size(size: int, source: str) -> None:
    if size > MAX_STATE_BYTES:
        raise StateInvalid(
            f"{source}: {size} bytes is over the {MAX_STATE_BYTES // (1024 * 1024)} MiB limit for a state file; "
            f"it was not read: restore it (git checkout -- {source}) or split what it holds"
        )


def load_file(path: Path, source: str) -> Any:
    """Read and parse one YAML file; a missing, unreadable or oversized file is StateInvalid too."""
    try:
        _check_size(path.stat().st_size, source)
        data = path.read_bytes()
    except OSError as exc:
        raise StateInvalid(f"{source}: cannot read: {exc.strerror}") from None
    return loads(data, source)


def dumps(data: Any) -> bytes:
    """Dump with the caller's key order (records fix it) so diffs stay small."""
    text: str = yaml.dump(
        data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1000
    )
    return text.encode("utf-8")


def key_line(data: bytes | str, keys: tuple[str | int, ...]) -> int | None:
    """The 1-based line of the value at ``keys`` (mapping keys, list indexes) in a YAML text.

    Walks the node tree (``compose``: nothing is constructed); None when the path
    is not there or the text does not parse.
    """
    try:
        node = yaml.compose(data, Loader=_Loader)
    except yaml.YAMLError:
        return None
    line = None if node is None else node.start_mark.line + 1
    for key in keys:
        if isinstance(node, yaml.MappingNode):
            found = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(key)]
            if not found:
                return line
            line, node = found[0][0].start_mark.line + 1, found[0][1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            return line
    return line
