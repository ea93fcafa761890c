"""The ``jobstate`` command: argparse and one dispatch table.

The table is the one place that imports a command, and it does so lazily, so
that a retried ``allocate`` loads no module it does not need. Each command
takes parsed values, calls the library, prints, and returns an exit code;
jobstate.error_handler turns what it raises into one line on stderr.

The options themselves, with their help, are ``jobstate.arguments``'s.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from jobstate.arguments import build_parser, check_text
from jobstate.core.clock import utc_now
from jobstate.core.inputs import check_environment
from jobstate.error_handler import run_handled
from jobstate.errors import UsageError
from jobstate.store.store import StoreOptions

if TYPE_CHECKING:
    from jobstate.allocation.from_scheduler import Request


def _scheduled(a: argparse.Namespace) -> Request | None:
    if a.from_ is None:
        given = {"--job-name": a.job_name, "--schedule": a.schedule, "--tz": a.tz, "--podinfo": a.podinfo}
        stray = [name for name, value in given.items() if value is not None] + (["--manual"] if a.manual else [])
        if stray:
            raise UsageError(f"{stray[0]} works with --from SCHEDULER only")
        return None
    # a plain --key (the retry path) loads no scheduler module and no cron library
    from jobstate.allocation.from_scheduler import Request  # noqa: PLC0415 - start-up

    return Request(
        scheduler=a.from_,
        job_name=a.job_name,
        schedule=a.schedule,
        tz=a.tz,
        at=a.at,
        date=a.date,
        week=a.week,
        period=a.period,
        manual=a.manual,
    )


# subcommand -> (its module in jobstate.commands, whose function has the module's name; the parameters
# that function takes, by name). The one place a command is imported, lazily, when it runs.
DISPATCH: dict[str, tuple[str, tuple[str, ...]]] = {
    "init": ("init", ("repo", "git_init", "force", "remote")),
    "allocate": (
        "allocate",
        ("options", "key", "date", "week", "period", "at", "as_json", "scheduled", "podinfo", "any_branch"),
    ),
    "key": ("key", ("repo", "scheduled", "podinfo", "now", "as_json")),
    "show": ("show", ("options", "episode_id", "as_json", "records")),
    "list": ("list_episodes", ("options", "period", "as_json")),
    "run": ("run", ("options", "episode", "step", "command", "max_cost", "request", "probe", "probe_timeout")),
    "resolve": (
        "resolve",
        ("options", "episode", "step", "accepted", "supersede", "by", "reason", "replaces", "probe", "probe_timeout"),
    ),
    "probe": ("probe", ("options", "episode", "step", "probe", "probe_timeout", "as_json")),
    "approve": ("approve", ("options", "episode", "by", "reject", "reason")),
    "complete": ("complete", ("options", "episode", "as_json")),
    "retire": ("retire", ("options", "episode", "by", "reason", "as_json")),
    "verify": (
        "verify",
        (
            "repo",
            "rev",
            "against",
            "strict",
            "fmt",
            "jobs",
            "uncommitted_ok",
            "require_signed",
            "allowed_signers",
            "approvers",
        ),
    ),
    "diff": ("diff", ("repo", "base", "rev", "fmt", "max_chars", "output", "strict", "approvers")),
    "report": ("report", ("repo", "rev", "period", "since", "until", "fmt", "max_chars", "output")),
    "migrate": ("migrate", ("options", "dry_run", "check", "as_json")),
    "budget": ("budget", ("options", "period", "as_json", "action", "by", "reason")),
    "lock-info": ("lock_info", ("options", "as_json")),
}
COMMANDS = frozenset(DISPATCH)  # the first word picks the one parser to build


def _value(a: argparse.Namespace, name: str) -> object:
    """One parameter of a command's function, from the parsed arguments."""
    if name == "options":
        return StoreOptions(a.repo, a.lock_timeout, a.remote, a.now)
    if name == "scheduled":
        return _scheduled(a)
    if name == "as_json":
        return a.json
    if name == "fmt":
        return "json" if getattr(a, "json", False) else a.format
    if name == "command":
        return a.cmd
    if name == "episode" and getattr(a, "episode_arg", None) is not None:
        return a.episode_arg  # retire's positional EPISODE, kept beside --episode
    return getattr(a, name)


def _dispatch(a: argparse.Namespace) -> int:
    module, params = DISPATCH[a.command]
    func = getattr(importlib.import_module(f"jobstate.commands.{module}"), module)
    code: int = func(**{name: _value(a, name) for name in params})
    return code


def main(argv: Sequence[str] | None = None, *, now: Callable[[], datetime] = utc_now) -> int:
    """Entry point: returns the exit code. ``now`` replaces the clock (tests, replays)."""

    def dispatch() -> int:
        words = sys.argv[1:] if argv is None else list(argv)
        # a known command first: build its parser alone; anything else gets the whole parser's answer
        only = words[0] if words and words[0] in COMMANDS else None
        args = build_parser(only).parse_args(words)
        check_text(args)
        check_environment(os.environ)
        args.now = now
        return _dispatch(args)

    return run_handled(dispatch)
