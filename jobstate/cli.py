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

    return open_store(args.repo, lock_timeout=args.lock_timeout)


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
    local = moment.replace(tzinfo=zone) if moment.tzinfo is None else moment.astimezone(zone)
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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (also used to document the commands)."""
    common = _Parser(add_help=False)
    common.add_argument("--repo", help="state repository (default: $JOBSTATE_REPO or the current directory)")
    common.add_argument("--lock-timeout", type=float, help="seconds to wait for the lock (exit 3 after)")
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
        print(f"jobstate: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("jobstate: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        print(f"jobstate: error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return USAGE
    return code
