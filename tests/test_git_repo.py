from __future__ import annotations

import subprocess
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobstate.git.objects import BLOB_MODE, FORMATS, TREE_MODE, blob_sha
from jobstate.git.repo import GitRepo
from jobstate.git.settings import gc_due

from .conftest import both_formats, git

_names = st.text(alphabet="abc-./_019W", min_size=1, max_size=6).filter(lambda n: "/" not in n and n not in (".", ".."))


@both_formats
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(_names, st.booleans(), min_size=1, max_size=30), st.lists(_names, max_size=8), st.data())
def test_spliced_trees_equal_what_git_mktree_writes(
    repo: Path, entries: dict[str, bool], removals: list[str], data: st.DataObject
) -> None:
    g = GitRepo(repo)
    blob = g.write_object(b"blob", b"x\n")
    subtree = g.write_object(b"tree", BLOB_MODE + b" f\0" + bytes.fromhex(blob))
    changes = {n: ((TREE_MODE, subtree) if is_dir else (BLOB_MODE, blob)) for n, is_dir in entries.items()}
    tree = g.edit_tree(None, changes)
    current = dict(changes)
    for name in removals:
        tree = g.edit_tree(tree, {name: None})
        current.pop(name, None)
    extra = data.draw(_names)
    current[extra] = (BLOB_MODE, blob)
    tree = g.edit_tree(tree, {extra: (BLOB_MODE, blob)})
    listing = "".join(
        f"{'040000 tree' if mode == TREE_MODE else '100644 blob'} {sha}\t{name}\n"
        for name, (mode, sha) in ((n, c) for n, c in current.items() if c is not None)
    )
    expected = subprocess.run(["git", "mktree"], cwd=repo, input=listing, capture_output=True, text=True, check=True)
    assert tree == expected.stdout.strip()


@both_formats
def test_blob_sha_matches_git(repo: Path, object_format: str) -> None:
    (repo / "f").write_bytes(b"hello\0world\n")
    assert blob_sha(b"hello\0world\n", FORMATS[object_format]) == git(repo, "hash-object", "f").strip()
    assert GitRepo(repo).format is FORMATS[object_format]


@both_formats
def test_update_ref_is_a_compare_and_swap(repo: Path) -> None:
    g = GitRepo(repo)
    head = g.head_commit()
    assert head is not None
    commit = g.build_commit(head, {"x.txt": b"x"}, "x")
    assert g.update_ref("refs/heads/main", commit, g.format.zero, "stale") is False
    assert g.head_commit() == head
    # a real commit that is not the tip (what another host's push leaves a racer holding) is stale too
    other = g.build_commit(head, {"y.txt": b"y"}, "y")
    assert other not in (head, g.format.zero)
    assert g.update_ref("refs/heads/main", commit, other, "stale") is False
    assert g.head_commit() == head
    assert g.update_ref("refs/heads/main", commit, head, "fresh") is True
    assert git(repo, "log", "-1", "--format=%s").strip() == "x"


def test_refs_are_read_from_packed_refs_too(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "pack-refs", "--all")
    git(repo, "gc", "-q")
    g = GitRepo(repo)
    assert g.head_commit() == head
    assert g.commit_tree_of(head) == git(repo, "rev-parse", "HEAD^{tree}").strip()


def _gc_due(gitrepo: GitRepo) -> bool:
    return gc_due(gitrepo.common_dir / "objects", 38, gitrepo.settings)


def test_gc_auto_is_started_only_when_git_would_pack(repo: Path) -> None:
    # git's estimate (builtin/gc.c): more loose objects in objects/17 than gc.auto/256, or too many packs
    git(repo, "config", "gc.auto", "512")  # a threshold of 2 objects in objects/17
    gitrepo = GitRepo(repo)
    fan = repo / ".git" / "objects" / "17"
    fan.mkdir(exist_ok=True)
    for n in range(2):
        (fan / f"{n:038x}").write_bytes(b"")
    assert not _gc_due(gitrepo)
    (fan / f"{2:038x}").write_bytes(b"")
    assert _gc_due(gitrepo)
    git(repo, "config", "gc.auto", "0")  # off, as git reads it
    assert not _gc_due(GitRepo(repo))


def test_more_pathspecs_than_one_command_line_holds_are_asked_in_parts(tmp_path: Path) -> None:
    """A migration names every episode: 1,500 paths of 110 bytes are 165 KB of pathspecs, asked of
    git in parts; each answer is whole, nothing twice."""
    git(tmp_path, "init", "-q")
    names = [f"d/{'n' * 100}{i:05d}.txt" for i in range(1500)]
    (tmp_path / "d").mkdir()
    for name in names:
        (tmp_path / name).write_text("x\n")
    git(tmp_path, "add", "d")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "many")
    (tmp_path / names[7]).write_text("changed\n")
    (tmp_path / names[1499]).unlink()
    repo = GitRepo(tmp_path)
    listed = [path for _mode, _sha, path in repo.ls_tree("HEAD", *names)]
    assert listed == names
    assert sorted(path for _code, path in repo.status(*names)) == sorted([names[7], names[1499]])
