"""Peak memory (RSS) hashing an artifact, 1 KB beside 512 MB, or 5 GB with FULL=1 (issue 29, point 4: memory
stays flat).

The large file is sparse (created in no time, read as zeros); each figure is one fresh interpreter's
peak RSS, so the interpreter's own size is in both and a flat figure means a streaming read."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SMALL, LARGE, HUGE = 1024, 512 * 1024 * 1024, 5 * 1024 * 1024 * 1024

# each: a way jobstate reads an artifact, then the process's peak RSS in KiB (Linux: VmHWM)
READS = {
    "hash (verify, approve)": "from jobstate.hashing import sha256_file as f; f(p)",
    # what a step does with its artifact: stream it into a blob of the repository beside it, hashing it, then
    # copy it out of the blob into the episode directory (the transaction's put)
    "record (a step's artifact)": (
        "from functools import partial; from jobstate.atomic import atomic_write as w; "
        "from jobstate.paid.staging import store_artifact as s; from jobstate.git.repo import GitRepo as G; "
        "g = G(p.parent); b, _d, _n = s(g, p.parent, p.name); w(p.parent / 'copy', partial(g.stream_blob, b.sha))"
    ),
    # what every later paid step's guard does with each committed file of the episode
    "guard (a later step's check)": "from jobstate.git.repo import GitRepo as G; G(p.parent).file_blob_sha(p)",
}


def _peak_kib(code: str, path: Path) -> int:
    # VmHWM, not ru_maxrss: the latter keeps the forking parent's peak across exec
    probe = (
        f"import re, sys; from pathlib import Path; p = Path(sys.argv[1]); {code}; "
        "print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1])"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(path)], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return int(out.split()[-1])


def bench_memory(large_size: int = LARGE) -> dict[str, tuple[float, float]]:
    """(peak MiB at 1 KB, at ``large_size``) for each way an artifact is read."""
    found: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="jobstate-bench-mem-") as tmp:
        subprocess.run(["git", "init", "-q", tmp], check=True)
        small, large = Path(tmp) / "small.bin", Path(tmp) / "large.bin"
        small.write_bytes(b"x" * SMALL)
        with large.open("wb") as fh:
            fh.truncate(large_size)  # sparse: no disk, no time
        for label, code in READS.items():
            found[label] = (_peak_kib(code, small) / 1024, _peak_kib(code, large) / 1024)
        os.unlink(large)
    return found
