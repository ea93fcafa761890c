from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from jobstate.allocation.allocation import allocate
from jobstate.core.layout import episode_dir, history_path
from jobstate.core.periods import parse_period
from jobstate.paid.step import paid_step
from jobstate.store.init import init
from jobstate.store.store import Store
from jobstate_demo.vendor_sim import VendorSimulator

from .conftest import both_formats, built_once, git, git_init, run_cli, vendor_step
from .snapshots import tree_state

W32 = parse_period("2026-W32")


def _build_pipeline(repo: Path, object_format: str) -> None:
    """Two episodes with submissions, costs, artifacts, approval; one completed (a few seconds)."""
    git_init(repo, object_format)
    init(repo)[0].close()
    with VendorSimulator() as vendor, Store(repo) as store:
        cmd = ["--", *vendor_step(vendor.url)]
        for key in ("a", "b"):
            eid = allocate(store, key, W32).episode_id
            assert run_cli("run", "--episode", eid, "--step", "generate", *cmd, cwd=repo).returncode == 0
        run_cli("approve", "--episode", "2026-W32-0", "--by", "ed", cwd=repo)
        assert run_cli("complete", "--episode", "2026-W32-0", cwd=repo).returncode == 0


@pytest.fixture
def pipeline_repo(tmp_path_factory: pytest.TempPathFactory, object_format: str, tmp_path: Path) -> Path:
    """The pipeline repository in the test's object format, the test's own to change: built once per
    run and format (in the first asking test's tmp_path, where its find_root guard lets it), then copied."""
    repo = tmp_path / "repo"

    def build(top: Path) -> None:
        _build_pipeline(repo, object_format)
        shutil.copytree(repo, top / "repo", symlinks=True)

    built = built_once(tmp_path_factory, f"verify-pipeline-{object_format}", build) / "repo"
    if not repo.exists():
        shutil.copytree(built, repo, symlinks=True)
    return repo


def _verify(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("verify", *args, cwd=repo)


@both_formats
def test_clean_state_passes_with_summary_line(pipeline_repo: Path) -> None:
    proc = _verify(pipeline_repo)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.splitlines()[-1] == "verify: 2 episodes, 2 artifacts (84 B), 0 problems"
    data = json.loads(_verify(pipeline_repo, "--json").stdout)
    assert data["ok"] is True
    assert data["episodes"] == 2
    assert _verify(pipeline_repo, "--rev", "HEAD", "--strict").returncode == 0


def test_verify_writes_nothing(pipeline_repo: Path) -> None:
    shutil.rmtree(pipeline_repo / ".jobstate")
    before = tree_state(pipeline_repo)
    for args in ([], ["--rev", "HEAD"], ["--rev", "HEAD", "--against", "HEAD~3", "--json"], ["--strict"]):
        proc = _verify(pipeline_repo, *args)
        # a verify that failed before it read anything would also write nothing
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
        assert "0 problems" in proc.stdout or json.loads(proc.stdout)["ok"] is True, proc.stdout
    assert tree_state(pipeline_repo) == before


def test_verify_runs_on_a_read_only_copy(pipeline_repo: Path) -> None:
    top = Path(tempfile.mkdtemp(prefix="jobstate-ro-", dir="/tmp"))
    try:
        copy = top / "repo"
        shutil.copytree(pipeline_repo, copy, symlinks=True)
        shutil.rmtree(copy / ".jobstate")
        for dirpath, dirnames, filenames in os.walk(copy):
            for name in dirnames + filenames:
                p = Path(dirpath) / name
                if not p.is_symlink():
                    p.chmod(p.stat().st_mode & 0o555)
        copy.chmod(0o555)
        top.chmod(0o755)
        env = {**os.environ, "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*"}
        prefix: list[str] = []
        if os.geteuid() == 0:  # root ignores permissions: run as nobody instead
            if shutil.which("setpriv") is None:
                pytest.skip("setpriv is needed to drop root for this test")
            prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
            env["HOME"] = str(top)
            probe_cmd = [*prefix, sys.executable, "-c", "import jobstate"]
            probe = subprocess.run(probe_cmd, env=env, capture_output=True, check=False)
            if probe.returncode != 0:  # e.g. a checkout inside a 0700 directory
                pytest.skip("this checkout's interpreter cannot be run by an unprivileged user")
        before = tree_state(copy)
        for args in (["verify"], ["verify", "--rev", "HEAD", "--against", "HEAD"]):
            proc = subprocess.run(
                [*prefix, sys.executable, "-m", "jobstate", *args],
                cwd=copy,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            assert proc.returncode == 0, proc.stdout + proc.stderr
        assert tree_state(copy) == before
    finally:
        for dirpath, dirnames, _ in os.walk(top):
            for name in dirnames:
                (Path(dirpath) / name).chmod(0o755)
        shutil.rmtree(top)


@both_formats
def test_tampered_and_missing_artifacts_are_reported(pipeline_repo: Path) -> None:
    art = pipeline_repo / episode_dir("2026-W32-1") / "generate.txt"
    art.write_text("tampered\n")
    proc = _verify(pipeline_repo)
    assert proc.returncode == 1
    assert "state/2026/2026-W32/2026-W32-1/generate.txt: error: sha256" in proc.stdout
    git(pipeline_repo, "commit", "-qam", "tamper")
    assert _verify(pipeline_repo, "--rev", "HEAD").returncode == 1
    assert _verify(pipeline_repo, "--rev", "HEAD~1").returncode == 0
    art.unlink()
    assert "recorded artifact is missing" in _verify(pipeline_repo).stdout


@both_formats
def test_an_artifact_changed_in_place_keeping_its_size_and_mtime_is_reported(pipeline_repo: Path) -> None:
    art = pipeline_repo / episode_dir("2026-W32-1") / "generate.txt"
    data, st = art.read_bytes(), art.stat()
    art.write_bytes(bytes([data[0] ^ 1]) + data[1:])  # one bit flipped: only its hash can tell
    os.utime(art, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert art.stat().st_size == st.st_size
    proc = _verify(pipeline_repo)
    assert proc.returncode == 1, proc.stdout
    assert "state/2026/2026-W32/2026-W32-1/generate.txt: error: sha256" in proc.stdout
    assert "0 problems" not in proc.stdout
    git(pipeline_repo, "commit", "-qam", "flip a bit")  # the committed copy is checked from Git objects too
    proc = _verify(pipeline_repo, "--rev", "HEAD")
    assert proc.returncode == 1, proc.stdout
    assert "state/2026/2026-W32/2026-W32-1/generate.txt: error: sha256" in proc.stdout


@pytest.mark.parametrize(
    ("name", "content", "needle"),
    [
        ("episode.yaml", "schema: 1\nepisode_id: [\n", "invalid YAML"),
        ("episode.yaml", "!!python/object/apply:os.system ['touch /tmp/pwned']\n", "invalid YAML"),
        ("episode.yaml", "schema: 2\n", "unknown schema 2"),
        (
            "costs.yaml",
            "schema: 1\nentries:\n- {step: generate, amount: 12.4, currency: USD, at: x}\n",
            "invalid amount",
        ),
        ("submissions.yaml", "schema: 1\nsteps: {generate: [{state: weird}]}\n", "unknown state"),
    ],
)
def test_bad_records_are_problems_with_their_file(pipeline_repo: Path, name: str, content: str, needle: str) -> None:
    (pipeline_repo / episode_dir("2026-W32-1") / name).write_text(content)
    git(pipeline_repo, "commit", "-qam", "break it")
    proc = _verify(pipeline_repo, "--rev", "HEAD")
    assert proc.returncode == (7 if needle == "invalid YAML" else 1), proc.stderr  # unreadable: 7, as everywhere
    assert f"state/2026/2026-W32/2026-W32-1/{name}" in proc.stdout
    assert needle in proc.stdout


def test_directory_name_and_duplicate_keys(pipeline_repo: Path) -> None:
    shutil.copytree(pipeline_repo / episode_dir("2026-W32-1"), pipeline_repo / episode_dir("2026-W32-5"))
    git(pipeline_repo, "add", "-A")
    git(pipeline_repo, "commit", "-qm", "copy")
    out = _verify(pipeline_repo, "--rev", "HEAD").stdout
    assert "does not match its name '2026-W32-5'" in out
    data = (pipeline_repo / episode_dir("2026-W32-5") / "episode.yaml").read_text()
    (pipeline_repo / episode_dir("2026-W32-5") / "episode.yaml").write_text(
        data.replace("2026-W32-1", "2026-W32-5").replace("sequence: 1", "sequence: 5")
    )
    git(pipeline_repo, "commit", "-qam", "same key twice")
    out = _verify(pipeline_repo, "--rev", "HEAD").stdout
    assert "allocation key 'b' belongs to several episodes: 2026-W32-1, 2026-W32-5" in out


def test_unknown_submission_warns_and_fails_when_strict(repo: Path) -> None:
    with Store(repo) as store:
        eid = allocate(store, "a", W32).episode_id
        with pytest.raises(TimeoutError), paid_step(store, eid, "generate"):
            raise TimeoutError
    assert _verify(repo).returncode == 0
    strict = _verify(repo, "--strict")
    assert strict.returncode == 1
    assert "step 'generate' is unknown" in strict.stdout


def test_uncommitted_and_untracked_in_work_tree(pipeline_repo: Path) -> None:
    (pipeline_repo / episode_dir("2026-W32-1") / "notes.txt").write_text("x")
    proc = _verify(pipeline_repo)
    assert proc.returncode == 1
    assert "state/2026/2026-W32/2026-W32-1/notes.txt: error: untracked" in proc.stdout
    assert _verify(pipeline_repo, "--rev", "HEAD").returncode == 0


def test_history_must_agree_with_episode(pipeline_repo: Path) -> None:
    path = pipeline_repo / history_path("2026-W32-0")
    path.write_text(path.read_text().replace("allocation_key: a", "allocation_key: zzz"))
    git(pipeline_repo, "commit", "-qam", "bad history")
    assert (
        "must copy the episode's allocation_key (allocation_key: records 'a', history 'zzz')"
        in _verify(pipeline_repo, "--rev", "HEAD").stdout
    )


def test_bare_clone_and_bad_revisions(pipeline_repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(pipeline_repo), str(bare)], check=True)
    assert _verify(bare, "--rev", "HEAD").returncode == 0
    assert _verify(bare).returncode == 2
    bad = _verify(pipeline_repo, "--rev", "no-such-branch")
    assert bad.returncode == 2
    assert "unknown revision" in bad.stderr


def test_no_state_is_exit_2_as_in_every_command(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    git(plain, "init", "-q")
    proc = _verify(plain)
    assert proc.returncode == 2
    assert "no state/ directory" in proc.stderr


@both_formats
def test_against_reports_drift_old_beside_new(pipeline_repo: Path) -> None:
    costs = pipeline_repo / episode_dir("2026-W32-1") / "costs.yaml"
    costs.write_text(costs.read_text().replace("'12.40'", "'12.41'"))
    git(pipeline_repo, "commit", "-qam", "a migration that changed money")
    proc = _verify(pipeline_repo, "--rev", "HEAD", "--against", "HEAD~1")
    assert proc.returncode == 1
    # nothing was migrated: the rewritten entry is the record model's alarm, with the old and new value
    assert "no legacy ID migrated" in proc.stdout
    assert "state/2026/2026-W32/2026-W32-1/costs.yaml: error: cost entry rewritten" in proc.stdout
    assert "'amount': '12.40'" in proc.stdout
    assert "'amount': '12.41'" in proc.stdout
    data = json.loads(_verify(pipeline_repo, "--rev", "HEAD", "--against", "HEAD~1", "--json").stdout)
    assert data["ok"] is False
    assert data["migrated"] == 0
    assert [p["message"].split(":")[0] for p in data["problems"]] == ["cost entry rewritten"]
