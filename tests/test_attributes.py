"""Attributes that would change the bytes of jobstate's files (issue 29, 2): a ``.gitattributes`` line that
converts end of lines, expands ``$Id$``, re-encodes or filters state/, history/ or jobstate.yaml is flagged by
verify and diff and refuses every committing command (exit 7, nothing written); a fresh clone's retry of its
own key says why instead of failing on the converted file."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobstate.core.layout import episode_dir

from .conftest import git, run_cli

EID = "2026-W30-0"
RECORD = f"{episode_dir(EID)}/episode.yaml"


def _merge_attributes(repo: Path, line: str, where: str = ".gitattributes") -> None:
    """A pull request that adds ``line`` to ``where``, merged as people merge them."""
    git(repo, "switch", "-q", "-c", "attributes")
    file = repo / where
    file.parent.mkdir(parents=True, exist_ok=True)
    text = file.read_text() if file.exists() else ""
    file.write_text(text + line + "\n")
    git(repo, "add", where)
    git(repo, "commit", "-qm", "normalise line endings")
    git(repo, "switch", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "attributes", "-m", "Merge pull request #8")


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("* text=auto eol=crlf", "text=auto"),
        ("*.yaml ident", "ident"),
        ("/state/** eol=crlf !text", "eol=crlf"),
        ("*.yaml working-tree-encoding=UTF-16", "working-tree-encoding=UTF-16"),
        ("*.yaml filter=tidy", "filter=tidy"),
    ],
)
def test_a_merged_attribute_line_that_changes_state_bytes_is_flagged_and_refused(
    repo: Path, tmp_path: Path, line: str, shown: str
) -> None:
    assert run_cli("allocate", "--key", "weekly", "--week", "2026-W30", cwd=repo).stdout.strip() == EID
    _merge_attributes(repo, line)
    proc = run_cli("verify", "--rev", "HEAD", cwd=repo)
    assert proc.returncode == 1, proc.stdout
    assert f"{RECORD}: error: git's attributes give it {shown}" in proc.stdout, proc.stdout
    shown_diff = run_cli("diff", "HEAD~2", "--strict", cwd=repo)
    assert shown_diff.returncode == 1, shown_diff.stdout
    assert f"{RECORD}: git's attributes give it {shown}" in shown_diff.stdout, shown_diff.stdout
    head = git(repo, "rev-parse", "HEAD")
    for args in (
        ("allocate", "--key", "next", "--week", "2026-W30"),
        ("run", "--episode", EID, "--step", "generate", "--", "sh", "-c", f"touch {tmp_path}/ran"),
    ):
        proc = run_cli(*args, cwd=repo)
        assert proc.returncode == 7, (args, proc.stderr)
        assert "git's attributes give it" in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "ran").exists()  # refused before the paid command
    assert git(repo, "rev-parse", "HEAD") == head
    assert git(repo, "status", "--porcelain") == ""


def test_a_fresh_clone_of_converting_attributes_refuses_the_retry_with_the_reason(repo: Path, tmp_path: Path) -> None:
    assert run_cli("allocate", "--key", "weekly", "--week", "2026-W30", cwd=repo).stdout.strip() == EID
    _merge_attributes(repo, "* text=auto eol=crlf")
    clone = tmp_path / "clone"
    git(repo.parent, "clone", "-q", str(repo), str(clone))
    assert b"\r\n" in (clone / RECORD).read_bytes()  # what git's checkout made of it
    proc = run_cli("allocate", "--key", "weekly", "--week", "2026-W30", cwd=clone)
    assert proc.returncode == 7, proc.stderr
    assert f"{RECORD}: git's attributes give it text=auto" in proc.stderr, proc.stderr
    assert "jobstate verify" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_an_attributes_file_inside_state_is_seen_too(repo: Path) -> None:
    assert run_cli("allocate", "--key", "weekly", "--week", "2026-W30", cwd=repo).stdout.strip() == EID
    _merge_attributes(repo, "*.yaml ident", where="state/.gitattributes")
    proc = run_cli("verify", "--rev", "HEAD", cwd=repo)
    assert proc.returncode == 1, proc.stdout
    assert f"{RECORD}: error: git's attributes give it ident" in proc.stdout, proc.stdout
    proc = run_cli("allocate", "--key", "next", "--week", "2026-W30", cwd=repo)
    assert proc.returncode == 7, proc.stderr


def test_local_attributes_refuse_committing_commands_too(repo: Path) -> None:
    info = Path(git(repo, "rev-parse", "--git-path", "info/attributes").strip())
    info = info if info.is_absolute() else repo / info
    info.parent.mkdir(exist_ok=True)
    info.write_text("/state/** text eol=crlf\n")
    proc = run_cli("allocate", "--key", "next", "--week", "2026-W30", cwd=repo)
    assert proc.returncode == 7, proc.stderr
    assert f"{RECORD}: git's attributes give it text" in proc.stderr, proc.stderr
    assert git(repo, "status", "--porcelain") == ""
    info.write_text("")
    assert run_cli("allocate", "--key", "next", "--week", "2026-W30", cwd=repo).returncode == 0


def test_attributes_that_leave_bytes_alone_pass(repo: Path) -> None:
    # LFS for artifacts, binary, diff drivers, and lines for files jobstate does not keep
    _merge_attributes(
        repo,
        "*.mp4 filter=lfs diff=lfs merge=lfs -text\n*.png binary\n*.yaml diff=yaml linguist-generated\n"
        "/docs/** text eol=crlf\n"
        # a project-wide normalisation, with jobstate's own lines after it (what the refusal advises)
        "* text=auto eol=crlf\n/state/** -text -ident -working-tree-encoding\n"
        "/history/** -text -ident -working-tree-encoding\n/jobstate.yaml -text -ident -working-tree-encoding",
    )
    assert run_cli("allocate", "--key", "weekly", "--week", "2026-W30", cwd=repo).returncode == 0
    assert run_cli("verify", "--rev", "HEAD", cwd=repo).returncode == 0
    assert run_cli("verify", cwd=repo).returncode == 0
    assert run_cli("diff", "HEAD~1", "--strict", cwd=repo).returncode == 0


def test_lfs_on_a_record_is_refused(repo: Path) -> None:
    assert run_cli("allocate", "--key", "weekly", "--week", "2026-W30", cwd=repo).stdout.strip() == EID
    _merge_attributes(repo, "*.yaml filter=lfs diff=lfs merge=lfs -text")
    proc = run_cli("verify", "--rev", "HEAD", cwd=repo)
    assert proc.returncode == 1, proc.stdout
    assert f"{RECORD}: error: git's attributes give it filter=lfs" in proc.stdout, proc.stdout
