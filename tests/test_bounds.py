"""State files above a documented size are refused before parsing (issue 10, class 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobstate.core.layout import MAX_RECORD_BYTES as MAX_STATE_BYTES
from jobstate.core.layout import episode_dir
from jobstate.main import main

from .conftest import git, run_cli

EID = "2026-W32-0"


def _oversized(repo: Path, rel: str) -> None:
    path = repo / rel
    text = path.read_text() if path.exists() else "schema: 1\n"
    path.write_text(text + "#" * (MAX_STATE_BYTES + 1) + "\n")
    git(repo, "commit", "-qam", f"grow {rel}")


@pytest.mark.parametrize("rel", [f"{episode_dir(EID)}/episode.yaml", "jobstate.yaml"])
def test_an_oversized_state_file_is_exit_7_naming_the_file_and_the_limit(
    repo: Path, capsys: pytest.CaptureFixture[str], rel: str
) -> None:
    assert main(["--repo", str(repo), "allocate", "--key", "k", "--week", "2026-W32"]) == 0
    _oversized(repo, rel)
    capsys.readouterr()
    for command in (["show", EID], ["list"], ["approve", "--episode", EID, "--by", "ed"]):
        code = main(["--repo", str(repo), *command])
        err = capsys.readouterr().err
        assert code == 7, (command, err)
        assert rel in err
        assert "MiB limit" in err
    for args in (("verify",), ("verify", "--rev", "HEAD")):
        proc = run_cli(*args, cwd=repo)
        assert proc.returncode == 7, proc.stdout + proc.stderr
        assert f"{rel}: error: " in proc.stdout
        assert "MiB limit" in proc.stdout
