"""The command line: every subcommand with its options and their help text (``jobstate COMMAND --help``),
and the checks every option's value passes before a command sees it. ``jobstate.main`` dispatches.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn, cast

from jobstate.core.inputs import number, one_line
from jobstate.core.keys import SCHEDULERS
from jobstate.errors import UsageError, help_table
from jobstate.version import __version__


class _Parser(argparse.ArgumentParser):
    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse's own asks shutil (which loads bz2 and lzma) for the width, on every add_argument
        formatter = cast("type[argparse.HelpFormatter]", self.formatter_class)
        return formatter(prog=self.prog, width=_columns() - 2)

    def error(self, message: str) -> NoReturn:
        # one line, not argparse's usage block; the error handler already says "jobstate:"
        where = self.prog.removeprefix("jobstate").strip()
        raise UsageError(f"{where + ': ' if where else ''}{message} (see {self.prog} --help)")


def _columns() -> int:
    """The terminal width as shutil.get_terminal_size reckons it: $COLUMNS, the terminal, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns if sys.__stdout__ else 0
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def _number(what: str, low: float, high: float, *, whole: bool) -> Callable[[str], float]:
    """An argparse type: a number of ``what`` from ``low`` to ``high`` (core.inputs.number, the one rule)."""

    def parse(text: str) -> float:
        try:
            return number(text, what, low, high, whole=whole)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def check_text(a: argparse.Namespace) -> None:
    """Every option's text is one line (core.inputs.one_line); CMD's own arguments are CMD's business."""
    for dest, value in vars(a).items():
        if dest in ("cmd", "now") or not isinstance(value, str):
            continue
        option = dest.upper() if dest in _POSITIONAL else "--" + dest.rstrip("_").replace("_", "-")
        one_line(value, option)


_POSITIONAL = frozenset(("episode_id", "episode", "base", "rev"))


_seconds = _number("seconds", 0, 86400, whole=False)
_threads = _number("threads", 1, 1024, whole=True)
_chars = _number("characters", 2000, 100_000_000, whole=True)  # 2000: room for the cut marker
_probe_limit = _number("seconds", 0, 3600, whole=False)


def _probe_seconds(text: str) -> float:
    value = _probe_limit(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0 and at most 3600")
    return value


def _probe_options(p: argparse.ArgumentParser, *, group: Any = None) -> None:
    """--probe and --probe-timeout; in ``group`` (resolve's one-of), --probe may come without a command."""
    text = (
        "a read-only lookup at the vendor, one command line run without a shell, that answers whether the "
        "unknown attempt's task exists (docs/paid-steps.md#probes); default: the step's probe in jobstate.yaml"
    )
    if group is None:
        p.add_argument("--probe", metavar="PROBE_CMD", help=text)
    else:
        group.add_argument("--probe", metavar="PROBE_CMD", nargs="?", const="", help=text)
    p.add_argument(
        "--probe-timeout",
        type=_probe_seconds,
        metavar="SECONDS",
        help="end the probe after this many seconds, above 0 and at most 3600 (default: probe_timeout in "
        "jobstate.yaml, else 60); a probe that has not answered leaves the step unknown",
    )


def _add_common(parser: argparse.ArgumentParser, default: object) -> None:
    # given before the command they become the defaults; after it they override (SUPPRESS keeps the earlier value)
    parser.add_argument(
        "--repo", default=default, help="state repository (default: $JOBSTATE_REPO or the current directory)"
    )
    parser.add_argument(
        "--lock-timeout", type=_seconds, default=default, help="seconds to wait for the lock, 0 to 86400 (exit 3 after)"
    )
    parser.add_argument(
        "--remote",
        default=default,
        help="shared git remote state changes must reach (default: $JOBSTATE_REMOTE, or remote: in jobstate.yaml)",
    )


RUN_EPILOG = """\
CMD runs without a shell, after the guard (the episode exists, is committed and clean; the step is
not running elsewhere, not unknown, not completed), with this environment:
  JOBSTATE_EPISODE          the episode ID
  JOBSTATE_STEP             the step name
  JOBSTATE_IDEMPOTENCY_KEY  send it to the vendor: the same attempt always sends the same key
  JOBSTATE_EPISODE_DIR      the episode directory as committed: read from it, never write into it
  JOBSTATE_OUTPUT_DIR       this attempt's own directory (.jobstate/work/ID/STEP/N): write outputs here
  JOBSTATE_REMOTE_REF       the vendor's task reference when resuming an accepted task (else unset)
  JOBSTATE_RESULT           the file CMD reports through (below)
  JOBSTATE_REPO             the state repository

The result protocol: CMD writes one JSON object to $JOBSTATE_RESULT, every field optional; it may
write it early (as soon as the vendor accepted) and again at the end:
  {"remote_ref": "task-81",
   "cost": {"amount": "12.40", "currency": "USD", "charge_id": "optional"},
   "artifacts": ["final.mp4"]}
  remote_ref   the vendor accepted the submission as this task (committed at once)
  submitted    false: the vendor certainly did not accept it (a new attempt may follow)
  error        why, with "submitted": false
  cost         one charge or a list of them; amounts are decimal strings, never JSON numbers;
               a charge reported again is not added twice, one that contradicts the ledger is exit 4
  artifacts    paths inside JOBSTATE_OUTPUT_DIR (regular files, one link each), moved into the
               episode directory under the same path, with sha256 and size, in the commit recording them
Unknown fields, or exit 0 without a result file, get a warning on stderr.

Money: --max-cost "12.40 USD" reserves the step's maximum against the period's budget before CMD
runs; --request FILE adds the request's bytes to the fingerprint (with CMD's argv) that a later run
of the same step must match.

Exit codes: 0 done (or already completed); 9 CMD failed, or could not start (its own code, or 127/126
as a shell says, on stderr); 2 bad input, a refused result file, or a committed file CMD changed
without reporting it; 3 the step or the lock is held elsewhere; 5 unknown episode; 11 the episode is
completed; 6 an earlier attempt is unknown (run: jobstate resolve ...); 4 a charge contradicts the
ledger, or the request changed (jobstate resolve --supersede); 8 the budget has no room for
--max-cost; 7 state cannot be read. All codes: jobstate --help.
"""


def _scheduler_options(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument(
        "--from",
        dest="from_",
        metavar="SCHEDULER",
        choices=SCHEDULERS,
        required=required,
        help=f"build the key from this scheduler's identity for the run: {', '.join(SCHEDULERS)}",
    )
    p.add_argument(
        "--job-name",
        help="cron, systemd: the job's name; kubernetes: the Job's name (default: $JOB_NAME); "
        "github-actions: a name that makes one episode per job of a run",
    )
    p.add_argument(
        "--schedule",
        metavar="CRON_EXPR",
        help="cron, systemd: the job's schedule, e.g. '0 6 * * 1'; github-actions: the workflow's cron (UTC)",
    )
    p.add_argument("--tz", help="the schedule's timezone (default: timezone in jobstate.yaml, else UTC)")
    p.add_argument("--podinfo", metavar="DIR", help="kubernetes: the Downward API volume (files labels, namespace)")
    p.add_argument("--manual", action="store_true", help="cron, systemd: this run was started by hand")


class _Skipped:
    """Stands in for the parser of a command that is not being run: building them all costs more
    than a retried allocate's own work (argparse looks up translations for every string)."""

    def add_argument(self, *args: object, **kwargs: object) -> None:
        pass

    def add_mutually_exclusive_group(self, **kwargs: object) -> _Skipped:
        return self

    def set_defaults(self, **kwargs: object) -> None:
        pass


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser (also used to document the commands); with ``only``, that command's alone."""
    common = _Parser(add_help=False)
    _add_common(common, argparse.SUPPRESS)
    parser = _Parser(
        prog="jobstate",
        description="Durable, idempotent episode IDs for recurring paid jobs.",
        epilog=f"exit codes (the same in every command; docs/exit-codes.md says when):\n{help_table()}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"jobstate {__version__}")
    _add_common(parser, None)
    sub = parser.add_subparsers(
        dest="command",
        required=True,
        parser_class=_Parser,
        metavar="COMMAND",
        help="jobstate COMMAND --help for its options",
    )

    def command(name: str, text: str, epilog: str | None = None) -> argparse.ArgumentParser:
        if only is not None and name != only:
            return cast("argparse.ArgumentParser", _Skipped())
        p = sub.add_parser(
            name,
            parents=[common],
            help=text,
            description=text,
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        return p

    def json_flag(p: argparse.ArgumentParser) -> None:
        p.add_argument("--json", action="store_true", help="print one JSON value instead of text")

    p = command("init", "set up state/, history/ and jobstate.yaml, and commit them")
    p.add_argument("--git-init", action="store_true", help="run git init first when not inside a repository")
    p.add_argument(
        "--force",
        action="store_true",
        help="start a state even though another branch (local or remote-tracking) already holds one",
    )

    p = command("allocate", "print the episode ID for an allocation key (the same key, the same ID)")
    p.add_argument("--key", help="the scheduler's stable identity for this run, 1-512 characters (or --from SCHEDULER)")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--date", help="calendar date YYYY-MM-DD of the run")
    when.add_argument("--week", help="ISO week YYYY-Www")
    when.add_argument("--period", help="a period ID: YYYY-Www, YYYY-MM-DD or YYYY-MM")
    when.add_argument(
        "--at",
        help="scheduled time, ISO 8601; mapped to a period in the configured timezone "
        "(with --from cron or systemd: the time whose slot counts)",
    )
    p.add_argument(
        "--any-branch",
        action="store_true",
        help="allocate a new ID although HEAD is not the state's branch (state_branch in jobstate.yaml)",
    )
    _scheduler_options(p)
    json_flag(p)

    p = command("key", "the key, intended time and period --from a scheduler (read-only, writes nothing)")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--date", help="count the run in the period of this date YYYY-MM-DD")
    when.add_argument("--week", help="count the run in this ISO week YYYY-Www")
    when.add_argument("--period", help="count the run in this period ID")
    when.add_argument("--at", help="the intended time, ISO 8601 (cron, systemd: the time whose slot counts)")
    _scheduler_options(p, required=True)
    json_flag(p)

    p = command("show", "print one episode and its status now (read-only)")
    p.add_argument("episode_id", help="an episode ID, e.g. 2026-W32-0")
    p.add_argument(
        "--records",
        action="store_true",
        help="also print submissions, costs, artifacts and approval (always with --json)",
    )
    json_flag(p)

    p = command("list", "list episodes, optionally of one period (read-only)")
    p.add_argument("--period", help="only this period, e.g. 2026-W32")
    json_flag(p)

    p = command("run", "run a paid step's command after the guard, recording what it reports", RUN_EPILOG)
    p.add_argument("--episode", required=True, help="an allocated, committed episode ID")
    p.add_argument("--step", required=True, help="step name: lower-case letters, digits, - and _ (e.g. generate)")
    p.add_argument(
        "--max-cost",
        metavar="'AMOUNT CUR'",
        help="the most this step may cost, e.g. '12.40 USD': reserved against the budget before CMD runs",
    )
    p.add_argument(
        "--request",
        metavar="FILE",
        help="the request CMD sends; its bytes and CMD's argv make the fingerprint a rerun must match",
    )
    _probe_options(p)
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS... (run without a shell)")

    p = command("resolve", "settle a submission whose acceptance is unknown, or supersede an attempt")
    p.add_argument("--episode", required=True, help="the episode of the unknown step")
    p.add_argument("--step", required=True, help="the unknown step")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--accepted", metavar="REMOTE_REF", help="the vendor accepted it as this task: resume it")
    how.add_argument("--not-submitted", action="store_true", help="the vendor has no such task: a new attempt may run")
    how.add_argument(
        "--supersede",
        action="store_true",
        help="the request changed: close the completed attempt and let a new one run (an accepted one is "
        "collected first, by running its recorded request again)",
    )
    p.add_argument(
        "--replaces",
        metavar="OLD_REF",
        help="with --accepted NEW_REF: the vendor now reports the accepted task OLD_REF as NEW_REF; its attempt "
        "is superseded and NEW_REF resumed with the same idempotency key",
    )
    _probe_options(p, group=how)
    p.add_argument("--by", help="who decided (recorded; required but with --probe)")
    p.add_argument("--reason", help="why (recorded; required but with --probe)")

    p = command(
        "probe",
        "settle every unknown step by asking the vendor through the step's probe (read-only at the vendor); "
        "exit 6 while one stays unknown",
    )
    p.add_argument("--episode", help="only this episode (default: every episode)")
    p.add_argument("--step", help="only this step")
    _probe_options(p)
    json_flag(p)

    p = command("approve", "approve (or --reject) an episode's output")
    p.add_argument("--episode", required=True, help="the episode to approve")
    p.add_argument("--by", required=True, help="who decided (recorded)")
    p.add_argument("--reject", action="store_true", help="reject instead of approve (needs --reason)")
    p.add_argument("--reason", help="why (recorded; required with --reject)")

    p = command("complete", "write history/<id>.yaml for an approved episode")
    p.add_argument("--episode", required=True, help="the approved episode to complete")
    json_flag(p)

    p = command("retire", "remove an episode from state/; a tombstone keeps its ID and key from ever being reused")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("episode_arg", metavar="EPISODE", nargs="?", help="the episode to retire, e.g. 2026-W32-0")
    which.add_argument("--episode", help="the same, named as every other command names it")
    p.add_argument("--by", required=True, help="who retires it (recorded; one line, at most 200 characters)")
    p.add_argument("--reason", required=True, help="why (recorded; one line, at most 1000 characters)")
    json_flag(p)

    p = command("verify", "read-only checks of the state (CI, pull requests)")
    p.add_argument("--rev", help="check this revision from Git objects instead of the work tree")
    p.add_argument("--against", metavar="BASE", help="also prove what a migration must preserve since BASE")
    p.add_argument("--strict", action="store_true", help="warnings (e.g. unknown submissions) fail too")
    p.add_argument(
        "--uncommitted-ok",
        action="store_true",
        help="do not require the work tree to be committed (a pre-commit hook checks staged changes)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object (same as --format json)")
    p.add_argument(
        "--format",
        choices=("text", "json", "github"),
        default="text",
        help="text (default), json, or github: workflow annotations (::error file=...,line=...::) for Actions",
    )
    p.add_argument("--jobs", type=_threads, help="hashing threads, 1 to 1024 (default: one per core)")
    p.add_argument(
        "--require-signed",
        action="store_true",
        help="every commit changing state/, history/ or jobstate.yaml (since --against BASE) must carry a good "
        "signature from a trusted key (refused in a shallow clone)",
    )
    p.add_argument(
        "--allowed-signers",
        metavar="FILE",
        help="the ssh keys trusted for --require-signed (allowed-signers format), "
        "instead of gpg.ssh.allowedSignersFile",
    )
    p.add_argument(
        "--approvers",
        metavar="FILE",
        help="allowed-signers file of who may decide: every approve, reject, resolve and complete commit "
        "(since --against BASE) must be signed by one of its keys",
    )

    def max_chars(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--max-chars",
            type=_chars,
            default=65_536,
            help="markdown: at most this many characters (UTF-8 bytes); whole sections beyond it are left out "
            "with a marker (default 65536, a GitHub comment; 1048576 fits a step summary)",
        )
        p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")

    p = command("diff", "what changed in the state between two revisions, in words (read-only)")
    p.add_argument("base", metavar="BASE", help="the base revision, e.g. origin/main or a PR's base SHA")
    p.add_argument("rev", metavar="REV", nargs="?", default="HEAD", help="the revision to compare (default HEAD)")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text", help="output format")
    max_chars(p)
    p.add_argument("--strict", action="store_true", help="exit 1 when a change that should never happen is found")
    p.add_argument(
        "--approvers",
        metavar="FILE",
        help="allowed-signers file of who may decide: a decision whose commit (a merge's included) is not "
        "signed by one of its keys is an alarm, by the rule verify --approvers applies",
    )

    p = command("report", "episodes, statuses and spend per period (read-only)")
    p.add_argument("--rev", default="HEAD", help="report this revision, from Git objects (default HEAD)")
    p.add_argument("--period", help="only this period, e.g. 2026-W32")
    p.add_argument("--since", metavar="P", help="only periods from P on (inclusive)")
    p.add_argument("--until", metavar="P", help="only periods up to P (inclusive)")
    p.add_argument(
        "--format", choices=("text", "markdown", "json", "html"), default="text", help="html: one self-contained page"
    )
    max_chars(p)

    p = command("migrate", "legacy week-only IDs to versioned IDs, in one commit")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan and the YAML diff; write nothing")
    mode.add_argument(
        "--check",
        action="store_true",
        help="list the legacy fields the migration keeps as text but no command reads (exit 1 when there is "
        "one); write nothing",
    )
    p.add_argument("--json", action="store_true", help="with --check: print one JSON value instead of text")

    p = command(
        "budget",
        "cap, spent, reserved and remaining per currency of one budget period (read-only); "
        "budget acknowledge records that a person reviewed its overrun",
    )
    p.add_argument(
        "action",
        nargs="?",
        choices=["acknowledge"],
        help="acknowledge: record, in one commit, that the period's overrun was reviewed; verify then "
        "stops failing on it (up to what was spent when acknowledged)",
    )
    p.add_argument("--period", help="a period ID; the budget period that contains it (default: the current one)")
    p.add_argument("--by", help="with acknowledge: who reviewed the overrun (1-200 characters)")
    p.add_argument("--reason", help="with acknowledge: why it is accepted (1-1000 characters)")
    json_flag(p)

    p = command("lock-info", "say who holds the lock (read-only)")
    json_flag(p)
    return parser
