"""Signed commits: jobstate signs as git commit does, and verify --require-signed checks them."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from jobstate.main import main

from .conftest import git, git_init, status
from .snapshots import tree_state

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen is not installed")


def _key(directory: Path, name: str) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(directory / name)], check=True)
    return directory / f"{name}.pub"


@pytest.fixture
def signed_repo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A repository whose config asks for ssh-signed commits, set up by jobstate init."""
    repo = tmp_path / "signed"
    git_init(repo)
    key = _key(tmp_path, "signer")
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"test@example.invalid {key.read_text()}")
    for name, value in (
        ("commit.gpgsign", "true"),
        ("gpg.format", "ssh"),
        ("user.signingkey", str(key)),
        ("gpg.ssh.allowedSignersFile", str(allowed)),
    ):
        git(repo, "config", name, value)
    code = main(["--repo", str(repo), "init"])
    assert code == 0, capsys.readouterr().err
    return repo


def _jobstate(repo: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--repo", str(repo), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_every_jobstate_commit_is_signed_and_verifies(signed_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for key in ("a", "b"):
        code, _out, err = _jobstate(signed_repo, capsys, "allocate", "--key", key, "--week", "2026-W32")
        assert code == 0, err
    commits = git(signed_repo, "rev-list", "HEAD").split()
    assert len(commits) == 3
    for sha in commits:
        assert "gpgsig" in git(signed_repo, "cat-file", "commit", sha)
        git(signed_repo, "verify-commit", sha)
    code, out, _err = _jobstate(signed_repo, capsys, "verify", "--require-signed")
    assert code == 0, out
    code, out, _err = _jobstate(signed_repo, capsys, "verify", "--rev", "HEAD", "--require-signed")
    assert code == 0, out


def test_an_unsigned_commit_to_state_fails_require_signed(
    signed_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    signed_tip = git(signed_repo, "rev-parse", "HEAD").strip()
    git(signed_repo, "config", "commit.gpgsign", "false")
    code, _out, err = _jobstate(signed_repo, capsys, "allocate", "--key", "a", "--week", "2026-W32")
    assert code == 0, err
    git(signed_repo, "config", "commit.gpgsign", "true")
    unsigned = git(signed_repo, "rev-parse", "HEAD").strip()
    (signed_repo / "README").write_text("not state\n")
    git(signed_repo, "add", "README")
    git(signed_repo, "commit", "-q", "--no-gpg-sign", "-m", "outside state/: not checked")
    before = tree_state(signed_repo)
    for args in (["verify"], ["verify", "--rev", "HEAD"], ["verify", "--against", signed_tip]):
        code, out, _err = _jobstate(signed_repo, capsys, *args, "--require-signed")
        assert code == 1, out
        want = f"commit {unsigned[:12]}: error: is not signed; it changes state/, history/ or jobstate.yaml"
        assert out.splitlines()[0] == want
        assert len(out.splitlines()) == 3 if "--against" in args else 2, out
    code, out, _err = _jobstate(signed_repo, capsys, "verify", "--require-signed", "--against", unsigned)
    assert code == 0, out
    assert tree_state(signed_repo) == before  # verify --require-signed is read-only
    code, out, _err = _jobstate(signed_repo, capsys, "verify")
    assert code == 0, out  # without --require-signed nothing is asked of signatures


def test_a_commit_signed_by_an_unknown_key_does_not_verify(
    signed_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git(signed_repo, "config", "user.signingkey", str(_key(tmp_path, "stranger")))
    code, _out, err = _jobstate(signed_repo, capsys, "allocate", "--key", "a", "--week", "2026-W32")
    assert code == 0, err
    code, out, _err = _jobstate(signed_repo, capsys, "verify", "--rev", "HEAD", "--require-signed")
    assert code == 1, out
    assert "is signed by a key that is not trusted" in out


def test_a_signing_failure_is_a_clear_error_with_nothing_changed(
    signed_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    head = git(signed_repo, "rev-parse", "HEAD").strip()
    git(signed_repo, "config", "user.signingkey", str(tmp_path / "no-such-key.pub"))
    code, out, err = _jobstate(signed_repo, capsys, "allocate", "--key", "a", "--week", "2026-W32")
    assert code == 2, err
    assert out == ""
    assert "cannot sign the commit as commit.gpgsign asks" in err
    assert "no-such-key.pub" in err
    assert len(err.strip().splitlines()) == 1
    assert git(signed_repo, "rev-parse", "HEAD").strip() == head
    assert status(signed_repo) == ""
    assert sorted(p.name for p in (signed_repo / "state").iterdir()) == [".gitkeep"]


def test_init_under_a_failing_signing_setup_leaves_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "r"
    git_init(repo)
    git(repo, "config", "commit.gpgsign", "true")
    git(repo, "config", "gpg.format", "ssh")
    git(repo, "config", "user.signingkey", str(tmp_path / "no-such-key.pub"))
    code, _out, err = _jobstate(repo, capsys, "init")
    assert code == 2, err
    assert "cannot sign" in err
    assert status(repo) == ""
    for left in ("state", "history", "jobstate.yaml", ".gitignore"):
        assert not (repo / left).exists()


def _signed_by(repo: Path, key: Path) -> None:
    git(repo, "config", "user.signingkey", str(key))


def test_require_signed_refuses_in_a_shallow_clone_and_never_passes_there(
    signed_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # an unsigned state commit followed by a signed one: depth 1 would show only the signed one
    git(signed_repo, "config", "commit.gpgsign", "false")
    assert _jobstate(signed_repo, capsys, "allocate", "--key", "a", "--week", "2026-W32")[0] == 0
    git(signed_repo, "config", "commit.gpgsign", "true")
    assert _jobstate(signed_repo, capsys, "allocate", "--key", "b", "--week", "2026-W32")[0] == 0
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{signed_repo}", str(shallow))
    allowed = git(signed_repo, "config", "gpg.ssh.allowedSignersFile").strip()
    git(shallow, "config", "gpg.ssh.allowedSignersFile", allowed)
    for args in (["verify", "--rev", "HEAD", "--require-signed"], ["verify", "--rev", "HEAD", "--approvers", allowed]):
        code, out, err = _jobstate(shallow, capsys, *args)
        assert code == 2, out
        assert "shallow clone" in err
        assert "git fetch --unshallow" in err
    git(shallow, "fetch", "-q", "--unshallow")
    code, out, _err = _jobstate(shallow, capsys, "verify", "--rev", "HEAD", "--require-signed")
    assert code == 1, out
    assert "is not signed" in out


def test_an_unsigned_change_to_jobstate_yaml_fails_require_signed(
    signed_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = signed_repo / "jobstate.yaml"
    config.write_text(config.read_text() + "# raised by hand\n")
    git(signed_repo, "commit", "-q", "--no-gpg-sign", "-am", "settings, unsigned")
    sha = git(signed_repo, "rev-parse", "HEAD").strip()
    code, out, _err = _jobstate(signed_repo, capsys, "verify", "--rev", "HEAD", "--require-signed")
    assert code == 1, out
    assert f"commit {sha[:12]}: error: is not signed; it changes state/, history/ or jobstate.yaml" in out


def test_allowed_signers_option_replaces_the_repositorys_trust(
    signed_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other_signers"
    other.write_text(f"someone@example.invalid {_key(tmp_path, 'someone').read_text()}")
    code, out, _err = _jobstate(signed_repo, capsys, "verify", "--rev", "HEAD", "--require-signed")
    assert code == 0, out
    code, out, _err = _jobstate(
        signed_repo, capsys, "verify", "--rev", "HEAD", "--require-signed", "--allowed-signers", str(other)
    )
    assert code == 1, out
    assert "is signed by a key that is not trusted" in out
    code, _out, err = _jobstate(
        signed_repo, capsys, "verify", "--require-signed", "--allowed-signers", str(tmp_path / "missing")
    )
    assert code == 2
    assert "cannot read the allowed-signers file" in err


@pytest.fixture
def approvers(signed_repo: Path, tmp_path: Path) -> tuple[Path, Path]:
    """An approvers file with the editor's key, and an outsider's key the repository trusts as a signer."""
    editor = _key(tmp_path, "editor")
    outsider = _key(tmp_path, "outsider")
    allowed = Path(git(signed_repo, "config", "gpg.ssh.allowedSignersFile").strip())
    allowed.write_text(allowed.read_text() + f"editor {editor.read_text()}" + f"outsider {outsider.read_text()}")
    file = tmp_path / "approvers"
    file.write_text(f"editor {editor.read_text()}")
    return editor, file


def test_an_approval_signed_outside_the_approvers_file_fails_verify(
    signed_repo: Path, tmp_path: Path, approvers: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    editor, file = approvers
    base = git(signed_repo, "rev-parse", "HEAD").strip()
    assert _jobstate(signed_repo, capsys, "allocate", "--key", "a", "--week", "2026-W32")[0] == 0
    _signed_by(signed_repo, editor)
    assert _jobstate(signed_repo, capsys, "approve", "--episode", "2026-W32-0", "--by", "editor")[0] == 0
    code, out, _err = _jobstate(
        signed_repo, capsys, "verify", "--rev", "HEAD", "--against", base, "--approvers", str(file)
    )
    assert code == 0, out  # the allocation is no decision; the approval is the editor's
    _signed_by(signed_repo, tmp_path / "outsider.pub")
    code, _out, err = _jobstate(
        signed_repo, capsys, "approve", "--episode", "2026-W32-0", "--by", "editor", "--reject", "--reason", "no"
    )
    assert code == 0, err
    sha = git(signed_repo, "rev-parse", "HEAD").strip()
    assert _jobstate(signed_repo, capsys, "verify", "--rev", "HEAD", "--require-signed")[0] == 0  # a trusted signer
    code, out, _err = _jobstate(
        signed_repo, capsys, "verify", "--rev", "HEAD", "--against", base, "--approvers", str(file)
    )
    assert code == 1, out
    assert out.splitlines()[0].startswith(
        f"commit {sha[:12]}: error: records a decision but is not signed by a key of the approvers file"
    )
    # diff applies the same rule to the same file: the outsider's key is trusted, but no approver's
    code, out, _err = _jobstate(
        signed_repo, capsys, "diff", base, "--strict", "--format", "json", "--approvers", str(file)
    )
    assert code == 1, out
    (alarm,) = json.loads(out)["alarms"]
    assert alarm["kind"] == "decision signer mismatch"
    assert alarm["message"].startswith("records a decision but is not signed by a key of the approvers file")
    code, _out, err = _jobstate(signed_repo, capsys, "diff", "HEAD", "--approvers", str(tmp_path / "missing"))
    assert code == 2  # refused as verify refuses it, even with no decision in the range
    assert "cannot read the allowed-signers file" in err


def test_diff_shows_the_verified_signer_and_a_mismatch_is_an_alarm(
    signed_repo: Path, tmp_path: Path, approvers: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    editor, _file = approvers
    assert _jobstate(signed_repo, capsys, "allocate", "--key", "a", "--week", "2026-W32")[0] == 0
    assert _jobstate(signed_repo, capsys, "allocate", "--key", "b", "--week", "2026-W32")[0] == 0
    base = git(signed_repo, "rev-parse", "HEAD").strip()
    _signed_by(signed_repo, editor)
    assert _jobstate(signed_repo, capsys, "approve", "--episode", "2026-W32-0", "--by", "editor")[0] == 0
    code, out, _err = _jobstate(signed_repo, capsys, "diff", base, "--strict")
    assert code == 0, out
    assert "editor (signed: editor)" in out
    _signed_by(signed_repo, tmp_path / "outsider.pub")
    assert _jobstate(signed_repo, capsys, "approve", "--episode", "2026-W32-1", "--by", "editor")[0] == 0
    code, out, _err = _jobstate(signed_repo, capsys, "diff", base, "--strict", "--format", "json")
    assert code == 1, out
    alarms = json.loads(out)["alarms"]
    assert alarms == [
        {
            "kind": "decision signer mismatch",
            "episode": "2026-W32-1",
            "message": "approved by 'editor' but signed by 'outsider'",
        }
    ]


def _approval_in_a_merge(signed_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], editor: Path) -> str:
    """An approval that only a merge commit brings in, the merge signed by the bot key; returns the base."""
    assert _jobstate(signed_repo, capsys, "allocate", "--key", "a", "--week", "2026-W32")[0] == 0
    base = git(signed_repo, "rev-parse", "HEAD").strip()
    bot = git(signed_repo, "config", "user.signingkey").strip()
    _signed_by(signed_repo, editor)
    assert _jobstate(signed_repo, capsys, "approve", "--episode", "2026-W32-0", "--by", "editor")[0] == 0
    approval = (signed_repo / "state/2026/2026-W32/2026-W32-0/approval.yaml").read_bytes()
    git(signed_repo, "reset", "-q", "--hard", base)
    _signed_by(signed_repo, Path(bot))
    git(signed_repo, "checkout", "-q", "-b", "side")
    (signed_repo / "NOTES").write_text("unrelated\n")
    git(signed_repo, "add", "NOTES")
    git(signed_repo, "commit", "-q", "-m", "notes")
    git(signed_repo, "checkout", "-q", "-")
    git(signed_repo, "merge", "-q", "--no-ff", "--no-commit", "side")
    (signed_repo / "state/2026/2026-W32/2026-W32-0/approval.yaml").write_bytes(approval)
    git(signed_repo, "add", "state")
    git(signed_repo, "commit", "-q", "-m", "merge side")
    assert len(git(signed_repo, "rev-parse", "HEAD^2").split()) == 1  # a merge commit
    return base


def test_an_approval_a_merge_commit_introduces_is_judged_by_the_merges_signer(
    signed_repo: Path, tmp_path: Path, approvers: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    editor, file = approvers
    base = _approval_in_a_merge(signed_repo, tmp_path, capsys, editor)
    merge = git(signed_repo, "rev-parse", "HEAD").strip()
    for against in ([], ["--against", base]):
        code, out, _err = _jobstate(
            signed_repo, capsys, "verify", "--rev", "HEAD", "--require-signed", "--approvers", str(file), *against
        )
        assert code == 1, out
        assert f"commit {merge[:12]}: error: records a decision but is not signed by a key of the approvers" in out
    code, out, _err = _jobstate(signed_repo, capsys, "diff", base, "--strict", "--format", "json")
    assert code == 1, out
    assert json.loads(out)["alarms"] == [
        {
            "kind": "decision signer mismatch",
            "episode": "2026-W32-0",
            "message": "approved by 'editor' but signed by 'test@example.invalid'",
        }
    ]


def test_a_decision_merged_from_its_own_signed_commit_passes(
    signed_repo: Path, tmp_path: Path, approvers: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    editor, file = approvers
    assert _jobstate(signed_repo, capsys, "allocate", "--key", "a", "--week", "2026-W32")[0] == 0
    base = git(signed_repo, "rev-parse", "HEAD").strip()
    bot = git(signed_repo, "config", "user.signingkey").strip()
    git(signed_repo, "checkout", "-q", "-b", "side")
    _signed_by(signed_repo, editor)
    assert _jobstate(signed_repo, capsys, "approve", "--episode", "2026-W32-0", "--by", "editor")[0] == 0
    git(signed_repo, "checkout", "-q", "-")
    _signed_by(signed_repo, Path(bot))
    (signed_repo / "NOTES").write_text("unrelated\n")
    git(signed_repo, "add", "NOTES")
    git(signed_repo, "commit", "-q", "-m", "notes")
    git(signed_repo, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    code, out, _err = _jobstate(
        signed_repo, capsys, "verify", "--rev", "HEAD", "--require-signed", "--approvers", str(file), "--against", base
    )
    assert code == 0, out
    code, out, _err = _jobstate(signed_repo, capsys, "diff", base, "--strict")
    assert code == 0, out
    assert "editor (signed: editor)" in out
