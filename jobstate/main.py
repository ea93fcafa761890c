"""The ``jobstate`` command: argparse and one dispatch table.

The table is the one place that imports a command, and it does so lazily, so
that a retried ``allocate`` loads no module it does not need. Each command
takes parsed values, calls the library, prints, and returns an exit code;
jobstate.error_handler turns what it raises into one line on stderr.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import NoReturn

from jobstate.error_handler import run_handled
from jobstate.errors import UsageError
from jobstate.store import StoreOptions
from jobstate.version import __version__


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # one line, not argparse's usage block
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value <= 86400:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds between 0 and 86400")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= 1024:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from 1 to 1024")
    return value


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


Dispatch = Callable[[argparse.Namespace], int]


def _options(a: argparse.Namespace) -> StoreOptions:
    return StoreOptions(a.repo, a.lock_timeout, a.remote)


# the single lazy-import boundary: one entry per subcommand
def _init(a: argparse.Namespace) -> int:
    from jobstate.commands.init import init  # noqa: PLC0415

    return init(a.repo, git_init=a.git_init)


def _allocate(a: argparse.Namespace) -> int:
    from jobstate.commands.allocate import allocate  # noqa: PLC0415

    return allocate(_options(a), key=a.key, date=a.date, week=a.week, period=a.period, at=a.at, as_json=a.json)


def _show(a: argparse.Namespace) -> int:
    from jobstate.commands.show import show  # noqa: PLC0415

    return show(_options(a), a.episode_id, as_json=a.json)


def _list(a: argparse.Namespace) -> int:
    from jobstate.commands.list_episodes import list_episodes  # noqa: PLC0415

    return list_episodes(_options(a), period=a.period, as_json=a.json)


def _lock_info(a: argparse.Namespace) -> int:
    from jobstate.commands.lock_info import lock_info  # noqa: PLC0415

    return lock_info(_options(a), as_json=a.json)


def _run(a: argparse.Namespace) -> int:
    from jobstate.commands.run import run  # noqa: PLC0415

    return run(_options(a), episode=a.episode, step=a.step, command=a.cmd)


def _resolve(a: argparse.Namespace) -> int:
    from jobstate.commands.resolve import resolve  # noqa: PLC0415

    return resolve(_options(a), episode=a.episode, step=a.step, accepted=a.accepted, by=a.by, reason=a.reason)


def _approve(a: argparse.Namespace) -> int:
    from jobstate.commands.approve import approve  # noqa: PLC0415

    return approve(_options(a), episode=a.episode, by=a.by, reject=a.reject, reason=a.reason)


def _complete(a: argparse.Namespace) -> int:
    from jobstate.commands.complete import complete  # noqa: PLC0415

    return complete(_options(a), episode=a.episode, as_json=a.json)


def _verify(a: argparse.Namespace) -> int:
    from jobstate.commands.verify import verify  # noqa: PLC0415

    return verify(
        a.repo,
        rev=a.rev,
        against=a.against,
        strict=a.strict,
        as_json=a.json,
        jobs=a.jobs,
        require_signed=a.require_signed,
    )


def _migrate(a: argparse.Namespace) -> int:
    from jobstate.commands.migrate import migrate  # noqa: PLC0415

    return migrate(_options(a), dry_run=a.dry_run)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (also used to document the commands)."""
    common = _Parser(add_help=False)
    _add_common(common, argparse.SUPPRESS)
    parser = _Parser(prog="jobstate", description="Durable, idempotent episode IDs for recurring paid jobs.")
    parser.add_argument("--version", action="version", version=f"jobstate {__version__}")
    _add_common(parser, None)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")

    def command(name: str, func: Dispatch, text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=text, description=text)
        p.set_defaults(func=func)
        return p

    def json_flag(p: argparse.ArgumentParser) -> None:
        p.add_argument("--json", action="store_true", help="print one JSON value instead of text")

    p = command("init", _init, "set up state/, history/ and jobstate.yaml, and commit them")
    p.add_argument("--git-init", action="store_true", help="run git init first when not inside a repository")

    p = command("allocate", _allocate, "print the episode ID for an allocation key (the same key, the same ID)")
    p.add_argument("--key", required=True, help="the scheduler's stable identity for this run (1-512 characters)")
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--date", help="calendar date YYYY-MM-DD of the run")
    when.add_argument("--week", help="ISO week YYYY-Www")
    when.add_argument("--period", help="a period ID: YYYY-Www, YYYY-MM-DD or YYYY-MM")
    when.add_argument("--at", help="scheduled time, ISO 8601; mapped to a period in the configured timezone")
    json_flag(p)

    p = command("show", _show, "print one episode (read-only)")
    p.add_argument("episode_id", help="an episode ID, e.g. 2026-W32-0")
    json_flag(p)

    p = command("list", _list, "list episodes, optionally of one period (read-only)")
    p.add_argument("--period", help="only this period, e.g. 2026-W32")
    json_flag(p)

    p = command("run", _run, "run a paid step's command after the guard, recording what it reports")
    p.add_argument("--episode", required=True, help="an allocated, committed episode ID")
    p.add_argument("--step", required=True, help="step name: lower-case letters, digits, - and _ (e.g. generate)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS... (run without a shell)")

    p = command("resolve", _resolve, "settle a submission whose acceptance is unknown")
    p.add_argument("--episode", required=True, help="the episode of the unknown step")
    p.add_argument("--step", required=True, help="the unknown step")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--accepted", metavar="REMOTE_REF", help="the vendor accepted it as this task: resume it")
    how.add_argument("--not-submitted", action="store_true", help="the vendor has no such task: a new attempt may run")
    p.add_argument("--by", required=True, help="who decided (recorded)")
    p.add_argument("--reason", required=True, help="why (recorded)")

    p = command("approve", _approve, "approve (or --reject) an episode's output")
    p.add_argument("--episode", required=True, help="the episode to approve")
    p.add_argument("--by", required=True, help="who decided (recorded)")
    p.add_argument("--reject", action="store_true", help="reject instead of approve (needs --reason)")
    p.add_argument("--reason", help="why (recorded; required with --reject)")

    p = command("complete", _complete, "write history/<id>.yaml for an approved episode")
    p.add_argument("--episode", required=True, help="the approved episode to complete")
    json_flag(p)

    p = command("verify", _verify, "read-only checks of the state (CI, pull requests)")
    p.add_argument("--rev", help="check this revision from Git objects instead of the work tree")
    p.add_argument("--against", metavar="BASE", help="also prove what a migration must preserve since BASE")
    p.add_argument("--strict", action="store_true", help="warnings (e.g. unknown submissions) fail too")
    json_flag(p)
    p.add_argument("--jobs", type=_positive, help="hashing threads, 1 to 1024 (default: one per core)")
    p.add_argument(
        "--require-signed",
        action="store_true",
        help="every commit changing state/ or history/ (since --against BASE) must pass git verify-commit",
    )

    p = command("migrate", _migrate, "legacy week-only IDs to versioned IDs, in one commit")
    p.add_argument("--dry-run", action="store_true", help="print the plan and the YAML diff; write nothing")

    p = command("lock-info", _lock_info, "say who holds the lock (read-only)")
    json_flag(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: returns the exit code."""

    def dispatch() -> int:
        args = build_parser().parse_args(argv)
        func: Dispatch = args.func
        return func(args)

    return run_handled(dispatch)
