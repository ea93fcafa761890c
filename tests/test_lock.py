"""jobstate.store.lock: the host-local lock and its holder record."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jobstate.errors import LockTimeout
from jobstate.store.lock import FileLock, read_holder

_HOLD = """
import sys, time
from pathlib import Path
from jobstate.store.lock import FileLock
with FileLock(Path(sys.argv[1]), 5):
    print("held", flush=True)
    time.sleep(30)
"""


def test_a_held_lock_times_out_naming_its_holder_and_a_free_one_has_none(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    assert read_holder(path) is None
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        found = read_holder(path)
        assert found is not None
        assert found["pid"] == holder.pid
        with pytest.raises(LockTimeout, match=f"pid {holder.pid}") as info, FileLock(path, 0):
            pass
        assert info.value.exit_code == 3
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    assert read_holder(path) is None  # a killed holder releases the lock by itself
    with FileLock(path, 0):
        pass
