"""jobstate.store.yamlio: safe loading."""

from __future__ import annotations

from pathlib import Path

from jobstate.core.layout import episode_dir
from jobstate.core.periods import parse_period

from .conftest import run_cli

W32 = parse_period("2026-W32")

BOMB = """\
schema: 1
episode_id: 2026-W32-0
period_id: 2026-W32
sequence: 0
allocation_key: a
a1: &a1 [x, x, x, x, x, x, x, x, x]
a2: &a2 [*a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1]
a3: &a3 [*a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2]
a4: &a4 [*a3, *a3, *a3, *a3, *a3, *a3, *a3, *a3, *a3]
a5: &a5 [*a4, *a4, *a4, *a4, *a4, *a4, *a4, *a4, *a4]
a6: &a6 [*a5, *a5, *a5, *a5, *a5, *a5, *a5, *a5, *a5]
a7: &a7 [*a6, *a6, *a6, *a6, *a6, *a6, *a6, *a6, *a6]
allocated_at: *a7
status: allocated
"""


def test_yaml_alias_bombs_are_refused_quickly(repo: Path) -> None:
    path = repo / episode_dir("2026-W32-0") / "episode.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(BOMB)
    for args in (["show", "2026-W32-0"], ["allocate", "--key", "b", "--week", "2026-W32"], ["verify"]):
        proc = run_cli(*args, cwd=repo, timeout=30, process=True)  # a hang fails the test
        assert proc.returncode in (1, 7), proc.stderr
        assert "alias" in proc.stderr + proc.stdout
