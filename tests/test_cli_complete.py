"""A complete CLI: no traceback for any option value, help everywhere, honest answers (issue 10, class 8)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from jobstate.arguments import build_parser
from jobstate.core.layout import CONFIG_FILE
from jobstate.main import main
from jobstate.store.lock import FileLock

from .conftest import git, run_cli

NUMERIC = [
    ("--lock-timeout", ["--lock-timeout", "{v}", "list"]),
    ("list --lock-timeout", ["list", "--lock-timeout", "{v}"]),
    ("allocate --lock-timeout", ["allocate", "--key", "k", "--week", "2026-W32", "--lock-timeout", "{v}"]),
    ("verify --jobs", ["verify", "--jobs", "{v}"]),
]
VALUES = ["0", "-1", "nan", "1e309", "text", "inf", "-0", "1e-400", ""]


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize(("name", "args"), NUMERIC, ids=[n for n, _ in NUMERIC])
def test_numeric_options_never_trace_back(
    repo: Path, capsys: pytest.CaptureFixture[str], name: str, args: list[str], value: str
) -> None:
    code = main(["--repo", str(repo), *[a.replace("{v}", value) for a in args]])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code != 0:
        assert code == 2, err
        assert len(err.strip().splitlines()) == 1, err
        assert name.rsplit(maxsplit=1)[-1] in err  # names the option
    else:
        # only sane values are taken: 0 seconds of lock wait, or a tiny positive one
        assert name != "verify --jobs", f"--jobs {value!r} accepted"
        assert value in ("0", "-0", "1e-400"), f"{name} {value!r} accepted"


@pytest.mark.parametrize("value", ["-1", "nan", "1e309", "text", "inf"])
def test_lock_timeout_from_the_environment_is_checked_too(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("JOBSTATE_LOCK_TIMEOUT", value)
    code = main(["--repo", str(repo), "allocate", "--key", "k", "--week", "2026-W32"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "JOBSTATE_LOCK_TIMEOUT" in err
    assert len(err.strip().splitlines()) == 1


def _actions(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.Action]]:
    out = [(parser.prog, a) for a in parser._actions]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out += _actions(sub)
    return out


def test_every_option_has_help_text() -> None:
    missing = [
        f"{prog} {'/'.join(a.option_strings) or a.dest}"
        for prog, a in _actions(build_parser())
        if not a.help or a.help == argparse.SUPPRESS
    ]
    assert missing == []


def test_version_and_global_options_before_or_after_the_command(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("jobstate ")
    assert main(["--repo", str(repo), "allocate", "--key", "a", "--week", "2026-W32"]) == 0
    capsys.readouterr()
    assert main(["--repo", str(repo), "list"]) == 0
    before = capsys.readouterr().out
    assert main(["list", "--repo", str(repo)]) == 0
    assert capsys.readouterr().out == before
    assert "2026-W32-0" in before


def test_run_help_documents_the_environment_and_the_result_protocol(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    for word in (
        "JOBSTATE_EPISODE",
        "JOBSTATE_STEP",
        "JOBSTATE_IDEMPOTENCY_KEY",
        "JOBSTATE_EPISODE_DIR",
        "JOBSTATE_OUTPUT_DIR",
        "JOBSTATE_REMOTE_REF",
        "JOBSTATE_RESULT",
        '"remote_ref"',
        '"submitted"',
        '"cost"',
        '"charge_id"',
        '"artifacts"',
        "decimal strings",
    ):
        assert word in out, word
    assert '  {"remote_ref": "task-81",\n' in out  # the example keeps its lines (RawDescriptionHelpFormatter)


def test_lock_info_says_holder_unknown_when_the_record_is_missing(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock_path = repo / ".jobstate" / "lock"
    with FileLock(lock_path, timeout=5):
        lock_path.write_text("")  # held, but the holder record is gone (killed between lock and record)
        assert main(["--repo", str(repo), "lock-info"]) == 0
        out = capsys.readouterr().out
        assert "holder unknown" in out
        assert "None" not in out
        assert main(["--repo", str(repo), "lock-info", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
    assert data["locked"] is True
    assert data["holder"] is None
    assert main(["--repo", str(repo), "lock-info"]) == 0
    assert capsys.readouterr().out.startswith("unlocked")


@pytest.mark.parametrize("where", ["before", "after"])
def test_init_remote_is_refused_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    git(plain, "init", "-q")
    args = ["--remote", "origin", "init"] if where == "before" else ["init", "--remote", "origin"]
    code = main(["--repo", str(plain), *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "does not set up a remote" in err
    assert "remote: origin" in err
    assert sorted(p.name for p in plain.iterdir()) == [".git"]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("remtoe: origin\n", "unknown setting 'remtoe'"),
        ("period: fortnight\n", "period 'fortnight'"),
        ("lock_timeout: -3\n", "lock_timeout"),
        ("timezone: Mars/Olympus\n", "unknown timezone"),
        ("period: [iso-week\n", "invalid YAML"),
    ],
)
def test_verify_checks_jobstate_yaml_naming_file_and_key(repo: Path, text: str, words: str) -> None:
    (repo / CONFIG_FILE).write_text(text)
    git(repo, "commit", "-qam", "settings")
    for args in (("verify",), ("verify", "--rev", "HEAD")):
        proc = run_cli(*args, cwd=repo)
        assert proc.returncode == 7, proc.stdout + proc.stderr
        assert f"{CONFIG_FILE}: error: " in proc.stdout
        assert words in proc.stdout
    allocate = run_cli("allocate", "--key", "k", "--week", "2026-W32", cwd=repo)
    assert allocate.returncode == 7  # the same kind, the same code


def test_json_and_text_severities_agree_under_strict(repo: Path) -> None:
    assert run_cli("allocate", "--key", "k", "--week", "2026-W32", cwd=repo).returncode == 0
    run_cli("run", "--episode", "2026-W32-0", "--step", "generate", "--", "false", cwd=repo)  # leaves it unknown
    for strict in ((), ("--strict",)):
        text = run_cli("verify", *strict, cwd=repo)
        data = json.loads(run_cli("verify", "--json", *strict, cwd=repo).stdout)
        levels = [
            line.split(": ")[1] for line in text.stdout.splitlines() if ": warning: " in line or ": error: " in line
        ]
        assert levels == [p["severity"] for p in data["problems"]], (text.stdout, data)
        assert levels == (["error"] if strict else ["warning"])
        assert data["ok"] is (not strict)
