"""The README and docs/ as a user reads them: every example runs, every link lands, every option is there.

Examples are the fenced ```sh blocks of each page. They run in order, one page per fresh Git
repository under tmp_path, in one bash process per page (so a variable set by one block is there
for the next, as in a terminal), with the jobstate console script of this checkout and the demo
vendor simulator (jobstate_demo/vendor_sim.py) as the paid step. Each block must exit 0, unless
an HTML comment on the line just before its fence says otherwise:

- ``<!-- exit: N -->``: the block is one command, and it exits N (a refusal the page describes);
- ``<!-- not-run: REASON -->``: the block is not run (a crontab line, a script that needs a host
  or a vendor of its own); the reason is required, and such blocks stay few.

Blocks in other languages (yaml, python, text, output without a language) are not run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from jobstate.arguments import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
README_MAX_BYTES = 15_000

FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w-]*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*(?P<kind>exit|not-run):\s*(?P<value>.*?)\s*-->\s*$")
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\((?P<target>[^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*#*\s*$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    exit: int | None  # None: not run
    reason: str = ""

    @property
    def where(self) -> str:
        name = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page.name
        return f"{name}:{self.line}"


def parse(page: Path) -> tuple[list[Block], list[str], list[str]]:
    """The fenced blocks of a page, its prose lines (outside fences), and marker errors."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    prose: list[str] = []
    problems: list[str] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            prose.append(lines[i])
            i += 1
            continue
        indent, lang, start = m["indent"], m["lang"], i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        i += 1
        marker = MARKER.match(lines[start - 1]) if start else None
        expected: int | None = 0
        reason = ""
        if marker and lang != "sh":
            problems.append(f"{page.name}:{start + 1}: a marker before a {lang or 'plain'} block")
        if marker and marker["kind"] == "not-run":
            expected, reason = None, marker["value"]
            if not reason:
                problems.append(f"{page.name}:{start + 1}: not-run without a reason")
        elif marker:
            expected = int(marker["value"])
            commands = [ln for ln in body if ln.strip() and not ln.lstrip().startswith("#")]
            if len(commands) != 1:
                problems.append(f"{page.name}:{start + 1}: an exit marker on a block of {len(commands)} commands")
        blocks.append(Block(page, start + 1, lang, "\n".join(body) + "\n", expected if lang == "sh" else None, reason))
    for n, line in enumerate(lines):
        m = MARKER.match(line)
        if m and not (n + 1 < len(lines) and FENCE.match(lines[n + 1])):
            problems.append(f"{page.name}:{n + 1}: a marker not followed by a fence")
    return blocks, prose, problems


def runnable(page: Path) -> list[Block]:
    return [b for b in parse(page)[0] if b.lang == "sh" and b.exit is not None]


def slug(title: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in parse(page)[1]:
        m = HEADING.match(line)
        if m:
            base = slug(m["title"])
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


# --------------------------------------------------------------------------- the examples run


def _environment(tmp_path: Path) -> dict[str, str]:
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "jobstate").is_file(), f"no jobstate console script beside {sys.executable}"
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBSTATE_", "GIT_")) or k.startswith("GIT_CONFIG")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", TMPDIR=str(temp), LC_ALL="C.UTF-8")
    env.pop("VIRTUAL_ENV", None)
    return env


def run_page(page: Path, tmp_path: Path) -> list[str]:
    """Run a page's sh blocks in order in a fresh Git repository; the blocks that went wrong."""
    blocks = runnable(page)
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    work = tmp_path / "blocks"
    work.mkdir()
    results = work / "results"
    driver = ["cd " + shlex.quote(str(repo))]
    for n, block in enumerate(blocks):
        (work / f"{n}.sh").write_text(block.code, encoding="utf-8")
        src, out = shlex.quote(str(work / f"{n}.sh")), shlex.quote(str(work / f"{n}.out"))
        if block.exit == 0:
            # errexit stops the page at the first failing command, whose block then has no result
            driver.append(f"set -e; . {src} >{out} 2>&1; set +e; echo '{n} 0' >>{shlex.quote(str(results))}")
        else:
            driver.append(f'set +e; . {src} >{out} 2>&1; echo "{n} $?" >>{shlex.quote(str(results))}')
    proc = subprocess.Popen(
        ["bash", "-c", "\n".join(driver)],
        cwd=repo,
        env=_environment(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=600)  # a guard against a hang, not a timing assert
    finally:
        # what a page starts in the background (the demo vendor) is in this process group
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    got = dict(line.split() for line in results.read_text().splitlines()) if results.exists() else {}
    failures = []
    for n, block in enumerate(blocks):
        log = work / f"{n}.out"
        said = log.read_text(errors="replace") if log.exists() else "(not reached)"
        if got.get(str(n)) != str(block.exit):
            failures.append(
                f"{block.where}: expected exit {block.exit}, got {got.get(str(n), 'none')}\n"
                f"{block.code}--- output:\n{said}{output}"
            )
            break
    return failures


PAGES_WITH_EXAMPLES = [p for p in PAGES if runnable(p)]


@pytest.mark.parametrize("page", PAGES_WITH_EXAMPLES, ids=[p.name for p in PAGES_WITH_EXAMPLES])
def test_every_example_of_the_page_runs(page: Path, tmp_path: Path) -> None:
    assert run_page(page, tmp_path) == []


def test_the_readme_walks_through_allocate_run_approve_complete_verify_diff() -> None:
    code = "".join(b.code for b in runnable(README))
    for command in ("allocate", "run", "approve", "complete", "verify", "diff"):
        assert re.search(rf"^jobstate {command} ", code, re.M), command
    assert "jobstate_demo.vendor_sim" in code


def test_markers_are_well_formed_and_few() -> None:
    problems = [p for page in PAGES for p in parse(page)[2]]
    assert problems == []
    not_run = [b for page in PAGES for b in parse(page)[0] if b.lang == "sh" and b.exit is None]
    run = [b for page in PAGES for b in runnable(page)]
    assert len(not_run) * 3 < len(run), [b.where for b in not_run]


def test_a_failing_example_is_reported(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```sh\ntrue\n```\n\n<!-- exit: 4 -->\n```sh\njobstate allocate --key k --week 2026-W99\n```\n")
    failures = run_page(page, tmp_path)
    assert len(failures) == 1
    assert "expected exit 4, got 2" in failures[0]


# --------------------------------------------------------------------------- links, size, options


def test_every_relative_link_lands_on_a_file_and_anchor() -> None:
    broken = []
    for page in PAGES:
        for line in parse(page)[1]:
            for m in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
                target = m["target"]
                if re.match(r"[a-z]+:", target):
                    continue
                path_part, _, anchor = target.partition("#")
                dest = (page.parent / path_part).resolve() if path_part else page
                if not dest.exists():
                    broken.append(f"{page.name}: {target} (no such file)")
                elif anchor and anchor not in anchors(dest):
                    broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []


def test_the_readme_is_at_most_15_kb() -> None:
    assert len(README.read_bytes()) <= README_MAX_BYTES


def test_the_readme_links_every_page_of_the_reference() -> None:
    text = README.read_text(encoding="utf-8")
    for page in DOCS.glob("*.md"):
        assert f"](docs/{page.name}" in text, page.name


def _options(parser: argparse.ArgumentParser, prog: str = "jobstate") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.append((f"{prog} {name}", f"jobstate {name}"))
                out += _options(sub, f"{prog} {name}")
        else:
            out += [(prog, o) for o in action.option_strings if o.startswith("--") and o != "--help"]
    return out


def test_every_command_and_option_of_help_is_in_the_docs() -> None:
    text = "\n".join(p.read_text(encoding="utf-8") for p in PAGES)
    options = _options(build_parser())
    missing = sorted({f"{prog}: {opt}" for prog, opt in options if not re.search(rf"{re.escape(opt)}\b", text)})
    assert missing == []


def _known_options() -> dict[str, set[str]]:
    parser = build_parser()
    known: dict[str, set[str]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                known[name] = {o for a in sub._actions for o in a.option_strings}
    return known


def test_every_option_the_docs_give_a_command_exists() -> None:
    """``jobstate CMD ... --opt`` in prose or an example: --opt is an option of CMD (docs agree with --help)."""
    known = _known_options()
    wrong = []
    for page in PAGES:
        for line in page.read_text(encoding="utf-8").splitlines():
            # one command per piece: a line may hold two (a diagram, "a && b")
            for m in re.finditer(r"\bjobstate ([a-z][a-z-]*)((?:(?!\bjobstate )[^`|;&)]|\$\()*)", line):
                command, rest = m[1], m[2]
                if command not in known:
                    continue
                for option in re.findall(r"(?<![\w-])--[a-z][a-z-]*", rest.split(" -- ")[0]):
                    if option not in known[command]:
                        wrong.append(f"{page.name}: jobstate {command} {option}")
    assert wrong == []
