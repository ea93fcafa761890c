"""The ``jobstate`` command: parse, call one library function, print, map errors to exit codes.

stdout carries only the answer; every error is one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from jobstate.errors import USAGE, JobstateError, UsageError

if TYPE_CHECKING:
    from jobstate.periods import Period
    from jobstate.store import Store


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # one line, not argparse's usage block
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def _print_json(value: object) -> None:
    print(json.dumps(value, sort_keys=False, ensure_ascii=False))


def _store(args: argparse.Namespace) -> Store:
    from jobstate.store import open_store  # noqa: PLC0415

    remote = getattr(args, "remote", None)
    if remote is not None and not remote.strip():
        raise UsageError("--remote needs the name of a git remote, e.g. --remote origin")
    return open_store(args.repo, lock_timeout=args.lock_timeout, remote=remote)


def _period(args: argparse.Namespace, kind: str, tz: str) -> Period:
    from jobstate import periods  # noqa: PLC0415

    if args.week is not None:
        if not isinstance(args.week, str) or not args.week.startswith(tuple("0123456789")) or "-W" not in args.week:
            raise UsageError(f"invalid ISO week {args.week!r}: expected YYYY-Www, e.g. 2026-W32")
        return periods.parse_period(args.week, "iso-week")
    if args.period is not None:
        return periods.parse_period(args.period)
    if args.date is not None:
        return periods.period_of(periods.parse_date(args.date), kind)
    from datetime import datetime  # noqa: PLC0415
    from zoneinfo import ZoneInfo  # noqa: PLC0415

    try:
        moment = datetime.fromisoformat(args.at)
    except ValueError:
        raise UsageError(f"invalid time {args.at!r}: expected ISO 8601, e.g. 2026-08-07T23:30:00+00:00") from None
    zone = ZoneInfo(tz)
    try:
        local = moment.replace(tzinfo=zone) if moment.tzinfo is None else moment.astimezone(zone)
    except OverflowError:
        raise UsageError(f"time {args.at!r} falls outside the calendar in timezone {tz}") from None
    return periods.period_of(local.date(), kind)


def cmd_allocate(args: argparse.Namespace) -> int:
    from jobstate.allocation import allocate  # noqa: PLC0415

    with _store(args) as store:
        period = _period(args, store.config.period, store.config.timezone)
        result = allocate(store, args.key, period)
    if result.recovered:
        print(f"jobstate: recovered {result.episode_id}, left uncommitted by an interrupted allocate", file=sys.stderr)
    if args.json:
        _print_json(result.to_json())
    else:
        print(result.episode_id)
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    from jobstate.setup_repo import init  # noqa: PLC0415

    path = Path(args.repo or os.environ.get("JOBSTATE_REPO") or ".")
    store, changed = init(path, git_init=args.git_init)
    with store:
        print(f"jobstate: {'initialized' if changed else 'already initialized'} {store.root}", file=sys.stderr)
    print(store.root)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    with _store(args) as store:
        episode = store.episode(args.episode_id)
    data = episode.to_yaml_dict()
    if args.json:
        _print_json(data)
    else:
        from jobstate.yamlio import dumps  # noqa: PLC0415

        sys.stdout.write(dumps(data).decode("utf-8"))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    with _store(args) as store:
        if args.period is not None:
            from jobstate.periods import parse_period  # noqa: PLC0415

            parse_period(args.period)
        episodes = store.episodes(args.period)
    if args.json:
        _print_json([e.to_yaml_dict() for e in episodes])
    else:
        for e in episodes:
            print(f"{e.episode_id}\t{e.status}\t{e.allocation_key}")
    return 0


def cmd_lock_info(args: argparse.Namespace) -> int:
    from jobstate.lock import describe  # noqa: PLC0415

    with _store(args) as store:
        holder = store.lock_holder()
        path = store.lock_path
    if args.json:
        _print_json({"locked": holder is not None, "lock": str(path), "holder": holder})
    elif holder is None:
        print(f"unlocked: nobody holds {path}")
    else:
        print(f"locked: {path} is held by {describe(holder)}")
    return 0


class CommandFailed(JobstateError):
    """The command run by ``jobstate run`` failed; its exit code is passed on."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.exit_code = code


def _read_report(path: Path) -> dict[str, object]:
    if not path.exists():
        return {}
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise UsageError(f"{path}: the command's JOBSTATE_RESULT is not one JSON object") from None
    if not isinstance(report, dict):
        raise UsageError(f"{path}: the command's JOBSTATE_RESULT must be one JSON object")
    return report


def cmd_run(args: argparse.Namespace) -> int:
    import subprocess  # noqa: PLC0415

    from jobstate.paid import paid_step  # noqa: PLC0415

    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not command:
        raise UsageError("jobstate run needs a command after --, e.g. jobstate run --episode E --step S -- ./generate")
    with _store(args) as store, paid_step(store, args.episode, args.step) as step:
        result = store.private / "results" / f"{args.episode}.{args.step}.{step.attempt}.json"
        result.parent.mkdir(parents=True, exist_ok=True)
        result.unlink(missing_ok=True)
        env = dict(os.environ)
        env.update(
            JOBSTATE_EPISODE=args.episode,
            JOBSTATE_STEP=args.step,
            JOBSTATE_IDEMPOTENCY_KEY=step.idempotency_key,
            JOBSTATE_RESULT=str(result),
            JOBSTATE_EPISODE_DIR=str(step.directory),
            JOBSTATE_REPO=str(store.root),
        )
        env.pop("JOBSTATE_REMOTE_REF", None)
        if step.remote_ref:
            env["JOBSTATE_REMOTE_REF"] = step.remote_ref
            print(f"jobstate: resuming remote task {step.remote_ref} of {args.step}", file=sys.stderr)
        try:
            proc = subprocess.run(command, env=env, check=False)
        except OSError as exc:
            step.not_submitted(f"command could not start: {exc.strerror}")
            raise UsageError(f"cannot run {command[0]!r}: {exc.strerror}") from None
        report = _read_report(result)
        ref = report.get("remote_ref")
        if ref is not None:
            try:
                step.accepted(str(ref))
            except JobstateError as exc:
                # the vendor accepted: whoever resolves this must learn the task reference from us
                exc.args = (
                    f"{exc}; the vendor accepted remote task {ref}, record it with: jobstate resolve "
                    f"--episode {args.episode} --step {args.step} --accepted {ref} --by NAME --reason TEXT",
                )
                raise
        elif report.get("submitted") is False and step.remote_ref is None:
            step.not_submitted(str(report.get("error", "the command reported that nothing was submitted")))
        cost = report.get("cost")
        if isinstance(cost, dict):
            step.cost(str(cost.get("amount")), str(cost.get("currency")), step.remote_ref)
        elif cost is not None:
            raise UsageError(f"{result}: 'cost' must be an object with amount and currency")
        reported = report.get("artifacts", [])
        if not isinstance(reported, list):
            raise UsageError(f"{result}: 'artifacts' must be a list of paths")
        for path in reported:
            step.artifact(str(path))
        code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode  # killed by a signal: 128+N
        if code != 0:
            state = "accepted, the next run resumes it" if step.remote_ref else "not accepted"
            if step.remote_ref is None and report.get("submitted") is not False:
                state = "unknown: the next run refuses until it is resolved"
            raise CommandFailed(f"{command[0]} exited with {code}; step {args.step} is {state}", code)
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    from jobstate.paid import resolve  # noqa: PLC0415

    with _store(args) as store:
        outcome = resolve(store, args.episode, args.step, accepted=args.accepted, by=args.by, reason=args.reason)
    print(outcome)
    return 0


def cmd_approve(args: argparse.Namespace) -> int:
    from jobstate.paid import approve  # noqa: PLC0415

    with _store(args) as store:
        decision = approve(store, args.episode, by=args.by, reject=args.reject, reason=args.reason or "")
    print(f"{args.episode} {decision['status']}")
    return 0


def cmd_complete(args: argparse.Namespace) -> int:
    from jobstate.paid import complete  # noqa: PLC0415

    with _store(args) as store:
        record = complete(store, args.episode)
    if args.json:
        _print_json(record)
    else:
        totals = ", ".join(f"{v} {k}" for k, v in record["cost_totals"].items()) or "no costs"
        print(f"{args.episode} completed ({totals})")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from jobstate.verify import verify  # noqa: PLC0415

    path = Path(args.repo or os.environ.get("JOBSTATE_REPO") or ".")
    if not path.exists():
        raise UsageError(f"repository path {path} does not exist")
    report = verify(path, rev=args.rev, against=args.against, workers=args.jobs, check_clean=not args.uncommitted_ok)
    if args.json or args.format == "json":
        _print_json(report.to_json(args.strict))
    elif args.format == "github":
        from jobstate.annotations import github_annotations  # noqa: PLC0415

        print("\n".join(github_annotations(report, path, rev=args.rev, strict=args.strict)))
    else:
        for problem in report.problems:
            level = "error" if args.strict or problem.severity == "error" else "warning"
            print(f"{problem.path}: {level}: {problem.message}")
        if report.against is not None:
            if report.differences:
                print(f"against {report.against}: NOT preserved (base beside now):")
                for line in report.differences:
                    print(f"  {line}")
            else:
                print(
                    f"against {report.against}: preserved: artifact hashes, cost entries and totals, "
                    "remote tasks, approvals, completion times"
                )
        print(report.summary(args.strict))
    if not report.ok(args.strict):
        print(f"jobstate: {report.summary(args.strict)}; see the report on stdout", file=sys.stderr)
        return 1
    return 0


def _repo_path(args: argparse.Namespace) -> Path:
    path = Path(args.repo or os.environ.get("JOBSTATE_REPO") or ".")
    if not path.exists():
        raise UsageError(f"repository path {path} does not exist")
    return path


def _emit(text: str, output: str | None) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc.strerror}") from None
    print(f"jobstate: wrote {output}", file=sys.stderr)


def cmd_diff(args: argparse.Namespace) -> int:
    from jobstate.diff import diff  # noqa: PLC0415
    from jobstate.render import render  # noqa: PLC0415

    result = diff(_repo_path(args), args.base, args.rev)
    _emit(render(result, args.format, max_chars=args.max_chars), args.output)
    if args.strict and result.alarms:
        print(f"jobstate: {len(result.alarms)} change(s) that should never happen; see the diff", file=sys.stderr)
        return 1
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from jobstate.render import render  # noqa: PLC0415
    from jobstate.report import report  # noqa: PLC0415

    result = report(_repo_path(args), rev=args.rev, period=args.period, since=args.since, until=args.until)
    if args.format == "html":
        from jobstate.html import to_html  # noqa: PLC0415

        _emit(to_html(result), args.output)
    else:
        _emit(render(result, args.format, max_chars=args.max_chars), args.output)
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from jobstate.migrate import dry_run_text, migrate  # noqa: PLC0415

    with _store(args) as store:
        moves, commit = migrate(store, dry_run=args.dry_run)
    if args.dry_run:
        sys.stdout.write(dry_run_text(moves))
    elif commit is None:
        print("migrate: nothing to migrate (no legacy week-only IDs)")
    else:
        print(f"migrate: {len(moves)} episode(s) migrated in commit {commit[:12]}; verified against its parent")
        for move in moves:
            for line in move.describe():
                print(f"  {line}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (also used to document the commands)."""
    common = _Parser(add_help=False)
    common.add_argument("--repo", help="state repository (default: $JOBSTATE_REPO or the current directory)")
    common.add_argument("--lock-timeout", type=float, help="seconds to wait for the lock (exit 3 after)")
    common.add_argument(
        "--remote", help="state changes must reach this shared git remote (default: remote: in jobstate.yaml)"
    )
    parser = _Parser(prog="jobstate", description="Durable, idempotent episode IDs for recurring paid jobs.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("init", parents=[common], help="set up state/, history/ and jobstate.yaml, and commit")
    p.add_argument("--git-init", action="store_true", help="run git init first when not inside a repository")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("allocate", parents=[common], help="the episode ID for an allocation key")
    p.add_argument("--key", required=True, help="the scheduler's stable identity for this run")
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--date", help="calendar date YYYY-MM-DD of the run")
    when.add_argument("--week", help="ISO week YYYY-Www")
    when.add_argument("--period", help="a period ID: YYYY-Www, YYYY-MM-DD or YYYY-MM")
    when.add_argument("--at", help="scheduled time, ISO 8601; mapped to a period in the configured timezone")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_allocate)

    p = sub.add_parser("show", parents=[common], help="one episode (read-only)")
    p.add_argument("episode_id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("list", parents=[common], help="episodes, optionally of one period (read-only)")
    p.add_argument("--period")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("run", parents=[common], help="run a paid step's command, after the guard")
    p.add_argument("--episode", required=True, help="an allocated, committed episode ID")
    p.add_argument("--step", required=True, help="step name, e.g. generate")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS... (run without a shell)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("resolve", parents=[common], help="settle a submission whose acceptance is unknown")
    p.add_argument("--episode", required=True)
    p.add_argument("--step", required=True)
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--accepted", metavar="REMOTE_REF", help="the vendor accepted it as this task")
    how.add_argument("--not-submitted", action="store_true", help="the vendor has no such task")
    p.add_argument("--by", required=True)
    p.add_argument("--reason", required=True)
    p.set_defaults(func=cmd_resolve)

    p = sub.add_parser("approve", parents=[common], help="approve (or --reject) an episode's output")
    p.add_argument("--episode", required=True)
    p.add_argument("--by", required=True)
    p.add_argument("--reject", action="store_true")
    p.add_argument("--reason")
    p.set_defaults(func=cmd_approve)

    p = sub.add_parser("complete", parents=[common], help="write history/<id>.yaml for an approved episode")
    p.add_argument("--episode", required=True)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_complete)

    p = sub.add_parser("verify", parents=[common], help="read-only checks of the state (CI, pull requests)")
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
    p.add_argument("--jobs", type=int, help="hashing threads (default: one per core)")
    p.set_defaults(func=cmd_verify)

    max_chars = {
        "type": int,
        "default": 65_536,
        "help": "markdown: at most this many characters (UTF-8 bytes); whole sections beyond it are left out "
        "with a marker (default 65536, a GitHub comment; 1048576 fits a step summary)",
    }
    p = sub.add_parser("diff", parents=[common], help="what changed in the state between two revisions (read-only)")
    p.add_argument("base", metavar="BASE", help="the base revision, e.g. origin/main or a PR's base SHA")
    p.add_argument("rev", metavar="REV", nargs="?", default="HEAD", help="the revision to compare (default HEAD)")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text", help="output format")
    p.add_argument("--max-chars", **max_chars)  # type: ignore[arg-type]
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument("--strict", action="store_true", help="exit 1 when a change that should never happen is found")
    p.set_defaults(func=cmd_diff)

    p = sub.add_parser("report", parents=[common], help="episodes, statuses and spend per period (read-only)")
    p.add_argument("--rev", default="HEAD", help="report this revision, from Git objects (default HEAD)")
    p.add_argument("--period", help="only this period, e.g. 2026-W32")
    p.add_argument("--since", metavar="P", help="only periods from P on (inclusive)")
    p.add_argument("--until", metavar="P", help="only periods up to P (inclusive)")
    p.add_argument(
        "--format", choices=("text", "markdown", "json", "html"), default="text", help="html: one self-contained page"
    )
    p.add_argument("--max-chars", **max_chars)  # type: ignore[arg-type]
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("migrate", parents=[common], help="legacy week-only IDs to versioned IDs, in one commit")
    p.add_argument("--dry-run", action="store_true", help="print the plan and the YAML diff; write nothing")
    p.set_defaults(func=cmd_migrate)

    p = sub.add_parser("lock-info", parents=[common], help="who holds the lock")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_lock_info)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: returns the exit code."""
    try:
        args = build_parser().parse_args(argv)
        code: int = args.func(args)
    except JobstateError as exc:
        label = "" if exc.exit_code == 0 or isinstance(exc, CommandFailed) else "error: "
        print(f"jobstate: {label}{exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("jobstate: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        print(f"jobstate: error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return USAGE
    return code
