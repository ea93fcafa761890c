"""One record model (core/model.py): what no command would write, verify and diff refuse.

A catalog of hand edits, each committed on top of a real pipeline history and run through
``diff BASE --strict`` and ``verify --rev HEAD --against BASE``; the edits the model allows say
which rule allows them. Then the regressions the issue named, and a property: any sequence of
jobstate's own commands leaves states that both checks accept.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobstate.allocation.allocation import allocate
from jobstate.core.periods import parse_period
from jobstate.errors import JobstateError
from jobstate.paid.approval import approve, complete
from jobstate.paid.resolution import resolve
from jobstate.paid.step import paid_step
from jobstate.store.init import init
from jobstate.store.store import Store

from .conftest import FIXED, built_once, git, run_cli
from .review_history import Interrupted, build_pipeline_history, stepping_clock

W34 = parse_period("2026-W34")
BUDGET = "period: iso-week\nbudget:\n  per: week\n  limits: {USD: '100.00'}\n"


def _build(repo: Path) -> Path:
    """The pipeline history, then a budget and in week 2026-W34: 2026-W34-0 approved (a completed step
    with a reservation, a cost and an artifact), 2026-W34-1 with a step accepted at the vendor."""
    build_pipeline_history(repo)
    (repo / "jobstate.yaml").write_text(BUDGET)
    git(repo, "commit", "-qm", "a weekly budget", "jobstate.yaml")
    clock = stepping_clock(FIXED.replace(day=20))
    with Store(repo, now=clock, lock_timeout=5) as store:
        with paid_step(store, "2026-W34-0", "generate", max_cost="5.00 USD") as step:
            step.accepted("task-9")
            step.cost("2.00", "USD")
            (step.output_dir / "out.txt").write_text("the episode\n")
            step.artifact("out.txt")
        approve(store, "2026-W34-0", by="editor")
        eid = allocate(store, "scheduled-run:2026-08-22", W34).episode_id
        with contextlib.suppress(Interrupted), paid_step(store, eid, "generate", max_cost="5.00 USD") as step:
            step.accepted("task-10")
            raise Interrupted
    git(repo, "tag", "base")
    return repo


@pytest.fixture(scope="session")
def _built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_once(tmp_path_factory, "model-pipeline", lambda top: _build(top / "pipeline")) / "pipeline"


@pytest.fixture
def pipeline(_built: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(_built, tmp_path / "pipeline", symlinks=True))


def _replace(repo: Path, rel: str, old: str, new: str) -> None:
    path = repo / rel
    text = path.read_text()
    assert old in text, (rel, old, text)
    path.write_text(text.replace(old, new, 1))


def _write(repo: Path, rel: str, text: str) -> None:
    (repo / rel).parent.mkdir(parents=True, exist_ok=True)
    (repo / rel).write_text(text)


def _alarms(repo: Path, base: str = "base") -> list[dict[str, str]]:
    proc = run_cli("diff", base, "--format", "json", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    alarms: list[dict[str, str]] = json.loads(proc.stdout)["alarms"]
    strict = run_cli("diff", base, "--strict", cwd=repo)
    assert strict.returncode == (1 if alarms else 0), strict.stdout
    return alarms


E34 = "state/2026/2026-W34/2026-W34-0"
A34 = "state/2026/2026-W34/2026-W34-1"


def _append(path: Path, text: str) -> None:
    with path.open("a") as fh:
        fh.write(text)


def _swap_artifact(repo: Path) -> None:
    import hashlib

    data = b"another episode\n"
    (repo / f"{E34}/out.txt").write_bytes(data)
    text = (repo / f"{E34}/artifacts.yaml").read_text()
    old_sha = text.split("sha256: ")[1].split("\n")[0]
    text = text.replace(old_sha, hashlib.sha256(data).hexdigest()).replace("size: 12", f"size: {len(data)}")
    (repo / f"{E34}/artifacts.yaml").write_text(text)


def _reject_and_complete_by_hand(repo: Path) -> None:
    with (repo / f"{E34}/approval.yaml").open("a") as fh:
        fh.write("- status: rejected\n  by: editor\n  at: '2026-08-20T11:00:00Z'\n  reason: no\n")
    (repo / "history/2026/2026-W34").mkdir(parents=True, exist_ok=True)
    (repo / "history/2026/2026-W34/2026-W34-0.yaml").write_text(
        "schema: 1\nepisode_id: 2026-W34-0\ncompleted_at: '2026-08-20T12:00:00Z'\n"
    )


def _rename_with_from_id(repo: Path) -> None:
    (repo / A34).rename(repo / "state/2026/2026-W34/2026-W34-7")
    path = repo / "state/2026/2026-W34/2026-W34-7/episode.yaml"
    text = path.read_text().replace("2026-W34-1", "2026-W34-7").replace("sequence: 1", "sequence: 7")
    path.write_text(text + "migration:\n  from_id: 2026-W34-1\n")


# (name, edit, the alarm kind diff must raise)
Edit = Callable[[Path], object]
FLAGGED: list[tuple[str, Edit, str]] = [
    (
        "negative cost entry",
        lambda r: _replace(r, f"{E34}/costs.yaml", "'2.00'", "'-5000.00'"),
        "record refused",
    ),
    (
        "negative reservation",
        lambda r: _replace(r, f"{E34}/submissions.yaml", "amount: '5.00'", "amount: '-5.00'"),
        "record refused",
    ),
    (
        "accepted attempt edited to not-submitted",
        lambda r: _replace(r, f"{A34}/submissions.yaml", "state: accepted", "state: not-submitted\n    reason: x"),
        "submission rewritten",
    ),
    (
        "key with a trailing space",
        lambda r: _replace(
            r,
            f"{E34}/episode.yaml",
            "allocation_key: scheduled-run:2026-08-21",
            "allocation_key: 'scheduled-run:2026-08-21 '",
        ),
        "key moved",
    ),
    (
        "key with a look-alike character",
        lambda r: _replace(r, f"{E34}/episode.yaml", "scheduled-run:2026-08-21", "scheduled-run:2026-08-2\u0131"),
        "key moved",
    ),
    (
        "reservation lowered",
        lambda r: _replace(r, f"{A34}/submissions.yaml", "amount: '5.00'", "amount: '1.00'"),
        "submission rewritten",
    ),
    (
        "idempotency key rewritten",
        lambda r: _replace(
            r, f"{A34}/submissions.yaml", "idempotency_key: 2026-W34-1.generate.1.", "idempotency_key: x"
        ),
        "submission rewritten",
    ),
    (
        "remote task reference rewritten",
        lambda r: _replace(r, f"{A34}/submissions.yaml", "remote_ref: task-10", "remote_ref: task-11"),
        "submission rewritten",
    ),
    (
        "an attempt removed",
        lambda r: (r / f"{A34}/submissions.yaml").write_text("schema: 1\nsteps: {}\n"),
        "submission rewritten",
    ),
    (
        "settled reservation rewritten",
        lambda r: _replace(r, f"{E34}/submissions.yaml", "spent: '2.00'", "spent: '0.00'"),
        "submission rewritten",
    ),
    (
        "resolution's by rewritten on a completed episode",
        lambda r: _replace(r, "state/2026/2026-W33/2026-W33-0/submissions.yaml", "by: ops-oncall", "by: someone"),
        "completed episode edited",
    ),
    (
        "cost entry rewritten",
        lambda r: _replace(r, f"{E34}/costs.yaml", "'2.00'", "'1.00'"),
        "cost entry rewritten",
    ),
    (
        "decision rewritten",
        lambda r: _replace(r, f"{E34}/approval.yaml", "by: editor", "by: boss"),
        "decision rewritten",
    ),
    (
        "approved artifact replaced with its record updated",
        _swap_artifact,
        "artifact changed after approval",
    ),
    (
        "history written by hand for an episode with a step accepted at the vendor",
        lambda r: _write(
            r,
            "history/2026/2026-W34/2026-W34-1.yaml",
            "schema: 1\nepisode_id: 2026-W34-1\ncompleted_at: '2026-08-20T10:00:00Z'\n",
        ),
        "history without approval",
    ),
    (
        "history written by hand for a rejected episode",
        _reject_and_complete_by_hand,
        "history without approval",
    ),
    (
        "budget cap raised",
        lambda r: _replace(r, "jobstate.yaml", "USD: '100.00'", "USD: '99999999'"),
        "settings loosened",
    ),
    (
        "budget removed",
        lambda r: (r / "jobstate.yaml").write_text("period: iso-week\n"),
        "settings loosened",
    ),
    (
        "budget per changed",
        lambda r: _replace(r, "jobstate.yaml", "per: week", "per: month"),
        "settings loosened",
    ),
    (
        "period kind changed under existing episodes",
        lambda r: (r / "jobstate.yaml").write_text("period: month\n"),
        "settings loosened",
    ),
    (
        "a migration.from_id that is not migrate's shape",
        _rename_with_from_id,
        "migration drift",
    ),
    (
        "duplicate mapping keys in a ledger entry",
        lambda r: _replace(r, f"{E34}/costs.yaml", "  amount: '2.00'\n", "  amount: '2.00'\n  amount: '0.01'\n"),
        "record refused",
    ),
    (
        "an emptied episode.yaml",
        lambda r: (r / f"{E34}/episode.yaml").write_text("# nothing\n"),
        "record refused",
    ),
    (
        "an episode deleted",
        lambda r: shutil.rmtree(r / A34),
        "episode deleted",
    ),
    (
        "a JSON number as remote task reference",
        lambda r: _replace(r, f"{A34}/submissions.yaml", "remote_ref: task-10", "remote_ref: 10"),
        "record refused",
    ),
    (
        # issue 29: a charge after the settlement is no charge a command records (it was "allowed")
        "a cost entry appended to a completed, settled attempt",
        lambda r: _append(
            r / f"{E34}/costs.yaml",
            "- step: generate\n  amount: '0.10'\n  currency: USD\n  remote_ref: task-9\n  attempt: 1\n"
            "  charge_id: late-fee\n  at: '2026-08-20T12:00:00Z'\n",
        ),
        "charge without its attempt",
    ),
    (
        "a cost entry appended for a step that never ran",
        lambda r: _append(
            r / f"{E34}/costs.yaml",
            "- step: rework\n  amount: '0.10'\n  currency: USD\n  remote_ref: task-9\n  attempt: 1\n"
            "  charge_id: late-fee\n  at: '2026-08-20T12:00:00Z'\n",
        ),
        "charge without its attempt",
    ),
    (
        "a cost entry appended for an attempt that does not exist",
        lambda r: _append(
            r / f"{E34}/costs.yaml",
            "- step: generate\n  amount: '0.10'\n  currency: USD\n  remote_ref: task-9\n  attempt: 7\n"
            "  charge_id: late-fee\n  at: '2026-08-20T12:00:00Z'\n",
        ),
        "charge without its attempt",
    ),
]


@pytest.mark.parametrize(("name", "edit", "kind"), FLAGGED, ids=[f[0] for f in FLAGGED])
def test_a_hand_edit_no_command_makes_fails_diff_strict_and_verify_against(
    pipeline: Path, name: str, edit: Edit, kind: str
) -> None:
    edit(pipeline)
    git(pipeline, "add", "-A")
    git(pipeline, "commit", "-qm", f"hand edit: {name}")
    kinds = [a["kind"] for a in _alarms(pipeline)]
    assert kind in kinds, kinds
    proof = run_cli("verify", "--rev", "HEAD", "--against", "base", "--strict", cwd=pipeline)
    assert proof.returncode in (1, 7), proof.stdout


def test_an_edit_split_over_two_commits_is_seen_commit_by_commit(pipeline: Path) -> None:
    # the ledger is rewritten and put back: base and HEAD agree, the commit in between does not
    _replace(pipeline, f"{E34}/costs.yaml", "'2.00'", "'0.50'")
    git(pipeline, "commit", "-qam", "lower the spend for a while")
    _replace(pipeline, f"{E34}/costs.yaml", "'0.50'", "'2.00'")
    git(pipeline, "commit", "-qam", "and back")
    # each commit rewrote the ledger: down, then up again
    assert [a["kind"] for a in _alarms(pipeline)] == ["cost entry rewritten", "cost entry rewritten"]
    assert run_cli("verify", "--rev", "HEAD", "--against", "base", cwd=pipeline).returncode == 1


def test_a_key_moved_across_two_changes_is_an_alarm(pipeline: Path) -> None:
    # one change renames 2026-W34-0's key, the next gives the old key to a new episode
    _replace(pipeline, f"{E34}/episode.yaml", "scheduled-run:2026-08-21", "renamed")
    git(pipeline, "commit", "-qam", "rename")
    new = pipeline / "state/2026/2026-W34/2026-W34-2"
    new.mkdir(parents=True)
    text = (pipeline / f"{E34}/episode.yaml").read_text().replace("renamed", "scheduled-run:2026-08-21")
    (new / "episode.yaml").write_text(text.replace("2026-W34-0", "2026-W34-2").replace("sequence: 0", "sequence: 2"))
    git(pipeline, "add", "-A")
    git(pipeline, "commit", "-qm", "a new episode with the old key")
    assert "key moved" in [a["kind"] for a in _alarms(pipeline)]


# edits the model allows, with the rule that allows them
ALLOWED: list[tuple[str, Edit, str]] = [
    (
        "timezone changed",
        lambda r: (r / "jobstate.yaml").write_text(BUDGET + "timezone: Europe/Berlin\n"),
        "settings other than period and budget are the team's to change (shown, not an alarm)",
    ),
    (
        "a cap lowered",
        lambda r: _replace(r, "jobstate.yaml", "USD: '100.00'", "USD: '50.00'"),
        "tightening a budget loosens nothing",
    ),
]


@pytest.mark.parametrize(("name", "edit", "rule"), ALLOWED, ids=[a[0] for a in ALLOWED])
def test_an_edit_the_model_allows_is_shown_not_alarmed(pipeline: Path, name: str, edit: Edit, rule: str) -> None:
    edit(pipeline)
    git(pipeline, "commit", "-qam", f"{name}: {rule}")
    assert _alarms(pipeline) == []
    out = run_cli("diff", "base", cwd=pipeline).stdout
    assert "No changes" not in out


def test_settings_changes_are_always_shown(pipeline: Path) -> None:
    _replace(pipeline, "jobstate.yaml", "USD: '100.00'", "USD: '50.00'")
    git(pipeline, "commit", "-qam", "tighter")
    out = run_cli("diff", "base", cwd=pipeline).stdout
    assert "Settings changed (jobstate.yaml)" in out
    assert "budget.limits.USD" in out


def test_verify_flags_a_charge_in_a_currency_without_a_cap(pipeline: Path) -> None:
    with (pipeline / f"{E34}/costs.yaml").open("a") as fh:
        fh.write("- step: generate\n  amount: '5000.00'\n  currency: EUR\n  remote_ref: task-9\n  attempt: 1\n")
        fh.write("  charge_id: eur\n  at: '2026-08-20T12:00:00Z'\n")
    git(pipeline, "commit", "-qam", "euros")
    proc = run_cli("verify", "--rev", "HEAD", cwd=pipeline)
    assert proc.returncode == 1
    assert "EUR charged or reserved in a currency budget.limits does not cap" in proc.stdout


def test_verify_flags_an_episode_of_another_period_kind(pipeline: Path) -> None:
    day = pipeline / "state/2026/2026-08-12/2026-08-12-0"
    day.mkdir(parents=True)
    (day / "episode.yaml").write_text(
        "schema: 1\nepisode_id: 2026-08-12-0\nperiod_id: '2026-08-12'\nsequence: 0\nallocation_key: d\n"
        "allocated_at: '2026-08-12T00:00:00Z'\nstatus: allocated\n"
    )
    git(pipeline, "add", "-A")
    git(pipeline, "commit", "-qm", "a day episode")
    proc = run_cli("verify", "--rev", "HEAD", cwd=pipeline)
    assert proc.returncode == 1
    assert "a day episode in a repository of iso-week periods" in proc.stdout


@pytest.mark.parametrize(
    ("rel", "text", "needle"),
    [
        (f"{E34}/episode.yaml", "", "the file is empty"),
        (f"{E34}/costs.yaml", "# only a comment\n", "the file is empty"),
        (f"{E34}/costs.yaml", "schema: 1\nschema: 1\nentries: []\n", "duplicate key"),
    ],
)
def test_empty_and_duplicate_key_records_are_unreadable_everywhere(
    pipeline: Path, rel: str, text: str, needle: str
) -> None:
    (pipeline / rel).write_text(text)
    git(pipeline, "commit", "-qam", "broken record")
    readers = [("verify", "--rev", "HEAD", "--strict"), ("show", "2026-W34-0", "--records")]
    for args in readers + ([("list",)] if rel.endswith("episode.yaml") else []):
        proc = run_cli(*args, cwd=pipeline)
        assert proc.returncode == 7, (args, proc.stdout, proc.stderr)
        assert needle in proc.stdout + proc.stderr


def test_a_paid_step_refuses_a_malformed_ledger_before_the_intent(pipeline: Path) -> None:
    with Store(pipeline, now=lambda: FIXED, lock_timeout=5) as store:
        approve(store, "2026-W34-0", by="editor", reject=True, reason="rework")  # a step may run again
    _replace(pipeline, f"{E34}/costs.yaml", "'2.00'", "2.0")
    git(pipeline, "commit", "-qam", "a float in the ledger")
    head = git(pipeline, "rev-parse", "HEAD")
    with (
        Store(pipeline, now=lambda: FIXED, lock_timeout=5) as store,
        pytest.raises(JobstateError) as caught,
        paid_step(store, "2026-W34-0", "extra", max_cost="1.00 USD"),
    ):
        pytest.fail("the body ran on a malformed ledger")
    assert caught.value.exit_code == 7
    assert git(pipeline, "rev-parse", "HEAD") == head


def test_no_paid_step_runs_on_an_approved_episode(pipeline: Path) -> None:
    # an approved episode's artifacts are final (the model): refused before anything is paid
    head = git(pipeline, "rev-parse", "HEAD")
    with (
        Store(pipeline, now=lambda: FIXED, lock_timeout=5) as store,
        pytest.raises(JobstateError, match="is approved, so its artifacts are final") as caught,
        paid_step(store, "2026-W34-0", "extra"),
    ):
        pytest.fail("a paid step ran on an approved episode")
    assert caught.value.exit_code == 2
    assert git(pipeline, "rev-parse", "HEAD") == head


def test_the_writer_refuses_what_the_model_refuses(pipeline: Path) -> None:
    # jobstate's own writer goes through the model: an attempt rewritten under it is refused (exit 4)
    from jobstate.core.attempts import submissions_to_yaml_dict
    from jobstate.store.records import submissions, submissions_change

    with Store(pipeline, now=lambda: FIXED, lock_timeout=5) as store:
        steps = submissions(store, "2026-W34-1")
        steps["generate"][0] = steps["generate"][0].updated(state="not-submitted", reason="by hand")
        with pytest.raises(JobstateError) as caught:
            submissions_change(store, "2026-W34-1", steps, "rewrite", None)
        assert caught.value.exit_code == 4
        assert "accepted may become only completed, superseded" in str(caught.value)
        assert submissions_to_yaml_dict(steps)  # the refused change was built, never written


def test_an_uncommitted_settings_edit_is_refused_by_committing_commands(pipeline: Path) -> None:
    (pipeline / "jobstate.yaml").write_text("period: day\n")
    head = git(pipeline, "rev-parse", "HEAD")
    proc = run_cli("allocate", "--key", "new", "--date", "2026-08-20", cwd=pipeline)
    assert proc.returncode == 2, proc.stderr
    assert "jobstate.yaml differs from HEAD" in proc.stderr
    assert git(pipeline, "rev-parse", "HEAD") == head
    assert git(pipeline, "status", "--porcelain").strip() == "M jobstate.yaml"


def test_init_refuses_a_state_folder_holding_what_jobstate_did_not_write(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "state").mkdir()
    (repo / "state" / "notes.txt").write_text("mine\n")
    proc = run_cli("init", cwd=repo)
    assert proc.returncode == 2
    assert "state/notes.txt" in proc.stderr
    assert not (repo / "jobstate.yaml").exists()


# ---------------------------------------------------------------- property: commands only
OPS = ["allocate", "run", "unknown", "resolve-not", "resolve-accepted", "approve", "reject", "complete", "supersede"]


def _apply(store: Store, op: str, n: int) -> None:
    with contextlib.suppress(JobstateError, Interrupted):
        latest = sorted((store.root / "state").glob("2026-W34-*"))
        eid = latest[-1].name if latest else allocate(store, "k0", W34).episode_id
        if op == "allocate":
            allocate(store, f"k{n}", W34)
        elif op == "run":
            with paid_step(store, eid, "gen") as step:
                if step.remote_ref is None:
                    step.accepted(f"t{n}")
                step.cost("1.00", "USD")
                (step.output_dir / f"a{n}.txt").write_text(str(n))
                step.artifact(f"a{n}.txt")
        elif op == "unknown":
            with paid_step(store, eid, "gen"):
                raise Interrupted
        elif op == "resolve-not":
            resolve(store, eid, "gen", accepted=None, by="ops", reason="not there")
        elif op == "resolve-accepted":
            resolve(store, eid, "gen", accepted=f"t{n}", by="ops", reason="found it")
        elif op == "approve":
            approve(store, eid, by="editor")
        elif op == "reject":
            approve(store, eid, by="editor", reject=True, reason="again")
        elif op == "complete":
            complete(store, eid)
        elif op == "supersede":
            resolve(store, eid, "gen", accepted=None, by="ops", reason="new request", supersede=True)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.sampled_from(OPS), min_size=1, max_size=7))
def test_any_sequence_of_commands_passes_verify_and_diff(tmp_path: Path, ops: list[str]) -> None:
    repo = Path(tempfile.mkdtemp(dir=tmp_path))
    git(repo, "init", "-q")
    init(repo)[0].close()
    git(repo, "tag", "-f", "start")
    with Store(repo, now=stepping_clock(FIXED), lock_timeout=5) as store:
        for n, op in enumerate(ops):
            _apply(store, op, n)
    # not --strict: a step left unknown is a warning there, which --strict turns into a failure on purpose
    assert run_cli("verify", cwd=repo).returncode == 0
    assert run_cli("diff", "start", "--strict", cwd=repo).returncode == 0
    commits = git(repo, "rev-list", "--reverse", "start..HEAD").split()
    for older, newer in zip(["start", *commits], commits, strict=False):
        assert run_cli("diff", older, newer, "--strict", cwd=repo).returncode == 0, (older, newer, ops)
    assert run_cli("verify", "--rev", "HEAD", "--against", "start", cwd=repo).returncode == 0
