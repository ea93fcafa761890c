"""``jobstate.yaml``: the optional per-repository settings."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, NamedTuple

from jobstate.core.layout import CONFIG_FILE
from jobstate.core.periods import KINDS
from jobstate.errors import StateInvalid

if TYPE_CHECKING:
    from jobstate.core.budget import Budget

KNOWN = ("period", "timezone", "lock_timeout", "remote", "remote_timeout", "budget", "state_branch", "steps")
STEP_SETTINGS = ("probe", "probe_timeout")
DEFAULT_PROBE_TIMEOUT = 60.0


class Config(NamedTuple):
    """Settings; every field has a default, so the file is optional."""

    period: str = "iso-week"
    timezone: str = "UTC"
    lock_timeout: float = 30.0
    remote: str | None = None
    budget: Budget | None = None
    remote_timeout: float | None = None  # None: the lock timeout bounds each fetch and push
    state_branch: str | None = None  # None (older repositories): allocation on any branch
    # per paid step: {"probe": [argv...], "probe_timeout": seconds}; see jobstate.paid.probe
    steps: dict[str, dict[str, Any]] | None = None

    def probes(self) -> dict[str, tuple[list[str], float]]:
        """Every step's declared probe command (argv) and deadline."""
        return {step: found for step in sorted(self.steps or {}) if (found := self.probe_of(step)) is not None}

    def probe_of(self, step: str) -> tuple[list[str], float] | None:
        """The probe command (argv) declared for ``step`` and its deadline, or None."""
        settings = (self.steps or {}).get(step) or {}
        if not settings.get("probe"):
            return None
        return list(settings["probe"]), float(settings.get("probe_timeout", DEFAULT_PROBE_TIMEOUT))

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
    steps = None if data.get("steps") is None else _steps(data["steps"], source)
    return Config(
        period=period,
        timezone=tz,
        lock_timeout=float(timeout),
        remote=remote,
        budget=budget,
        remote_timeout=None if remote_timeout is None else float(remote_timeout),
        state_branch=state_branch,
        steps=steps,
    )


def _steps(data: Any, source: str) -> dict[str, dict[str, Any]]:
    """``steps: {NAME: {probe: CMD, probe_timeout: SECONDS}}``: a probe is an argv list or one
    command line (split as a shell would, never run by one)."""
    from jobstate.core.names import validate_step  # noqa: PLC0415 - start-up
    from jobstate.errors import UsageError  # noqa: PLC0415 - start-up

    if not isinstance(data, dict):
        raise StateInvalid(
            f"{source}: steps must map step names to their settings, e.g. steps: {{generate: {{probe: ...}}}}"
        )
    out: dict[str, dict[str, Any]] = {}
    for name, settings in data.items():
        try:
            validate_step(name)
        except UsageError as exc:
            raise StateInvalid(f"{source}: steps: {exc}") from None
        if not isinstance(settings, dict):
            raise StateInvalid(f"{source}: steps: {name}: expected a mapping of {', '.join(STEP_SETTINGS)}")
        unknown = sorted(set(settings) - set(STEP_SETTINGS))
        if unknown:
            raise StateInvalid(
                f"{source}: steps: {name}: unknown setting {unknown[0]!r}; known: {', '.join(STEP_SETTINGS)}"
            )
        entry: dict[str, Any] = {}
        if settings.get("probe") is not None:
            try:
                entry["probe"] = probe_argv(settings["probe"])
            except UsageError as exc:
                raise StateInvalid(f"{source}: steps: {name}: probe: {exc}") from None
        timeout = settings.get("probe_timeout", DEFAULT_PROBE_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600:
            raise StateInvalid(
                f"{source}: steps: {name}: probe_timeout must be a number of seconds above 0 and at most 3600"
            )
        entry["probe_timeout"] = float(timeout)
        out[str(name)] = entry
    return out


def probe_argv(value: object) -> list[str]:
    """A probe command as argv: a list of words, or one line split as a shell would (no shell runs it)."""
    import shlex  # noqa: PLC0415 - start-up

    from jobstate.errors import UsageError  # noqa: PLC0415 - start-up

    if isinstance(value, str):
        try:
            words = shlex.split(value)
        except ValueError as exc:
            raise UsageError(f"cannot split the probe command {value!r:.80}: {exc}") from None
    elif isinstance(value, list) and all(isinstance(word, str) for word in value):
        words = list(value)
    else:
        raise UsageError("give the probe command as one line or a list of words")
    if not words or any("\0" in word for word in words) or not words[0].strip():
        raise UsageError("the probe command is empty")
    return words


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
# a read-only lookup at the vendor that settles a step left unknown (docs/paid-steps.md#probes)
# steps:
#   generate: {probe: ./probe-vendor, probe_timeout: 60}
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
