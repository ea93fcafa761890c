"""The ``jobstate`` command: parse, call one library function, print, map errors to exit codes.

stdout carries only the answer; every error is one line on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from jobstate.errors import USAGE, JobstateError, UsageError

if TYPE_CHECKING:
    from jobstate.periods import Period
    from jobstate.store import Store


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # one line, not argparse's usage block
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def _print_json(value: object) -> None:
    import json  # noqa: PLC0415 - not on the plain retry path

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
    import json  # noqa: PLC0415

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
    report = verify(path, rev=args.rev, against=args.against, workers=args.jobs)
    if args.json:
        _print_json(report.to_json(args.strict))
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


class _Skipped:
    """Stands in for the parser of a command that is not being run: building them all costs
    more than the retry path's own work (argparse looks up translations for every string)."""

    def add_argument(self, *args: object, **kwargs: object) -> None:
        pass

    def add_mutually_exclusive_group(self, **kwargs: object) -> _Skipped:
        return self

    def set_defaults(self, **kwargs: object) -> None:
        pass


class _OnlyOne:
    def __init__(self, sub: Any, name: str) -> None:
        self.sub, self.name = sub, name

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        return self.sub.add_parser(name, **kwargs) if name == self.name else _Skipped()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser (also used to document the commands); with ``only``, that command's alone."""
    common = _Parser(add_help=False)
    common.add_argument("--repo", help="state repository (default: $JOBSTATE_REPO or the current directory)")
    common.add_argument("--lock-timeout", type=float, help="seconds to wait for the lock (exit 3 after)")
    common.add_argument(
        "--remote", help="state changes must reach this shared git remote (default: remote: in jobstate.yaml)"
    )
    parser = _Parser(prog="jobstate", description="Durable, idempotent episode IDs for recurring paid jobs.")
    sub: Any = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    if only is not None:
        sub = _OnlyOne(sub, only)

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
    p.add_argument("--json", action="store_true")
    p.add_argument("--jobs", type=int, help="hashing threads (default: one per core)")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("migrate", parents=[common], help="legacy week-only IDs to versioned IDs, in one commit")
    p.add_argument("--dry-run", action="store_true", help="print the plan and the YAML diff; write nothing")
    p.set_defaults(func=cmd_migrate)

    p = sub.add_parser("lock-info", parents=[common], help="who holds the lock")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_lock_info)
    return parser


_COMMANDS = frozenset(
    ("init", "allocate", "show", "list", "run", "resolve", "approve", "complete", "verify", "migrate", "lock-info")
)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: returns the exit code."""
    try:
        words = sys.argv[1:] if argv is None else list(argv)
        # a known command first: build its parser alone; anything else gets the whole parser's answer
        only = words[0] if words and words[0] in _COMMANDS else None
        args = build_parser(only).parse_args(words)
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
