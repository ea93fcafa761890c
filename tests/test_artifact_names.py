"""One rule for artifact names (issue 29, point 5): a path that is, or passes through, a record's name is
refused when CMD reports it (before anything is committed), by verify and by diff, and after a merge."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobstate.core.layout import episode_dir
from jobstate.core.names import validate_artifact_path
from jobstate.errors import UsageError
from jobstate.main import main

from .conftest import git, stable_cmd
from .merges import EID, cli, merge_pr, refused_in_review


@pytest.mark.parametrize("path", ["costs.yaml/cover.png", "costs.yaml", "Approval.yaml/x", "episode.yaml/a/b"])
def test_a_path_through_a_record_name_is_refused(path: str) -> None:
    with pytest.raises(UsageError, match="record"):
        validate_artifact_path(path)


@pytest.mark.parametrize("path", ["cover.png", "img/costs.yaml", "costs.yaml.png"])
def test_other_paths_are_artifacts(path: str) -> None:
    assert validate_artifact_path(path) == path


def _report(artifact: str) -> str:
    return (
        "import json, os, pathlib\n"
        f"out = pathlib.Path(os.environ['JOBSTATE_OUTPUT_DIR']) / {artifact!r}\n"
        "out.parent.mkdir(parents=True, exist_ok=True)\n"
        "out.write_text('cover')\n"
        "report = {'remote_ref': 'task-1', 'artifacts': [" + repr(artifact) + "]}\n"
        "pathlib.Path(os.environ['JOBSTATE_RESULT']).write_text(json.dumps(report))\n"
    )


def test_an_artifact_reported_through_a_record_name_is_refused_before_anything_is_committed(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--repo", str(repo), "allocate", "--key", "k", "--week", "2026-W32"]) == 0
    code, err = cli(
        repo, capsys, "run", "--episode", EID, "--step", "gen", "--", *stable_cmd(_report("costs.yaml/cover.png"))
    )
    assert code == 2, err
    assert "passes through the jobstate record 'costs.yaml'" in err, err
    # the intent is the last commit: neither the reference nor the artifact was committed half-way
    assert git(repo, "log", "-1", "--format=%s").startswith("intent "), git(repo, "log", "--oneline")


def test_an_artifact_recorded_through_a_record_name_by_a_merge_is_flagged_and_refused(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--repo", str(repo), "allocate", "--key", "k", "--week", "2026-W32"]) == 0
    code, err = cli(repo, capsys, "run", "--episode", EID, "--step", "gen", "--", *stable_cmd(_report("a.txt")))
    assert code == 0, err
    record = repo / episode_dir(EID) / "artifacts.yaml"

    def edit() -> None:
        text = record.read_text()
        record.write_text(text + text.split("artifacts:\n", 1)[1].replace("  a.txt:", "  costs.yaml/cover.png:"))

    merge_pr(repo, edit)
    refused_in_review(repo, capsys, "costs.yaml/cover.png")
    code, err = cli(repo, capsys, "approve", "--episode", EID, "--by", "editor")
    assert code == 7, err
    assert "passes through the jobstate record 'costs.yaml'" in err, err
