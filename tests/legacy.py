"""Generates the legacy layout (week-only IDs) that pipelines wrote before jobstate."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

LEGACY_EPISODE = """\
week: {week}
remote_tasks: [{ref1}, {ref2}]
approval: {{status: approved, by: editor, at: '{approved}'}}
costs:
- {{step: generate, amount: '12.40', currency: USD, remote_ref: {ref1}}}
- {{step: rework, amount: '3.10', currency: USD, remote_ref: {ref2}}}
completed_at: '{completed}'
artifacts: {{final.mp4: 'sha256:{h1}', cover.png: 'sha256:{h2}'}}
"""


def write_legacy_week(repo: Path, week: str, n: int, *, history: bool = True) -> None:
    """state/<week>/ with episode.yaml and two media files; history/<week>.yaml."""
    d = repo / "state" / week
    d.mkdir(parents=True)
    video = f"video of {week}\n".encode() * (n + 3)
    cover = f"cover of {week}\n".encode()
    (d / "final.mp4").write_bytes(video)
    (d / "cover.png").write_bytes(cover)
    h1, h2 = hashlib.sha256(video).hexdigest(), hashlib.sha256(cover).hexdigest()
    (d / "episode.yaml").write_text(
        LEGACY_EPISODE.format(
            week=week,
            ref1=f"vendor-task-{800 + 2 * n}",
            ref2=f"vendor-task-{801 + 2 * n}",
            approved=f"2026-07-{10 + n:02d}T10:00:00Z",
            completed=f"2026-07-{11 + n:02d}T18:00:00Z",
            h1=h1,
            h2=h2,
        )
    )
    if history:
        (repo / "history").mkdir(exist_ok=True)
        (repo / "history" / f"{week}.yaml").write_text(
            f"week: {week}\ncompleted_at: '2026-07-{11 + n:02d}T18:00:00Z'\n"
            f"artifacts: {{final.mp4: 'sha256:{h1}', cover.png: 'sha256:{h2}'}}\n"
        )


def make_legacy_repo(repo: Path, weeks: list[str], object_format: str = "sha1") -> None:
    """A Git repository in the legacy layout, committed, without jobstate init."""
    repo.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", f"--object-format={object_format}"], cwd=repo, check=True)
    for n, week in enumerate(weeks):
        write_legacy_week(repo, week, n)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "legacy pipeline state"], cwd=repo, check=True)
