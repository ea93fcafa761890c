"""Every writer's change passes the lifecycle model first (store.records.check_change): allocate,
retire and init as much as the paid-step commands."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobstate.allocation.allocation import allocate
from jobstate.core.layout import episode_path, retired_path
from jobstate.core.periods import parse_period
from jobstate.errors import ModelRefused
from jobstate.store.records import check_change, episode_records
from jobstate.store.store import Store

from .conftest import run_cli


def test_a_change_of_an_episodes_key_is_refused_before_anything_is_written(store: Store, repo: Path) -> None:
    eid = allocate(store, "weekly", parse_period("2026-W32")).episode_id
    text = (repo / episode_path(eid)).read_bytes()
    with pytest.raises(ModelRefused, match="allocation_key"):
        check_change(store, {episode_path(eid): text.replace(b"allocation_key: weekly", b"allocation_key: other")})
    assert (repo / episode_path(eid)).read_bytes() == text
    assert episode_records(store, eid).allocation_key == "weekly"


def test_an_episode_removed_with_its_tombstone_is_no_change_of_its_records(store: Store, repo: Path) -> None:
    eid = allocate(store, "weekly", parse_period("2026-W32")).episode_id
    check_change(store, {episode_path(eid): None, retired_path(eid): b"schema: 1\n"})
    proc = run_cli("retire", eid, "--by", "ops", "--reason", "a test", cwd=repo)
    assert proc.returncode == 0, proc.stderr
