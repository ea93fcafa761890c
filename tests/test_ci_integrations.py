"""The CI integrations: verify --format github, the composite action run without GitHub,
the pre-commit hook, and the example workflow."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jobstate.main import main
from jobstate.store.yamlio import loads

from .conftest import git

ROOT = Path(__file__).resolve().parents[1]


def _line_of(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def test_verify_github_annotations_point_at_the_yaml_line(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = history / "state/2026/2026-W34/2026-W34-0/approval.yaml"
    broken.write_text("schema: 1\ndecisions:\n- {status: approved, by: ed\n")
    git(history, "add", "-A")
    git(history, "commit", "-qm", "broken approval")
    code = main(["verify", "--repo", str(history), "--rev", "HEAD", "--format", "github"])
    out, err = capsys.readouterr()
    assert code == 7, err  # malformed YAML is exit 7 in every command, verify included
    lines = out.splitlines()
    subs = history / "state/2026/2026-W33/2026-W33-1/submissions.yaml"
    at = f"file=state/2026/2026-W33/2026-W33-1/submissions.yaml,line={_line_of(subs, 'generate:')}"
    unknown = f"::warning {at},title=jobstate verify::"
    assert any(line.startswith(unknown + "step 'generate' is unknown") for line in lines), out
    parse = [
        line for line in lines if line.startswith("::error file=state/2026/2026-W34/2026-W34-0/approval.yaml,line=")
    ]
    assert len(parse) == 1, out
    assert parse[0].startswith(
        "::error file=state/2026/2026-W34/2026-W34-0/approval.yaml,line=4,title=jobstate verify::invalid YAML"
    )
    assert lines[-1].startswith("::error title=jobstate verify::verify: 5 episodes")
    code = main(["verify", "--repo", str(history), "--rev", "HEAD", "--format", "github", "--strict"])
    out, _err = capsys.readouterr()
    assert code == 7
    assert f"::error file=state/2026/2026-W33/2026-W33-1/submissions.yaml,line={_line_of(subs, 'generate:')}," in out


def test_a_malformed_cost_entry_is_annotated_at_the_ledger_entries(
    history: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    costs = history / "state/2026/2026-W33/2026-W33-0/costs.yaml"
    costs.write_text(costs.read_text().replace("amount: '12.40'", "amount: '12,40'", 1))
    git(history, "commit", "-qam", "a comma for a point")
    assert main(["verify", "--repo", str(history), "--rev", "HEAD", "--format", "github"]) == 1
    out = capsys.readouterr().out
    line = _line_of(costs, "entries:")
    assert line > 1
    assert (
        f"::error file=state/2026/2026-W33/2026-W33-0/costs.yaml,line={line},title=jobstate verify::cost entry" in out
    ), out


def test_github_annotations_escape_newlines_and_commas() -> None:
    from jobstate.review.annotations import _escape_data, _escape_property

    assert _escape_data("a\nb%c") == "a%0Ab%25c"
    assert _escape_property("state/a,b:c.yaml") == "state/a%2Cb%3Ac.yaml"


# --- the composite action, run step by step with bash, as the runner would ---------------

_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def _value(expr: str, ctx: dict[str, Any]) -> str:
    """The few expression forms action.yml uses: a || b, x == 'lit', inputs.x, github.a.b."""
    if "||" in expr:
        return next((v for v in (_value(p.strip(), ctx) for p in expr.split("||")) if v), "")
    if "==" in expr:
        left, right = (p.strip() for p in expr.split("=="))
        return "true" if _value(left, ctx) == right.strip("'") else ""
    node: Any = ctx
    for part in expr.split("."):
        if not re.fullmatch(r"[a-z][a-z_-]*", part):
            raise AssertionError(f"action.yml uses an expression this test cannot evaluate: {expr}")
        node = node.get(part, "") if isinstance(node, dict) else ""
    return str(node)


def _run_action(repo: Path, action_path: Path, inputs: dict[str, str], base: str, extra_path: Path) -> tuple[int, str]:
    action = loads((action_path / "action.yml").read_bytes(), "action.yml")
    assert action["runs"]["using"] == "composite"
    given = {name: spec.get("default", "") for name, spec in action["inputs"].items()}
    given.update(inputs)
    ctx = {"inputs": given, "github": {"event": {"pull_request": {"base": {"sha": base}} if base else {}}}}
    summary = repo.parent / "summary.md"
    summary.write_text("")
    env = {
        "PATH": f"{extra_path}:/usr/bin:/bin",
        "HOME": str(repo.parent),
        "GITHUB_ACTION_PATH": str(action_path),
        "GITHUB_WORKSPACE": str(repo),
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    output = []
    for step in action["runs"]["steps"]:
        if "if" in step and _value(step["if"], ctx) != "true":
            continue
        assert step["shell"] == "bash"
        step_env = {k: _EXPR.sub(lambda m: _value(m[1], ctx), str(v)) for k, v in step.get("env", {}).items()}
        assert "${{" not in step["run"], "inputs reach scripts through env:, never by substitution"
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            cwd=repo,
            env={**env, **step_env},
            capture_output=True,
            text=True,
            check=False,
        )
        output.append(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            return proc.returncode, "".join(output)
    return 0, "".join(output)


@pytest.fixture(scope="module")
def action_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The action as a user's workflow gets it: a checkout of this repository (only what it needs)."""
    top = tmp_path_factory.mktemp("action") / "jobstate"
    top.mkdir()
    for name in ("action.yml", "pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, top / name)
    for package in ("jobstate", "jobstate_demo"):
        shutil.copytree(ROOT / package, top / package, ignore=shutil.ignore_patterns("__pycache__"))
    return top


def test_action_summarises_the_diff_and_verifies_strictly_by_default(history: Path, action_checkout: Path) -> None:
    base = git(history, "rev-parse", "week-start").strip()
    bin_dir = Path(sys.executable).parent
    code, out = _run_action(history, action_checkout, {"install": "false", "strict": "false"}, base, bin_dir)
    assert code == 0, out
    summary = (history.parent / "summary.md").read_text()
    assert summary.startswith(f"## jobstate diff {base}..HEAD\n")
    assert "| 2026-W33-0 | rejected | editor | intro too long |" in summary
    assert "::warning file=state/2026/2026-W33/2026-W33-1/submissions.yaml,line=" in out
    assert "::notice title=jobstate verify::verify: 5 episodes" in out
    # strict (the default): the unknown step fails the job, and the summary is still written first
    code, out = _run_action(history, action_checkout, {"install": "false"}, base, bin_dir)
    assert code == 1, out
    assert "::error file=state/2026/2026-W33/2026-W33-1/submissions.yaml" in out
    assert (history.parent / "summary.md").read_text() == summary


@pytest.mark.slow
# a new virtual environment and pip building and installing the action's checkout with its dependencies:
# 20 to 40 CPU seconds of pip; what the action does with the installed jobstate is the test above
@pytest.mark.timeout(300)
def test_action_installs_jobstate_from_its_own_checkout(history: Path, action_checkout: Path, tmp_path: Path) -> None:
    venv = tmp_path / "runner-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    base = git(history, "rev-parse", "week-start").strip()
    inputs = {"python": str(venv / "bin" / "python"), "strict": "false"}
    code, out = _run_action(history, action_checkout, inputs, base, venv / "bin")
    assert code == 0, out
    summary = (history.parent / "summary.md").read_text()
    assert summary.startswith(f"## jobstate diff {base}..HEAD\n")
    assert "| 2026-W33-0 | rejected | editor | intro too long |" in summary
    assert "::notice title=jobstate verify::verify: 5 episodes" in out
    assert (venv / "bin" / "jobstate").exists()  # the action's own jobstate, not one already on PATH


def test_a_pull_request_with_an_alarm_fails_the_job_after_writing_the_summary(
    history: Path, action_checkout: Path
) -> None:
    base = git(history, "rev-parse", "HEAD").strip()
    costs = history / "state/2026/2026-W33/2026-W33-0/costs.yaml"
    costs.write_text(costs.read_text().replace("amount: '12.40'", "amount: '1.24'", 1))
    git(history, "commit", "-qam", "a rewritten cost, no label, nothing else")
    bin_dir = Path(sys.executable).parent
    code, out = _run_action(history, action_checkout, {"install": "false", "strict": "false"}, base, bin_dir)
    assert code == 1, out
    summary = (history.parent / "summary.md").read_text()
    assert "> [!CAUTION]\n> **Changes that should never happen (2)**" in summary  # and a completed one edited
    assert "cost entry rewritten" in summary
    assert "::error title=jobstate diff::changes that should never happen" in out
    # verify --against the base ran too, unlabelled: the record model refuses the rewritten entry
    assert "::error file=state/2026/2026-W33/2026-W33-0/costs.yaml" in out
    assert "cost entry rewritten" in out


def test_action_without_a_base_skips_the_summary_and_still_verifies(history: Path, action_checkout: Path) -> None:
    bin_dir = Path(sys.executable).parent
    code, out = _run_action(history, action_checkout, {"install": "false", "strict": "false"}, "", bin_dir)
    assert code == 0, out
    assert "no base revision to diff against" in out
    assert (history.parent / "summary.md").read_text() == ""


# --- the pre-commit hook and the example workflow ------------------------------------------


def test_pre_commit_hook_checks_staged_state_and_history_changes(history: Path) -> None:
    hooks = loads((ROOT / ".pre-commit-hooks.yaml").read_bytes(), ".pre-commit-hooks.yaml")
    hook = next(h for h in hooks if h["id"] == "jobstate-verify")
    # pre-commit passes no deleted file, so a filter would skip a commit that only deletes an episode
    assert hook["always_run"] is True
    assert "files" not in hook
    argv = shlex.split(hook["entry"])
    assert argv[0] == "jobstate"
    (history / "history/2026/2026-W33/2026-W33-1.yaml").write_text(
        "schema: 1\nepisode_id: 2026-W33-1\ncompleted_at: x\n"
    )
    git(history, "add", "-A")
    bin_dir = Path(sys.executable).parent
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(history.parent)}
    staged_ok = subprocess.run(argv, cwd=history, env=env, capture_output=True, text=True, check=False)
    assert staged_ok.returncode == 1, staged_ok.stdout  # completed while a step is unknown
    assert (
        "history/2026/2026-W33/2026-W33-1.yaml: error: history is written only when no step is open" in staged_ok.stdout
    )
    assert "steps: records 'generate'" in staged_ok.stdout
    assert "uncommitted" not in staged_ok.stdout
    git(history, "reset", "-q", "--hard")
    path = history / "state/2026/2026-W34/2026-W34-0/approval.yaml"
    path.write_text("schema: 1\ndecisions: []\n")
    git(history, "add", "-A")
    clean = subprocess.run(argv, cwd=history, env=env, capture_output=True, text=True, check=False)
    assert clean.returncode == 0, clean.stdout
    without = subprocess.run(argv[:-1], cwd=history, env=env, capture_output=True, text=True, check=False)
    assert without.returncode == 1, "without --uncommitted-ok the staged change itself would fail the hook"


def test_the_workflow_runs_the_base_revisions_action_on_the_pull_request_as_data() -> None:
    text = (ROOT / ".github/workflows/verify.yml").read_text()
    assert "OWNER" not in text
    workflow = loads(text, "verify.yml")
    steps = workflow["jobs"]["verify"]["steps"]
    checkouts = [s for s in steps if str(s.get("uses", "")).startswith("actions/checkout@")]
    reviewer = next(s["with"] for s in checkouts if s["with"]["path"] == "reviewer")
    assert reviewer["ref"].startswith("${{ github.event.pull_request.base.sha ")
    action_steps = [s for s in steps if str(s.get("uses", "")).startswith("./")]
    assert [s["uses"] for s in action_steps] == ["./reviewer"]  # never ./ : the pull request's own code
    assert action_steps[0]["with"]["path"] == "reviewed"
    assert "labels" not in text  # --against runs on every pull request
    action = (ROOT / "action.yml").read_text()
    assert 'pip install --quiet "$GITHUB_ACTION_PATH"' in action
    assert "--strict" in action


def test_pre_push_hook_fails_on_a_change_that_should_never_happen(history: Path) -> None:
    hooks = loads((ROOT / ".pre-commit-hooks.yaml").read_bytes(), ".pre-commit-hooks.yaml")
    hook = next(h for h in hooks if h["id"] == "jobstate-diff")
    assert hook["stages"] == ["pre-push"]
    argv = shlex.split(hook["entry"])
    bin_dir = Path(sys.executable).parent
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(history.parent)}
    base = git(history, "rev-parse", "HEAD").strip()
    env |= {"PRE_COMMIT_FROM_REF": base, "PRE_COMMIT_TO_REF": "HEAD"}
    (history / "state/2026/2026-W34/2026-W34-0/episode.yaml").unlink()
    git(history, "commit", "-qam", "an episode deleted")
    proc = subprocess.run(argv, cwd=history, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "episode deleted" in proc.stdout
    env["PRE_COMMIT_TO_REF"] = base
    clean = subprocess.run(argv, cwd=history, env=env, capture_output=True, text=True, check=False)
    assert clean.returncode == 0, clean.stderr
