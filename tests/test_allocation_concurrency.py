from __future__ import annotations

from pathlib import Path

import pytest

from jobstate.core.layout import episode_dir
from jobstate.core.periods import parse_period
from jobstate.store.store import Store

from .conftest import committed_files, git, status
from .procs import parse_json_lines, run_together


# a concurrency loop of many processes: make test-slow (CI) runs it; test_mixed_new_and_repeated_keys stays fast
@pytest.mark.slow
def test_many_processes_get_distinct_consecutive_sequences(repo: Path, tmp_path: Path) -> None:
    n = 10
    args = [["allocate", "--key", f"run:{i}", "--week", "2026-W32", "--json", "--lock-timeout", "60"] for i in range(n)]
    answers = parse_json_lines(run_together(repo, args, tmp_path / "gate"))
    assert sorted(a["sequence"] for a in answers) == list(range(n))  # type: ignore[type-var]
    assert all(a["created"] for a in answers)
    by_key = {a["allocation_key"]: a["episode_id"] for a in answers}
    assert len(set(by_key.values())) == n
    assert {f"{episode_dir(f'2026-W32-{i}')}/episode.yaml" for i in range(n)} <= committed_files(repo)
    assert git(repo, "rev-list", "--count", "--merges", "HEAD").strip() == "0"
    assert git(repo, "rev-list", "--count", "HEAD").strip() == str(n + 1)
    assert status(repo) == ""


@pytest.mark.slow
def test_same_key_from_many_processes_yields_one_episode(repo: Path, tmp_path: Path) -> None:
    n = 10
    args = [["allocate", "--key", "scheduled-run:2026-08-07", "--date", "2026-08-07", "--json"] for _ in range(n)]
    answers = parse_json_lines(run_together(repo, args, tmp_path / "gate"))
    assert {a["episode_id"] for a in answers} == {"2026-W32-0"}
    assert sum(1 for a in answers if a["created"]) == 1
    assert [p for p in committed_files(repo) if p.startswith("state/2026")] == [
        "state/2026/2026-W32/2026-W32-0/episode.yaml"
    ]
    assert status(repo) == ""


def test_mixed_new_and_repeated_keys(repo: Path, tmp_path: Path) -> None:
    keys = [f"k{i % 4}" for i in range(12)]
    args = [["allocate", "--key", k, "--week", "2026-W40", "--json"] for k in keys]
    answers = parse_json_lines(run_together(repo, args, tmp_path / "gate"))
    by_key: dict[object, set[object]] = {}
    for a in answers:
        by_key.setdefault(a["allocation_key"], set()).add(a["episode_id"])
    assert all(len(v) == 1 for v in by_key.values())
    assert sorted(str(next(iter(v))) for v in by_key.values()) == [f"2026-W40-{i}" for i in range(4)]
    with Store(repo) as s:
        assert [e.sequence for e in s.episodes("2026-W40")] == [0, 1, 2, 3]
    assert parse_period("2026-W40").kind == "iso-week"
