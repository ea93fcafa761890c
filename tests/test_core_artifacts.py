"""artifacts.yaml has one reader and one writer (jobstate.core.artifacts), for both layouts."""

from __future__ import annotations

from typing import Any

import pytest

from jobstate.core.artifacts import artifact_map, artifacts_from_yaml_dict, artifacts_to_yaml_dict, new_artifact
from jobstate.errors import StateInvalid

SOURCE = "state/2026/2026-W32/2026-W32-0/artifacts.yaml"
SHA = "ab" * 32


def test_records_are_typed_and_written_back_in_path_order() -> None:
    found = {"z.mp4": new_artifact(SHA, 10, "generate"), "a.png": new_artifact(SHA, 0, "cover")}
    data = artifacts_to_yaml_dict(found)
    assert list(data["artifacts"]) == ["a.png", "z.mp4"]
    assert data["artifacts"]["z.mp4"] == {"sha256": SHA, "size": 10, "step": "generate"}
    assert artifacts_from_yaml_dict(data, SOURCE) == dict(sorted(found.items()))


def test_the_legacy_layout_is_read_and_kept_as_it_was() -> None:
    legacy = artifact_map({"final.mp4": f"sha256:{SHA}"}, "episode.yaml")["final.mp4"]
    assert (legacy.sha256, legacy.size, legacy.step) == (SHA, None, None)
    assert legacy.to_yaml() == f"sha256:{SHA}"
    bare = artifact_map({"final.mp4": SHA}, "episode.yaml", legacy=True)["final.mp4"]
    assert (bare.sha256, bare.size, bare.to_yaml()) == (SHA, None, SHA)  # kept as it was written


def test_the_bare_hex_form_is_legacy_only() -> None:
    with pytest.raises(StateInvalid, match="64 hex digits alone"):
        artifacts_from_yaml_dict({"schema": 1, "artifacts": {"final.mp4": SHA}}, SOURCE)
    with pytest.raises(StateInvalid, match="expected"):
        artifact_map({"final.mp4": SHA.upper()}, "episode.yaml", legacy=True)


@pytest.mark.parametrize(
    "record",
    [
        {"sha256": SHA},
        {"sha256": SHA.upper(), "size": 1},
        {"sha256": SHA, "size": -1},
        {"sha256": SHA, "size": True},
        {"sha256": SHA, "size": 1, "step": 5},
        f"sha256:{SHA[:10]}",
        SHA,
    ],
)
def test_a_malformed_record_is_state_invalid_naming_the_file_and_path(record: Any) -> None:
    with pytest.raises(StateInvalid) as caught:
        artifacts_from_yaml_dict({"schema": 1, "artifacts": {"final.mp4": record}}, SOURCE)
    assert str(caught.value).startswith(
        f"{SOURCE}: artifact 'final.mp4': expected {{sha256: <64 lowercase hex>, size: <bytes>}}"
    )
    problems: list[str] = []
    assert artifact_map({"final.mp4": record, "ok.png": new_artifact(SHA, 1, "s").to_yaml()}, SOURCE, problems)
    assert len(problems) == 1


@pytest.mark.parametrize("value", [["final.mp4"], None, "final.mp4"])
def test_artifacts_must_be_a_mapping(value: Any) -> None:
    with pytest.raises(StateInvalid, match="artifacts must be a mapping"):
        artifacts_from_yaml_dict({"schema": 1, "artifacts": value}, SOURCE)
