"""``jobstate.yaml``: the optional per-repository settings."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, NamedTuple

from jobstate.core.layout import CONFIG_FILE
from jobstate.core.periods import KINDS
from jobstate.errors import StateInvalid

if TYPE_CHECKING:
    from jobstate.core.budget import Budget

KNOWN = ("period", "timezone", "lock_timeout", "remote", "remote_timeout", "budget", "state_branch")


class Config(NamedTuple):
    """Settings; every field has a default, so the file is optional."""

    period: str = "iso-week"
    timezone: str = "UTC"
    lock_timeout: float = 30.0
    remote: str | None = None
    budget: Budget | None = None
    remote_timeout: float | None = None  # None: the lock timeout bounds each fetch and push
    state_branch: str | None = None  # None (older repositories): allocation on any branch

    def to_json(self) -> str:
        """Compact form cached in the catalog."""
        budget = None if self.budget is None else self.budget.to_json_dict()
        return json.dumps({**self._asdict(), "budget": budget}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Config:
        """Inverse of to_json."""
        data = json.loads(text)
        budget = data.pop("budget", None)
        if budget is None:
            return cls(**data)
        # decimal and the budget rules load only where a budget is configured
        from jobstate.core.budget import Budget  # noqa: PLC0415 - start-up

        return cls(**data, budget=Budget(**budget))


def config_from_yaml_dict(data: Any, source: str = CONFIG_FILE) -> Config:
    """Check a loaded jobstate.yaml; unknown or ill-typed settings are StateInvalid."""
    # the retry path reads the cached settings (Config.from_json), never this
    from zoneinfo import ZoneInfo  # noqa: PLC0415 - start-up

    from jobstate.core.budget import budget_from_yaml_dict  # noqa: PLC0415 - start-up

    if data is None:
        return Config()
    if not isinstance(data, dict):
        raise StateInvalid(f"{source}: expected a mapping of settings")
    unknown = sorted(set(data) - {*KNOWN, "schema"})
    if unknown:
        raise StateInvalid(f"{source}: unknown setting {unknown[0]!r}; known: {', '.join(KNOWN)}")
    period = data.get("period", "iso-week")
    if period not in KINDS:
        raise StateInvalid(f"{source}: period {period!r} is not one of {', '.join(KINDS)}")
    tz = data.get("timezone", "UTC")
    if not isinstance(tz, str):
        raise StateInvalid(f"{source}: timezone must be a name such as UTC or Europe/Berlin")
    try:
        ZoneInfo(tz)
    except (ValueError, KeyError, OSError):
        raise StateInvalid(f"{source}: unknown timezone {tz!r}") from None
    timeout = data.get("lock_timeout", 30.0)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 <= timeout <= 86400:
        raise StateInvalid(f"{source}: lock_timeout must be a number of seconds between 0 and 86400")
    remote = data.get("remote")
    if remote is not None and (not isinstance(remote, str) or not remote or remote.startswith("-")):
        raise StateInvalid(f"{source}: remote must be the name of a git remote, e.g. origin")
    remote_timeout = data.get("remote_timeout")
    if remote_timeout is not None and (
        isinstance(remote_timeout, bool)
        or not isinstance(remote_timeout, (int, float))
        or not 0 < remote_timeout <= 86400  # nan fails both comparisons
    ):
        raise StateInvalid(
            f"{source}: remote_timeout must be a number of seconds above 0 and at most 86400, e.g. 60 "
            f"(got {remote_timeout!r:.40})"
        )
    state_branch = data.get("state_branch")
    if state_branch is not None and (
        not isinstance(state_branch, str) or not state_branch or state_branch.startswith(("-", "refs/"))
    ):
        raise StateInvalid(f"{source}: state_branch must be a branch name such as main (got {state_branch!r:.40})")
    budget = None if data.get("budget") is None else budget_from_yaml_dict(data["budget"], period, source)
    return Config(
        period=period,
        timezone=tz,
        lock_timeout=float(timeout),
        remote=remote,
        budget=budget,
        remote_timeout=None if remote_timeout is None else float(remote_timeout),
        state_branch=state_branch,
    )


def config_from_text(data: bytes | str | None, source: str = CONFIG_FILE) -> Config:
    """jobstate.yaml's text checked as settings; None, empty or only comments: every setting defaults."""
    from jobstate.store.yamlio import loads  # noqa: PLC0415 - start-up: the retry path never parses YAML

    return config_from_yaml_dict(loads(data, source, allow_empty=True) if data else None, source)


DEFAULT_CONFIG_TEXT = """\
# jobstate settings (all optional)
# period: iso-week | day | month -- what an episode ID counts in
period: iso-week
# timezone that maps a scheduled time (--at) to its period
timezone: UTC
# seconds to wait for the jobstate lock before giving up (exit 3)
lock_timeout: 30
# seconds one fetch or push may take before it is ended (exit 3); default: the lock timeout
# remote_timeout: 60
# caps per period; a paid step then declares its maximum cost (jobstate run --max-cost "12.40 USD")
# budget:
#   per: week            # week, month or day (default: the period above)
#   limits: {USD: "200.00"}
#   warn_at: "80%"
"""


def default_config_text(branch: str | None) -> str:
    """What jobstate init writes: the defaults, and the branch that holds the state (allocate refuses
    to hand out IDs on another branch, where a second series of the same IDs would start)."""
    if branch is None:
        return DEFAULT_CONFIG_TEXT
    return (
        DEFAULT_CONFIG_TEXT
        + "# the branch whose history hands out episode IDs; allocate elsewhere needs --any-branch\n"
        + f"state_branch: {json.dumps(branch)}\n"
    )
