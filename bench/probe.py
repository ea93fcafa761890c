"""What a declared probe costs a paid step that never needs it: nothing (issue 32).

Two repositories, one with ``steps: generate: probe:`` in jobstate.yaml and one without; the same
paid step (the library's ``run_step_command`` with a small CMD that reports a task and a cost) runs
in each, interleaved, best of three rounds. The probe writes a marker if it is ever started.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from repos import git, new_repo, per_call

from jobstate.allocation.allocation import allocate
from jobstate.core.periods import parse_period
from jobstate.paid.run_protocol import run_step_command
from jobstate.store.store import Store

_REPORT = {"remote_ref": "task-1", "cost": {"amount": "1.00", "currency": "USD"}}
_CMD = f"import os; open(os.environ['JOBSTATE_RESULT'], 'w').write({json.dumps(_REPORT)!r})"


def _repo(root: Path, name: str, marker: Path | None) -> Path:
    repo = root / name
    new_repo(repo)
    if marker is not None:
        probe = json.dumps([sys.executable, "-c", f"open({str(marker)!r}, 'w')"])
        config = repo / "jobstate.yaml"
        config.write_text(config.read_text() + f"steps:\n  generate: {{probe: {probe}}}\n")
        git(repo, "commit", "-qam", "declare a probe")
    return repo


def bench_probe(calls: int = 3) -> tuple[float, bool]:
    """(run with a declared probe / run without, whether the probe ever ran)."""
    with tempfile.TemporaryDirectory(prefix="jobstate-bench-probe-") as tmp:
        root = Path(tmp)
        marker = root / "probe-ran"
        plain, probed = _repo(root, "plain", None), _repo(root, "probed", marker)
        stores = {repo: Store(repo) for repo in (plain, probed)}
        counters = {plain: 0, probed: 0}

        def one(repo: Path) -> Callable[[int], None]:
            return lambda _i: step(repo)

        def step(repo: Path) -> None:
            store = stores[repo]
            counters[repo] += 1
            eid = allocate(store, f"k{counters[repo]}", parse_period("2026-W40")).episode_id
            run_step_command(store, eid, "generate", [sys.executable, "-c", _CMD])

        best = {plain: float("inf"), probed: float("inf")}
        for _round in range(3):
            for repo in (plain, probed):
                best[repo] = min(best[repo], per_call(one(repo), calls))
        for store in stores.values():
            store.close()
        return best[probed] / best[plain], marker.exists()
