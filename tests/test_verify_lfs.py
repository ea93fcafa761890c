"""Artifacts kept in Git LFS, verified without the git-lfs binary.

The repository stores pointers through a ``filter.lfs.clean`` command written
here (what git-lfs's clean filter does), so git sees the real file in the work
tree as clean and Git objects hold only the pointer.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from jobstate.allocation.allocation import allocate
from jobstate.core.lfs import Pointer, parse_pointer
from jobstate.core.periods import parse_period
from jobstate.main import main
from jobstate.paid.step import paid_step
from jobstate.store.store import Store

from .conftest import FIXED, both_formats, git, status
from .snapshots import tree_state

VIDEO = b"\x00\x01video frame " * 5000
ART = "state/2026/2026-W32/2026-W32-0/final.mp4"

CLEAN = """\
import hashlib, sys
data = sys.stdin.buffer.read()
if data.startswith(b"version https://git-lfs.github.com/spec/v1\\n"):
    sys.stdout.buffer.write(data)  # already a pointer: kept, as git-lfs does
else:
    sys.stdout.buffer.write(pointer := (
        b"version https://git-lfs.github.com/spec/v1\\noid sha256:"
        + hashlib.sha256(data).hexdigest().encode() + b"\\nsize %d\\n" % len(data)))
"""


def _pointer(sha: str, size: int) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\nsize {size}\n".encode()


def _episode_with_video(repo: Path) -> str:
    """One episode whose generate step recorded VIDEO as final.mp4."""
    with Store(repo, now=lambda: FIXED, lock_timeout=5) as store:
        episode = allocate(store, "k", parse_period("2026-W32")).episode_id
        with paid_step(store, episode, "generate") as step:
            step.accepted("task-1")
            (step.output_dir / "final.mp4").write_bytes(VIDEO)
            step.artifact("final.mp4")
    return episode


@pytest.fixture
def lfs_repo(repo: Path, tmp_path: Path) -> Path:
    """One episode whose recorded artifact is committed as an LFS pointer; the real file is checked out."""
    _episode_with_video(repo)
    clean = tmp_path / "lfs_clean.py"
    clean.write_text(CLEAN)
    git(repo, "config", "filter.lfs.clean", f"{sys.executable} {clean}")
    git(repo, "config", "filter.lfs.required", "true")
    (repo / ".gitattributes").write_text("*.mp4 filter=lfs diff=lfs merge=lfs -text\n")
    git(repo, "add", ".gitattributes")
    git(repo, "add", "--renormalize", "state")
    git(repo, "commit", "-qm", "keep media in LFS")
    assert git(repo, "cat-file", "blob", f"HEAD:{ART}").encode() == _pointer(
        hashlib.sha256(VIDEO).hexdigest(), len(VIDEO)
    )
    assert status(repo) == ""
    return repo


def _verify(repo: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(["--repo", str(repo), "verify", *args])
    return code, capsys.readouterr().out.splitlines()


@both_formats
def test_a_pointer_artifact_verifies_from_git_objects_and_with_the_real_file(
    lfs_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = tree_state(lfs_repo)
    for args in (["--rev", "HEAD", "--strict"], ["--strict"]):
        code, out = _verify(lfs_repo, capsys, *args)
        assert code == 0, out
        assert len(out) == 1, out
        assert out[0].startswith("verify: 1 episode, 1 artifact ("), out
        assert out[0].endswith("), 0 problems"), out
    assert tree_state(lfs_repo) == before


def test_a_checked_out_pointer_is_a_warning_not_a_mismatch(lfs_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (lfs_repo / ART).unlink()
    git(
        lfs_repo, "-c", "filter.lfs.required=false", "checkout", "--", ART
    )  # no smudge: what a clone without the LFS object holds
    assert (lfs_repo / ART).read_bytes() == _pointer(hashlib.sha256(VIDEO).hexdigest(), len(VIDEO))
    assert status(lfs_repo) == ""
    code, out = _verify(lfs_repo, capsys)
    assert code == 0, out
    assert out[0].startswith(f"{ART}: warning: Git LFS object not fetched (a pointer is checked out)"), out
    code, out = _verify(lfs_repo, capsys, "--strict")
    assert code == 1, out


def test_a_tampered_pointer_or_file_does_not_verify(lfs_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (lfs_repo / ART).write_bytes(VIDEO + b"x")
    code, out = _verify(lfs_repo, capsys)
    assert code == 1, out
    assert any(line.startswith(f"{ART}: error: sha256 ") for line in out), out
    (lfs_repo / ART).write_bytes(_pointer("ab" * 32, len(VIDEO)))
    git(lfs_repo, "commit", "-qam", "tampered pointer")
    for args in (["--rev", "HEAD"], []):
        code, out = _verify(lfs_repo, capsys, *args)
        assert code == 1, out
        assert out[0] == f"{ART}: error: Git LFS pointer oid sha256:abababababababab… does not match recorded " + (
            hashlib.sha256(VIDEO).hexdigest()[:16] + "…"
        ), out
    (lfs_repo / ART).write_bytes(_pointer(hashlib.sha256(VIDEO).hexdigest(), len(VIDEO) + 1))
    git(lfs_repo, "commit", "-qam", "wrong size")
    code, out = _verify(lfs_repo, capsys, "--rev", "HEAD")
    assert code == 1, out
    assert out[0] == f"{ART}: error: Git LFS pointer size {len(VIDEO) + 1} does not match recorded {len(VIDEO)}"


@pytest.mark.parametrize(
    "text",
    [
        b"version https://git-lfs.github.com/spec/v2\noid sha256:" + b"a" * 64 + b"\nsize 1\n",
        b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"a" * 63 + b"\nsize 1\n",
        b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"a" * 64 + b"\nsize -1\n",
        b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"a" * 64 + b"\nsize 1",
        b"version https://git-lfs.github.com/spec/v1\nsize 1\n",
        b"plain text\n",
    ],
)
def test_only_well_formed_pointers_are_pointers(text: bytes) -> None:
    assert parse_pointer(text) is None


def test_a_pointer_with_extension_lines_is_read() -> None:
    text = _pointer("c" * 64, 7).replace(b"oid", b"ext-0-foo sha256:" + b"d" * 64 + b"\noid")
    assert parse_pointer(text) == Pointer("c" * 64, 7)


@both_formats
def test_recording_an_artifact_hashes_the_real_file_and_commits_what_git_add_would(
    lfs_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    media = b"\x02second take " * 700
    with (
        Store(lfs_repo, now=lambda: FIXED, lock_timeout=5) as store,
        paid_step(store, "2026-W32-0", "rework") as step,
    ):
        step.accepted("task-2")
        (step.output_dir / "take2.mp4").write_bytes(media)
        record = step.artifact("take2.mp4")
    path = "state/2026/2026-W32/2026-W32-0/take2.mp4"
    assert record.sha256 == hashlib.sha256(media).hexdigest()
    assert git(lfs_repo, "cat-file", "blob", f"HEAD:{path}").encode() == _pointer(record.sha256, len(media))
    assert status(lfs_repo) == ""  # the index agrees with the commit: no staged conversion left behind
    assert (lfs_repo / path).read_bytes() == media
    # the blob the real file was streamed into is taken back once the pointer's commit landed: Git LFS keeps
    # the file, and an artifact may be gigabytes (issue 29)
    raw = git(lfs_repo, "hash-object", "--no-filters", path).strip()
    assert subprocess.run(["git", "cat-file", "-e", raw], cwd=lfs_repo, check=False).returncode != 0
    for args in (["--rev", "HEAD", "--strict"], ["--strict"]):
        code, out = _verify(lfs_repo, capsys, *args)
        assert code == 0, out


@both_formats
def test_a_pointer_where_no_lfs_attribute_applies_is_an_error_not_the_file(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a pull request swaps an approved artifact's bytes for a pointer naming them, with no LFS attributes:
    # the oid and size match the record, and the bytes are gone from Git
    episode = _episode_with_video(repo)
    assert main(["--repo", str(repo), "approve", "--episode", episode, "--by", "editor"]) == 0
    (repo / ART).write_bytes(_pointer(hashlib.sha256(VIDEO).hexdigest(), len(VIDEO)))
    git(repo, "commit", "-qam", "lighter")
    for args in (["--rev", "HEAD"], ["--rev", "HEAD", "--strict", "--against", "HEAD~1"], []):
        code, out = _verify(repo, capsys, *args)
        assert code == 1, (args, out)
        assert f"{ART}: error: is a Git LFS pointer, but no filter=lfs attribute applies to it here" in "\n".join(out)
    # diff names the same rule verify --against does (issue 28): the record is unchanged, the bytes are not
    capsys.readouterr()
    assert main(["--repo", str(repo), "diff", "--strict", "HEAD~1", "HEAD"]) == 1
    assert "artifact changed after approval" in capsys.readouterr().out
    code, out = _verify(repo, capsys, "--rev", "HEAD", "--against", "HEAD~1")
    assert "artifact changed after approval" in "\n".join(out), out
    # and the next command on the episode meets the same rule before it writes anything (issue 29)
    head = git(repo, "rev-parse", "HEAD")
    assert main(["--repo", str(repo), "complete", "--episode", episode]) == 7
    assert "artifact changed after approval" in capsys.readouterr().err
    assert git(repo, "rev-parse", "HEAD") == head
    assert status(repo) == ""
