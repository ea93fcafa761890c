"""A clone with core.autocrlf=true (Windows editors' default): jobstate's files are not converted (issue 30, 3)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .conftest import git, run_cli, stable_cmd

WRITE_TEXT = """\
import json, os, pathlib
out = pathlib.Path(os.environ["JOBSTATE_OUTPUT_DIR"])
(out / "notes.txt").write_bytes(b"line one\\nline two\\n")
pathlib.Path(os.environ["JOBSTATE_RESULT"]).write_text(json.dumps({"artifacts": ["notes.txt"]}))
"""


def _crlf_clone(source: Path, dest: Path) -> Path:
    git(source.parent, "clone", "-q", "-c", "core.autocrlf=true", str(source), str(dest))
    return dest


def test_every_committing_command_works_in_an_autocrlf_clone(repo: Path, tmp_path: Path) -> None:
    run_cli("allocate", "--key", "first", "--week", "2026-W33", cwd=repo)
    clone = _crlf_clone(repo, tmp_path / "clone")
    assert b"\r\n" not in (clone / "jobstate.yaml").read_bytes()
    assert git(clone, "status", "--porcelain") == ""
    steps = [
        ("allocate", "--key", "second", "--week", "2026-W33"),
        ("run", "--episode", "2026-W33-1", "--step", "write", "--", *stable_cmd(WRITE_TEXT)),
        ("approve", "--episode", "2026-W33-1", "--by", "editor"),
        ("complete", "--episode", "2026-W33-1"),
        ("retire", "2026-W33-0", "--by", "ops", "--reason", "a test run"),
    ]
    for args in steps:
        proc = run_cli(*args, cwd=clone)
        assert proc.returncode == 0, (args, proc.stderr)
    assert git(clone, "status", "--porcelain") == ""
    # a second autocrlf clone checks the text artifact out as committed: its hash is right
    again = _crlf_clone(clone, tmp_path / "again")
    assert (again / "state/2026/2026-W33/2026-W33-1/notes.txt").read_bytes() == b"line one\nline two\n"
    verify = run_cli("verify", cwd=again)
    assert verify.returncode == 0, verify.stdout
    assert "0 problems" in verify.stdout


def test_an_older_repository_in_an_autocrlf_clone_gets_advice_that_works(repo: Path, tmp_path: Path) -> None:
    git(repo, "rm", "-q", ".gitattributes")
    git(repo, "commit", "-qm", "as an older jobstate left it")
    run_cli("allocate", "--key", "first", "--week", "2026-W33", cwd=repo)
    clone = _crlf_clone(repo, tmp_path / "clone")
    assert b"\r\n" in (clone / "jobstate.yaml").read_bytes()
    head = git(clone, "rev-parse", "HEAD")
    refused = run_cli("allocate", "--key", "second", "--week", "2026-W33", cwd=clone)
    assert refused.returncode == 2
    assert "end-of-line conversion" in refused.stderr
    assert git(clone, "rev-parse", "HEAD") == head
    advice = refused.stderr.split("put them back unconverted with: ", 1)[1].split("; then run", 1)[0]
    subprocess.run(["sh", "-c", advice], cwd=clone, check=True)
    assert run_cli("init", cwd=clone).returncode == 0
    proc = run_cli("allocate", "--key", "second", "--week", "2026-W33", cwd=clone)
    assert proc.returncode == 0, proc.stderr
    assert git(clone, "status", "--porcelain") == ""


def test_jobstate_attributes_win_over_a_text_attribute_written_before_init(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    git(plain, "init", "-q")
    (plain / ".gitattributes").write_text("* text eol=crlf\n")
    git(plain, "add", ".gitattributes")
    git(plain, "commit", "-qm", "the team's attributes")
    assert run_cli("init", cwd=plain).returncode == 0
    clone = _crlf_clone(plain, tmp_path / "clone")
    assert b"\r\n" not in (clone / "jobstate.yaml").read_bytes()
    assert run_cli("allocate", "--key", "k", "--week", "2026-W33", cwd=clone).returncode == 0
