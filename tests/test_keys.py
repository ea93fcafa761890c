"""Allocation keys have one canonical form (NFC, no surrounding space); confusable keys are refused (issue 30, 1)."""

from __future__ import annotations

import unicodedata
from pathlib import Path

from jobstate.core.keys import confusable_with, key_form_problem, key_problems
from jobstate.core.layout import episode_dir

from .conftest import git, run_cli

NFC = "épisode:été-2026"
NFD = unicodedata.normalize("NFD", NFC)


def test_the_same_key_in_nfd_or_padded_is_refused_not_a_second_episode(repo: Path) -> None:
    first = run_cli("allocate", "--key", NFC, "--week", "2026-W33", cwd=repo)
    assert first.returncode == 0, first.stderr
    assert NFD != NFC
    for other in (NFD, f"  {NFC}  ", f"{NFC}\u00a0"):
        proc = run_cli("allocate", "--key", other, "--week", "2026-W33", cwd=repo)
        assert proc.returncode == 2, proc.stderr
        assert "canonical form" in proc.stderr
    listed = run_cli("list", cwd=repo).stdout
    assert listed.count("2026-W33-") == 1, listed


def test_a_key_differing_only_in_case_or_width_is_refused_in_its_period(repo: Path) -> None:
    assert run_cli("allocate", "--key", "Run:42", "--week", "2026-W33", cwd=repo).returncode == 0
    head = git(repo, "rev-parse", "HEAD")
    for twin in ("run:42", "ＲＵＮ:42"):
        proc = run_cli("allocate", "--key", twin, "--week", "2026-W33", cwd=repo)
        assert proc.returncode == 4, proc.stderr
        assert "reads as 'Run:42'" in proc.stderr
    assert git(repo, "rev-parse", "HEAD") == head  # nothing written
    # in another period the same text is another run
    assert run_cli("allocate", "--key", "run:42", "--week", "2026-W34", cwd=repo).returncode == 0


def test_scheduler_keys_are_held_to_the_same_form(repo: Path) -> None:
    env = {"GITHUB_RUN_ID": "7", "GITHUB_RUN_ATTEMPT": "1", "GITHUB_REPOSITORY": "o/r", "GITHUB_EVENT_NAME": "push"}
    for command in ("key", "allocate"):
        proc = run_cli(command, "--from", "github-actions", "--job-name", NFD, cwd=repo, env=env)
        assert proc.returncode == 2, (proc.stdout, proc.stderr)
        assert "NFC" in proc.stderr
    proc = run_cli("key", "--from", "github-actions", "--job-name", NFC, cwd=repo, env=env)
    assert proc.returncode == 0, proc.stderr


def test_verify_and_diff_flag_a_committed_key_that_is_not_canonical(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD").strip()
    assert run_cli("allocate", "--key", "plain", "--week", "2026-W33", cwd=repo).returncode == 0
    path = repo / episode_dir("2026-W33-0") / "episode.yaml"
    # an older jobstate, or a hand edit, wrote a key in NFD
    path.write_text(
        path.read_text(encoding="utf-8").replace("allocation_key: plain", f"allocation_key: {NFD}"), encoding="utf-8"
    )
    git(repo, "commit", "-qam", "an episode with an NFD key")
    verify = run_cli("verify", cwd=repo)
    assert verify.returncode == 0, verify.stdout
    assert "not in Unicode normalization form NFC" in verify.stdout
    assert run_cli("verify", "--strict", cwd=repo).returncode == 1
    diff = run_cli("diff", "--strict", base, cwd=repo)
    assert diff.returncode == 1, diff.stdout
    assert "key not canonical" in diff.stdout


def test_key_rules() -> None:
    assert key_form_problem(NFC) is None
    assert key_form_problem(NFD) is not None
    assert key_form_problem(" x") is not None
    assert confusable_with("ABC", ["abc", "ABC"]) == "abc"
    assert confusable_with("ABC", ["ABD"]) is None
    assert (
        key_problems(
            {"2026-W33-0": ("2026-W33", "a"), "2026-W33-1": ("2026-W33", "A"), "2026-W34-0": ("2026-W34", "a")}
        )[0][0]
        == "2026-W33-0"
    )


def test_verify_says_one_episode_not_one_episodes(repo: Path) -> None:
    run_cli("allocate", "--key", "only", "--week", "2026-W33", cwd=repo)
    assert "verify: 1 episode, 0 artifacts" in run_cli("verify", cwd=repo).stdout
