"""The one codec of the files jobstate writes (the only PyYAML user): strict loading and stable
dumping of YAML, and the same for the JSON of its private files. What ``dumps`` writes, ``loads``
reads back to a value that ``dumps`` writes again byte for byte."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from jobstate.core import advice
from jobstate.core.layout import record_size_problem
from jobstate.errors import StateInvalid

# state files are small (an episode.yaml is a few hundred bytes); parsing costs about 100 times a
# file's size in memory, so anything larger is refused before parsing (exit 7)

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[valid-type,misc]
    """The safe loader, refusing duplicate mapping keys: with the last one winning, a ledger entry
    with ``amount: '12.40'`` then ``amount: '0.01'`` would read as 0.01 while the diff shows both."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        if len(mapping) != len(node.value):
            seen: set[Any] = set()
            for key_node, _value in node.value:
                key = self.construct_object(key_node, deep=True)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}: each key may appear once", key_node.start_mark
                    )
                seen.add(key)
        return mapping


_BaseDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_BaseDumper):  # type: ignore[valid-type,misc]
    """The safe dumper without anchors: a value used twice (a replacing attempt shares the reservation
    of the one it replaces) is written out twice, since the strict reader refuses aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _decimal(dumper: yaml.SafeDumper, value: Decimal) -> yaml.ScalarNode:
    # money as its exact text, read back as a string (a float would round it)
    return dumper.represent_str(str(value))


def _no_float(dumper: yaml.SafeDumper, value: float) -> yaml.ScalarNode:
    raise yaml.representer.RepresenterError(f"a float ({value!r}) in a record: write money as a Decimal or string")


_Dumper.add_representer(Decimal, _decimal)
_Dumper.add_representer(float, _no_float)


def loads(data: bytes | str, source: str, *, allow_empty: bool = False) -> Any:
    """Parse YAML with the safe loader only; any error names ``source`` (exit 7).

    A state file holds a mapping: an empty or comment-only document (None) is refused unless
    ``allow_empty`` (jobstate.yaml, whose every setting has a default). Duplicate keys are refused.

    Aliases are refused: state files never need them, and nested aliases can
    expand a small file into an enormous value (a "billion laughs"). Files over
    the record size limit (``core.layout.record_size_problem``) are refused before parsing.
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
        value = yaml.load(data, Loader=_Loader)  # noqa: S506 - a safe loader class
    except yaml.YAMLError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise StateInvalid(
            f"{source}: invalid YAML{where}: {first}; fix or restore the file ({advice.restore(source)})"
        ) from None
    if value is None and not allow_empty:
        raise StateInvalid(f"{source}: the file is empty (or only comments); restore it ({advice.restore(source)})")
    return value


def _check_size(size: int, source: str) -> None:
    problem = record_size_problem(size)
    if problem is not None:
        raise StateInvalid(f"{source}: {problem}: restore it ({advice.restore(source)}) or split what it holds")


def load_file(path: Path, source: str, *, allow_empty: bool = False) -> Any:
    """Read and parse one YAML file; a missing, unreadable or oversized file is StateInvalid too."""
    try:
        _check_size(path.stat().st_size, source)
        data = path.read_bytes()
    except OSError as exc:
        raise StateInvalid(f"{source}: cannot read: {exc.strerror}") from None
    return loads(data, source, allow_empty=allow_empty)


def dumps(data: Any) -> bytes:
    """Dump with the caller's key order (records fix it) so diffs stay small; no anchors, no tags."""
    text: str = yaml.dump(
        data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1000
    )
    return text.encode("utf-8")


def json_dumps(data: Any) -> bytes:
    """The JSON of a private file: sorted keys (a re-write is byte for byte the same), exact decimals
    as strings, no NaN."""
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, allow_nan=False, default=_json_default)
    return text.encode("utf-8")


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not written as JSON")


def json_loads(data: bytes | str, source: str) -> Any:
    """Parse the JSON of a private file; StateInvalid naming ``source`` when it is not JSON."""
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise StateInvalid(f"{source}: invalid JSON: {exc}") from None


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
