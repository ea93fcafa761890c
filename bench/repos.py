"""Bench helpers: state repositories of any size, built fast (one fast-import commit)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from tests.bigrepo import add_episodes, episode_id, episode_place, episode_yaml, week_of

__all__ = ["episode_id", "week_of"]

GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@jobstate.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@jobstate.invalid",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def per_call(fn: Callable[[int], object], calls: int, rounds: int = 1) -> float:
    """Mean seconds per call over ``calls`` calls; with ``rounds``, the best round's mean
    (this machine is shared and noisy: the fastest round is the one least disturbed)."""
    best = float("inf")
    for r in range(rounds):
        start = time.perf_counter()
        for i in range(calls):
            fn(r * calls + i)
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def new_repo(repo: Path, *, gc: bool = False) -> None:
    """``git init`` + ``jobstate init``; without ``gc``, no background git gc races the figures."""
    from jobstate.store.init import init

    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")  # the branch every bench clone is on: init names it the state's branch
    store, _ = init(repo)
    store.close()
    if not gc:
        git(repo, "config", "gc.auto", "0")


def episode_dir(repo: Path, n: int, key: str) -> Path:
    """state/<year>/<period>/<id>/ of the n-th episode, with its episode.yaml written (not committed)."""
    d = repo / episode_place(n, flat=False)
    d.mkdir(parents=True)
    (d / "episode.yaml").write_bytes(episode_yaml(n, key))
    return d


def make_repo(parent: Path, episodes: int, *, flat: bool = False) -> Path:
    """A state repo with ``episodes`` committed episodes spread over weeks (one fast-import commit)."""
    repo = parent / f"repo-{episodes}{'-flat' if flat else ''}"
    new_repo(repo)
    add_episodes(repo, episodes, flat=flat)
    git(repo, "repack", "-adq")  # as a repository that has lived is: packed (git gc --auto sees to it)
    return repo


def git_size(repo: Path) -> int:
    """Bytes of every file under .git."""
    total = 0
    for here, _dirs, files in os.walk(repo / ".git"):
        for name in files:
            with contextlib.suppress(FileNotFoundError):  # a background gc removed it meanwhile
                total += os.lstat(os.path.join(here, name)).st_size
    return total


def objects(repo: Path) -> dict[str, int]:
    """``git count-objects -v``: count (loose), size (KiB loose), packs, size-pack (KiB)."""
    out: dict[str, int] = {}
    for line in git(repo, "count-objects", "-v").splitlines():
        name, _, value = line.partition(": ")
        if value.strip().isdigit():
            out[name] = int(value)
    return out


def wait_for_gc(repo: Path, limit: float = 300) -> None:
    """Until a background ``git gc`` (its gc.pid lock) is done."""
    deadline = time.monotonic() + limit
    while (repo / ".git" / "gc.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.2)


def mib(n: float) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def make_verify_repo(parent: Path, episodes: int, big: int, big_bytes: int) -> tuple[Path, list[Path]]:
    """``episodes`` committed episodes, each with records and an artifact; ``big`` of them large."""
    repo = parent / "verify-repo"
    new_repo(repo)
    artifacts: list[Path] = []
    block = os.urandom(1 << 20)
    for n in range(episodes):
        d = episode_dir(repo, n, f"k:{n}")
        art = d / "final.bin"
        digest = hashlib.sha256()
        with art.open("wb") as fh:
            if n < big:
                for i in range(big_bytes >> 20):
                    chunk = block[i % 7 :] + block[: i % 7] + n.to_bytes(8, "big")
                    fh.write(chunk)
                    digest.update(chunk)
            else:
                data = f"small artifact {n}\n".encode()
                fh.write(data)
                digest.update(data)
        size = art.stat().st_size
        (d / "artifacts.yaml").write_text(
            f"schema: 1\nartifacts:\n  final.bin:\n    sha256: {digest.hexdigest()}\n"
            f"    size: {size}\n    step: generate\n"
        )
        (d / "costs.yaml").write_text(
            f"schema: 1\nentries:\n- step: generate\n  amount: '12.40'\n  currency: USD\n  remote_ref: t-{n}\n"
            "  at: '2026-01-01T00:00:00Z'\n"
        )
        artifacts.append(art)
    fast = ["-c", "core.compression=0", "-c", "core.looseCompression=0"]
    git(repo, *fast, "add", "-A")
    git(repo, *fast, "commit", "-qm", "bench state")
    return repo, artifacts
