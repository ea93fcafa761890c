"""Generates the legacy layout (week-only IDs) that pipelines wrote before jobstate, and the flat
state/<id>/ layout of an older jobstate."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from jobstate.core.layout import HISTORY, RETIRED, describes_episode, episode_of

from .conftest import git

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


def flat_place(path: str) -> str | None:
    """Where the flat layout kept ``path`` (None: not an episode's file)."""
    found = episode_of(path)
    if found is not None:
        eid, rest = found
        return f"{HISTORY}/{eid}.yaml" if rest == HISTORY else f"state/{eid}/{rest}"
    name = describes_episode(path)
    return f"{RETIRED}/{name}.yaml" if name is not None and path.startswith(RETIRED) else None


def flatten(repo: Path) -> None:
    """Turn the state into the flat layout of an older jobstate, as one commit of git mv."""
    for path in git(repo, "ls-files", "state", "history").split("\n"):
        old = flat_place(path) if path else None
        if old is not None:
            (repo / old).parent.mkdir(parents=True, exist_ok=True)
            git(repo, "mv", path, old)
    for top in ("state", "history"):
        for directory in sorted((repo / top).rglob("*"), key=lambda p: -len(p.parts)):  # deepest first
            if directory.is_dir() and not any(directory.iterdir()):
                directory.rmdir()
    git(repo, "commit", "-qm", "the flat layout of an older jobstate")
