"""Git objects: object formats and IDs, raw trees edited by splicing, and the one ``cat-file --batch`` reader."""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from jobstate.git.runner import READ_ONLY_ENV, popen_git

TREE_MODE = b"40000"
BLOB_MODE = b"100644"

TreeEdit = tuple[bytes, str] | None  # (mode, hex sha) to set, None to delete
_SPLICES = 16  # edits of one tree applied by splicing; more rebuild it once


class ObjectFormat(NamedTuple):
    """A Git object format: the hash that names objects (``sha1``, or ``sha256`` since Git 2.29)."""

    name: str
    width: int  # bytes of a raw object ID, as trees store it

    @property
    def zero(self) -> str:
        """The all-zero object ID (``update-ref``'s "must not exist yet")."""
        return "0" * (2 * self.width)

    def object_id(self, kind: bytes, body: bytes) -> str:
        """The ID of an object of type ``kind`` with content ``body``."""
        return hashlib.new(self.name, kind + b" %d\0" % len(body) + body, usedforsecurity=False).hexdigest()


SHA1 = ObjectFormat("sha1", 20)
SHA256 = ObjectFormat("sha256", 32)
FORMATS = {f.name: f for f in (SHA1, SHA256)}


def blob_sha(data: bytes, fmt: ObjectFormat) -> str:
    """The Git object ID of a blob with these bytes, in object format ``fmt``."""
    return fmt.object_id(b"blob", data)


def _sort_key(mode: bytes, name: bytes) -> bytes:
    return name + b"/" if mode == TREE_MODE else name


def _scan(data: bytes, width: int) -> Iterator[tuple[int, bytes]]:
    pos, end = 0, len(data)
    while pos < end:
        sp = data.index(b" ", pos)
        nul = data.index(b"\0", sp)
        yield pos, data[sp + 1 : nul]
        pos = nul + 1 + width


class Tree:
    """A raw tree object with its entries' offsets and sort keys, edited by splicing.

    Editing one entry of a 10,000-entry tree costs a bisect and a byte splice,
    not a parse and a re-serialization of every entry.
    """

    __slots__ = ("keys", "offsets", "raw", "width")

    def __init__(self, raw: bytes, width: int) -> None:
        self.raw = raw
        self.width = width
        self.offsets: list[int] = []
        self.keys: list[bytes] = []
        for start, name in _scan(raw, width):
            mode = raw[start : raw.index(b" ", start)]
            self.offsets.append(start)
            self.keys.append(_sort_key(mode, name))

    def _find(self, name: bytes) -> int | None:
        for key in (name + b"/", name):
            i = bisect.bisect_left(self.keys, key)
            if i < len(self.keys) and self.keys[i] == key:
                return i
        return None

    def get(self, name: bytes) -> tuple[bytes, str] | None:
        """(mode, hex sha) of entry ``name``."""
        i = self._find(name)
        if i is None:
            return None
        start = self.offsets[i]
        sp = self.raw.index(b" ", start)
        nul = self.raw.index(b"\0", sp)
        return self.raw[start:sp], self.raw[nul + 1 : nul + 1 + self.width].hex()

    def with_edits(self, edits: Mapping[bytes, TreeEdit]) -> Tree:
        """A new Tree with every edit applied: a splice each when they are few, one rebuild when they are
        many (a migration moves every entry of a flat state/: splicing each would cost the square)."""
        if len(edits) <= _SPLICES:
            tree = self
            for name, change in edits.items():
                tree = tree.edited(name, change)
            return tree
        entries: dict[bytes, tuple[bytes, bytes]] = {}
        for start, name in _scan(self.raw, self.width):
            sp = self.raw.index(b" ", start)
            at = self.raw.index(b"\0", sp) + 1
            entries[name] = (self.raw[start:sp], self.raw[at : at + self.width])
        for name, change in edits.items():
            if change is None:
                entries.pop(name, None)
            else:
                entries[name] = (change[0], bytes.fromhex(change[1]))
        order = sorted(entries, key=lambda name: _sort_key(entries[name][0], name))
        return Tree(b"".join(entries[n][0] + b" " + n + b"\0" + entries[n][1] for n in order), self.width)

    def edited(self, name: bytes, change: TreeEdit) -> Tree:
        """A new Tree with ``name`` set to ``change`` (or removed for None)."""
        i = self._find(name)
        raw, offsets, keys = self.raw, self.offsets, self.keys
        if i is not None and change is not None:
            start = offsets[i]
            sp = raw.index(b" ", start)
            if raw[start:sp] == change[0]:  # same name and mode, new object: swap the ID in place
                at = raw.index(b"\0", sp) + 1
                new = Tree.__new__(Tree)
                new.raw = raw[:at] + bytes.fromhex(change[1]) + raw[at + self.width :]
                new.offsets, new.keys, new.width = offsets, keys, self.width
                return new
        if i is not None:  # remove the old entry first
            end = offsets[i + 1] if i + 1 < len(offsets) else len(raw)
            span = end - offsets[i]
            raw = raw[: offsets[i]] + raw[end:]
            offsets = offsets[:i] + [o - span for o in offsets[i + 1 :]]
            keys = keys[:i] + keys[i + 1 :]
        if change is not None:
            entry = change[0] + b" " + name + b"\0" + bytes.fromhex(change[1])
            key = _sort_key(change[0], name)
            k = bisect.bisect_left(keys, key)
            at = offsets[k] if k < len(offsets) else len(raw)
            raw = raw[:at] + entry + raw[at:]
            offsets = [*offsets[:k], at, *(o + len(entry) for o in offsets[k:])]
            keys = [*keys[:k], key, *keys[k:]]
        new = Tree.__new__(Tree)
        new.raw, new.offsets, new.keys, new.width = raw, offsets, keys, self.width
        return new


class MissingObject(OSError):
    """An object named in a request is not in the repository."""


class ObjectTooLarge(OSError):
    """An object over the reader's limit: its header was read, its content skipped, never held."""

    def __init__(self, spec: str, size: int) -> None:
        super().__init__(f"object {spec} is {size} bytes")
        self.size = size


class CatFile:
    """One ``git cat-file --batch`` process: every object read in jobstate goes through this class.

    Read-only: with ``GIT_OPTIONAL_LOCKS=0`` git takes no lock while it answers.
    """

    def __init__(self, cwd: Path) -> None:
        self._proc = popen_git(cwd, "cat-file", "--batch", env=READ_ONLY_ENV)
        assert self._proc.stdin is not None
        assert self._proc.stdout is not None
        self._in = self._proc.stdin
        self._out = self._proc.stdout

    def __enter__(self) -> CatFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _header(self, spec: str) -> tuple[bytes, int]:
        header = self._out.readline().split()
        if len(header) != 3 or not header[2].isdigit():  # "<name> missing": a name may hold a space
            raise MissingObject(f"object {spec} is missing")
        return header[1], int(header[2])

    def read(self, spec: str, limit: int | None = None) -> tuple[bytes, bytes]:
        """(type, content) of one object (an ID, or ``REV:PATH``); with ``limit``, a larger object is
        ObjectTooLarge, decided from its header: its content is skipped in chunks, never held."""
        self._in.write(spec.encode("utf-8", "surrogateescape") + b"\n")
        self._in.flush()
        kind, size = self._header(spec)
        if limit is not None and size > limit:
            remaining = size + 1
            while remaining:
                skipped = len(self._out.read(min(1 << 20, remaining)))
                if not skipped:
                    raise MissingObject(f"object {spec} was cut short")
                remaining -= skipped
            raise ObjectTooLarge(spec, size)
        return kind, self._out.read(size + 1)[:-1]

    def read_many(self, specs: list[str]) -> Iterator[tuple[str, bytes, bytes]]:
        """(spec, type, content) of many objects, requests pipelined by a feeder thread."""

        def feed() -> None:
            for spec in specs:
                self._in.write(spec.encode("utf-8", "surrogateescape") + b"\n")
            self._in.flush()

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        try:
            for spec in specs:
                kind, size = self._header(spec)
                yield spec, kind, self._out.read(size + 1)[:-1]
        except BaseException:
            self._proc.kill()  # the feeder may be blocked on a full pipe
            raise
        finally:
            feeder.join()

    def stream(self, spec: str, chunk: int, sink: Callable[[bytes], None]) -> int:
        """Pass one object's content to ``sink`` in chunks; returns its size."""
        self._in.write(spec.encode("ascii") + b"\n")
        self._in.flush()
        _kind, size = self._header(spec)
        remaining = size
        while remaining:
            data = self._out.read(min(chunk, remaining))
            if not data:
                raise MissingObject(f"object {spec} was cut short")
            sink(data)
            remaining -= len(data)
        self._out.read(1)  # the newline after each object
        return size

    @property
    def closed(self) -> bool:
        """Whether the process was stopped (or ended)."""
        return self._in.closed or self._proc.poll() is not None

    def close(self) -> None:
        """Stop the process (and close its pipes, whether it still ran or not)."""
        if not self._in.closed:
            with contextlib.suppress(OSError):  # a process that ended leaves a broken pipe to flush
                self._in.close()
        self._proc.wait()
        self._out.close()


def read_all(cwd: Path, specs: Iterable[str]) -> dict[str, bytes]:
    """The content of many objects at once (one process, pipelined). Read-only."""
    wanted = list(dict.fromkeys(specs))
    with CatFile(cwd) as cat:
        return {spec: body for spec, _kind, body in cat.read_many(wanted)}
