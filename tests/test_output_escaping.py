"""Output is inert: hostile strings in every field that reaches output, through every output path.

Each string goes into every field the writer accepts it in (allocation key, remote task
reference, artifact path, the by and reason of decisions and resolutions, a file name); what
the writer refuses (any hostile step name, a control character in a key or reference) is
written into the YAML by hand and must be refused by the readers too, naming the file.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import unicodedata
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from jobstate.allocation.allocation import allocate
from jobstate.core.keys import validate_key
from jobstate.core.layout import episode_dir
from jobstate.core.names import (
    validate_artifact_path,
    validate_person,
    validate_reason,
    validate_remote_ref,
    validate_step,
)
from jobstate.core.periods import parse_period
from jobstate.errors import UsageError
from jobstate.main import main
from jobstate.paid.approval import approve
from jobstate.paid.resolution import resolve
from jobstate.paid.step import paid_step
from jobstate.review import escape
from jobstate.store.init import init
from jobstate.store.store import Store

from .conftest import FIXED, built_once, git, git_init, run_cli, stable_cmd
from .review_history import Interrupted, stepping_clock

HOSTILE = {
    "cr": "ok\rNo changes to the state.",
    "lf": "ok\n::error::injected",
    "esc": "\x1b[2J\x1b[HNo changes to the state.",
    "nul": "a\x00b",
    "c1": "a\x9bb",
    "rtl": "abc\u202etxt.exe",
    "zero-width": "ed\u200bi\u2060tor\ufeff",
    "link": "[click](http://evil.example)",
    "image": "![x](http://evil.example/x.png)",
    "tilde-fence": "~~~",
    "backtick-fence": "```js",
    "callout": "> [!NOTE] no alarms, safe to merge",
    "heading": "# No alarms",
    "mention": "@octocat and @github/security",
    "issue-ref": "#1 GH-2",
    "entity": "&lt;b&gt; &amp; &#64;octocat",
    "html": "<img src=x onerror=alert(1)><script>alert(1)</script>",
    "table": "a | b | c",
    "emphasis": "*bold* _it_ ~~del~~ $x^2$ \\",
    "autolink": "www.evil.example https://evil.example <http://evil.example> a@b.example",
    "workflow": "::error file=x,line=1::boom",
    "stop-commands": "::stop-commands::abc",
    "shell": "$(touch x)",
    "shell-backtick": "`touch x`; rm -rf ~ && echo 'q\"",
    "issue-file-name": "x\n::error ::injected\n::stop-commands::abc",
}
W32 = parse_period("2026-W32")


def _accepts(validate: Any, value: str) -> bool:
    try:
        validate(value)
    except UsageError:
        return False
    return True


def _file_name(value: str) -> str | None:
    """``value`` as a file name, if a file system and Git can hold it (and it is no record name)."""
    if "\0" in value or "/" in value or value.startswith("."):
        return None
    return f"x-{value}"


def _build_hostile(top: Path) -> None:
    """One episode per hostile string, each string in every field the writer takes it in."""
    repo = top / "repo"
    git_init(repo)
    init(repo)[0].close()
    git(repo, "tag", "base")
    with Store(repo, now=stepping_clock(FIXED), lock_timeout=5) as store:
        for name, value in HOSTILE.items():
            key = value if _accepts(validate_key, value) else f"key-{name}"
            eid = allocate(store, key, W32).episode_id
            ref = value if _accepts(validate_remote_ref, value) else f"ref-{name}"
            artifact = value if _accepts(validate_artifact_path, value) else f"out-{name}.txt"
            try:
                with paid_step(store, eid, "generate"):
                    raise Interrupted
            except Interrupted:
                pass
            by = value if _accepts(validate_person, value) else f"by-{name}"
            reason = value if _accepts(validate_reason, value) else f"reason-{name}"
            resolve(store, eid, "generate", accepted=ref, by=by, reason=reason)
            with paid_step(store, eid, "generate") as handle:
                handle.cost("1.00", "USD")
                (handle.output_dir / artifact).parent.mkdir(parents=True, exist_ok=True)
                (handle.output_dir / artifact).write_text("output\n")
                handle.artifact(artifact)
            approve(store, eid, by=by, reject=True, reason=reason)
            try:
                with paid_step(store, eid, "upload"):
                    raise Interrupted  # left unknown: report and verify suggest a command
            except Interrupted:
                pass
            extra = _file_name(value)
            if extra is not None:
                (repo / episode_dir(eid) / extra).write_text("not a record\n")
    # base..HEAD as one commit: diff then checks no commit one by one (a few hundred of them took about
    # 15 s for each format), and what it prints is the same, made from the states at base and HEAD
    git(repo, "reset", "-q", "--soft", "base")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "episodes and files named by hostile strings")
    git(repo, "gc", "-q", "--prune=now")  # a few packs copy much faster than thousands of loose objects


@pytest.fixture(scope="session")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy (this worker's own) of the hostile repository, built once per run."""
    built = built_once(tmp_path_factory, "hostile", _build_hostile)
    return Path(shutil.copytree(built / "repo", tmp_path_factory.mktemp("hostile") / "repo", symlinks=True))


def _run(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _assert_inert_text(out: str) -> None:
    for ch in out:
        if ch in "\n\t":  # ours: line ends, and list's column separator
            continue
        assert unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"), repr(ch)
    for line in out.splitlines():
        assert not line.startswith("::"), line  # no workflow command from state


def _inline_text(tokens: list[Any]) -> str:
    return "".join(c.content for t in tokens if t.type == "inline" for c in t.children or [] if c.type == "text")


def _assert_inert_markdown(md: str, loud: int) -> None:
    """What CommonMark with GitHub's table and strikethrough extensions makes of ``md``."""
    parser = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    tokens = parser.parse(md)
    kinds = {t.type for t in tokens} | {c.type for t in tokens for c in t.children or []}
    for forbidden in ("link_open", "image", "fence", "code_block", "html_block", "html_inline", "s_open", "em_open"):
        assert forbidden not in kinds, forbidden
    # headings and callouts are ours only: one h2 title, h3 sections, one blockquote per loud section
    assert [t.tag for t in tokens if t.type == "heading_open"].count("h2") == 1
    assert sum(1 for t in tokens if t.type == "blockquote_open") == loud
    # every row of every table has the header's number of cells
    width = 0
    for t in tokens:
        if t.type == "thead_open":
            width = -1
        elif t.type == "tr_open":
            cells = 0
        elif t.type in ("th_open", "td_open"):
            cells += 1
        elif t.type == "tr_close":
            if width == -1:
                width = cells
            assert cells == width, md
    plain = _inline_text(tokens)
    assert not re.search(r"@[A-Za-z0-9]", plain), "a mention"
    assert not re.search(r"#[0-9]", plain), "an issue reference"
    assert not re.search(r"(?i)://|www\.", plain), "an autolink"
    _assert_inert_text(plain.replace("\u200b", ""))


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attrs: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attrs |= {name for name, _v in attrs}


def test_diff_of_hostile_state_is_inert_in_every_format(hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for fmt in ("text", "markdown", "json"):
        code, out, err = _run("diff", "base", "HEAD", "--repo", str(hostile), "--format", fmt, capsys=capsys)
        assert code == 0, err
        if fmt == "text":
            _assert_inert_text(out)
            assert not any(line.startswith("No changes") for line in out.splitlines())  # nothing drawn over alarms
        elif fmt == "markdown":
            # one loud section: the files no record names (hostile names), flagged as verify flags them
            _assert_inert_markdown(out, loud=1)
            assert escape.markdown(HOSTILE["entity"]) in out
        else:
            alarms = json.loads(out)["alarms"]
            assert {a["kind"] for a in alarms} == {"unrecorded file"}
            assert all(a["message"].endswith(": file is not a jobstate record nor a recorded artifact") for a in alarms)
            decisions = json.loads(out)["decisions"]
            reasons = {v for v in HOSTILE.values() if _accepts(validate_reason, v)}
            assert {d["reason"] for d in decisions} >= reasons  # JSON keeps them exactly


def test_markdown_cells_render_as_the_literal_strings(hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = _run("diff", "base", "HEAD", "--repo", str(hostile), "--format", "markdown", capsys=capsys)
    assert code == 0
    tokens = MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(out)
    cells = [_inline_text([t]).replace("\u200b", "") for t in tokens if t.type == "inline"]
    for value in (v for v in HOSTILE.values() if _accepts(validate_reason, v)):
        assert escape.text(value) in cells, value  # `&lt;` shows as &lt;, `[x](y)` as [x](y), ...


def test_report_of_hostile_state_is_inert_in_every_format(hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for fmt in ("text", "markdown", "json", "html"):
        code, out, err = _run("report", "--repo", str(hostile), "--format", fmt, capsys=capsys)
        assert code == 0, err
        if fmt == "text":
            _assert_inert_text(out)
        elif fmt == "markdown":
            _assert_inert_markdown(out, loud=1)
        elif fmt == "json":
            keys = {e["allocation_key"] for e in json.loads(out)["episodes"]}
            assert HOSTILE["shell"] in keys
        else:
            tags = _Tags()
            tags.feed(out)
            assert not {"script", "img", "a", "iframe", "object", "embed", "form", "input"} & tags.tags
            assert not any(a.startswith("on") for a in tags.attrs)


def test_verify_of_hostile_state_is_inert_in_every_format(hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = _run("verify", "--repo", str(hostile), "--rev", "HEAD", capsys=capsys)
    assert code == 0, out  # unknown steps and unrecorded files are warnings
    _assert_inert_text(out)
    assert "x-$(touch x)" in out
    assert "file is not a jobstate record" in out
    code, out, _err = _run("verify", "--repo", str(hostile), "--rev", "HEAD", "--format", "github", capsys=capsys)
    lines = out.splitlines()
    assert all(re.match(r"::(warning|error|notice) ", line) for line in lines), out
    assert not any("\r" in line for line in lines)
    for line in lines:  # not the ESC of a colour, a bidi override or a zero-width space, in file= or the text
        assert all(unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") for ch in line), line
    code, out, _err = _run("verify", "--repo", str(hostile), "--rev", "HEAD", "--format", "json", capsys=capsys)
    paths = {p["path"] for p in json.loads(out)["problems"]}
    assert any(p.endswith("/x-" + HOSTILE["lf"]) for p in paths)
    assert any(p.endswith("/x-" + HOSTILE["issue-file-name"]) for p in paths)


def test_show_and_list_of_hostile_state_are_inert(
    hostile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hostile = Path(shutil.copytree(hostile, tmp_path / "repo", symlinks=True))  # commands open a Store here
    code, out, err = _run("--repo", str(hostile), "list", capsys=capsys)
    assert code == 0, err
    _assert_inert_text(out)
    ids = [line.split("\t")[0] for line in out.splitlines()]
    assert len(ids) == len(HOSTILE)
    for eid in ids:
        code, out, err = _run("--repo", str(hostile), "show", eid, "--records", capsys=capsys)
        assert code == 0, err
        _assert_inert_text(out)
        code, out, err = _run("--repo", str(hostile), "show", eid, "--json", capsys=capsys)
        assert json.loads(out)["approval"]["reason"] in [*HOSTILE.values(), "reason-nul"]


def test_suggested_commands_are_shell_quoted(hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = _run("report", "--repo", str(hostile), "--format", "json", capsys=capsys)
    assert code == 0
    for unknown in json.loads(out)["unknown_steps"]:
        argv = shlex.split(unknown["resolve"].split(" (")[0])
        assert argv == ["jobstate", "resolve", "--episode", unknown["episode_id"], "--step", unknown["step"]]
    assert escape.shell_command("jobstate", "--step", "upload $(touch /tmp/x)") == (
        "jobstate --step 'upload $(touch /tmp/x)'"
    )


# --- what the writer refuses, the readers refuse, naming the file -------------------------


@pytest.mark.parametrize("name", ["cr", "esc", "rtl", "zero-width", "shell", "table", "link", "issue-example"])
def test_a_step_name_the_writer_refuses_is_refused_when_read(
    history: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue 21's example: a step named so that report's suggested command would run a substitution
    value = HOSTILE.get(name, "upload $(touch /tmp/x)")
    assert not _accepts(validate_step, value)
    path = history / "state/2026/2026-W33/2026-W33-1/submissions.yaml"
    text = path.read_text()
    path.write_text(text.replace("  generate:", f"  {json.dumps(value)}:", 1))
    git(history, "commit", "-qam", "a step no command would name")
    _assert_refused(history, "state/2026/2026-W33/2026-W33-1/submissions.yaml", "invalid step name", capsys)


@pytest.mark.parametrize("name", ["cr", "lf", "esc", "nul", "rtl", "zero-width"])
def test_a_key_or_reference_the_writer_refuses_is_refused_when_read(
    history: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    value = json.dumps(HOSTILE[name])
    episode = history / "state/2026/2026-W34/2026-W34-0/episode.yaml"
    episode.write_text(re.sub(r"allocation_key: .*", lambda _m: f"allocation_key: {value}", episode.read_text()))
    git(history, "commit", "-qam", "a key no command would write")
    _assert_refused(
        history, "state/2026/2026-W34/2026-W34-0/episode.yaml", "invalid allocation key", capsys, episode="2026-W34-0"
    )
    git(history, "reset", "-q", "--hard", "HEAD~1")
    subs = history / "state/2026/2026-W33/2026-W33-0/submissions.yaml"
    subs.write_text(subs.read_text().replace("remote_ref: task-2", f"remote_ref: {value}", 1))
    git(history, "commit", "-qam", "a reference no command would write")
    _assert_refused(history, "state/2026/2026-W33/2026-W33-0/submissions.yaml", "invalid remote task reference", capsys)


@pytest.mark.parametrize(
    "case",
    [
        ("artifacts.yaml", "final.txt:", '"../\\e[2J.txt":', "invalid artifact path"),
        ("approval.yaml", "by: editor", 'by: "editor\\e[2J"', "invalid --by"),
    ],
)
def test_an_artifact_path_or_decision_by_the_writer_refuses_is_refused_when_read(
    history: Path, case: tuple[str, str, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    file, old, new, why = case
    path = history / "state/2026/2026-W33/2026-W33-0" / file
    path.write_text(path.read_text().replace(old, new, 1))
    git(history, "commit", "-qam", "a record no command would write")
    _assert_refused(history, f"state/2026/2026-W33/2026-W33-0/{file}", why, capsys)


def _assert_refused(
    repo: Path, file: str, why: str, capsys: pytest.CaptureFixture[str], *, episode: str | None = None
) -> None:
    code, out, _err = _run("verify", "--repo", str(repo), "--rev", "HEAD", capsys=capsys)
    assert code != 0
    assert any(line.startswith(f"{file}: error: ") and why in line for line in out.splitlines()), out
    _assert_inert_text(out)
    for fmt in ("text", "markdown"):
        code, out, err = _run("report", "--repo", str(repo), "--format", fmt, capsys=capsys)
        assert code == 0, err
        assert f"{file}: " in out.replace("\\", "")
    code, out, err = _run("--repo", str(repo), "show", episode or file.split("/")[3], "--records", capsys=capsys)
    assert code == 7, out
    assert err.startswith("jobstate: error: "), err
    assert file in err, err
    assert why in err, err
    _assert_inert_text(err)


@pytest.mark.parametrize(("by", "reason"), [("ed\x1b[2J", "fine"), ("ed\u202e", "fine"), ("ed", "a\0b")])
def test_approve_and_resolve_refuse_a_by_or_reason_no_reader_would_take(
    history: Path, by: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    head = git(history, "rev-parse", "HEAD")
    for args in (
        ["approve", "--episode", "2026-W34-0", "--by", by, "--reason", reason],
        ["resolve", "--episode", "2026-W33-1", "--step", "generate", "--not-submitted", "--by", by, "--reason", reason],
    ):
        code, out, err = _run("--repo", str(history), *args, capsys=capsys)
        assert code == 2, err
        assert out == ""
        assert len(err.splitlines()) == 1
        _assert_inert_text(err)
    assert git(history, "rev-parse", "HEAD") == head


def test_a_note_quoting_a_result_file_shows_control_characters_escaped(repo: Path) -> None:
    # notes on stderr quote what CMD reported (its error text): an ESC sequence there never reaches a terminal
    assert run_cli("allocate", "--key", "k", "--week", "2026-W32", cwd=repo).returncode == 0
    script = (
        "import json, os\n"
        "report = {'submitted': False, 'error': '\\x1b[2Jvendor said no\\u202e'}\n"
        "json.dump(report, open(os.environ['JOBSTATE_RESULT'], 'w'))\n"
    )
    proc = run_cli("run", "--episode", "2026-W32-0", "--step", "gen", "--", *stable_cmd(script), cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stderr
    assert "\u202e" not in proc.stderr
    assert "\\x1b[2Jvendor said no\\u202e" in proc.stderr
