"""Money controls decided with a paid step's intent, under the same lock: the budget reservation and
the request fingerprint. Settled when the attempt ends."""

from __future__ import annotations

from decimal import Decimal

from jobstate.core import advice
from jobstate.core.attempts import CLOSED, Attempt
from jobstate.core.budget import budget_period, check_reservation, crosses_warning, episode_periods, parse_max_cost
from jobstate.core.layout import CONFIG_FILE, COSTS, SUBMISSIONS, period_dir
from jobstate.core.periods import parse_period
from jobstate.core.records import AttemptState, Episode
from jobstate.errors import DirtyState, FingerprintMismatch, UsageError
from jobstate.store.records import budget_usage
from jobstate.store.store import Store

_SAID: dict[str, str] = {
    AttemptState.INTENT.value: "unknown",
    AttemptState.ACCEPTED.value: "accepted (running at the vendor)",
    AttemptState.COMPLETED.value: "completed",
}


def check_fingerprint(episode_id: str, step: str, last: Attempt | None, fingerprint: str | None) -> None:
    """Refuse (exit 4) a request that differs from the one the step's open or finished attempt recorded."""
    if last is None or fingerprint is None or last.state in CLOSED:
        return
    recorded = last.fingerprint
    if recorded is None or recorded == fingerprint:
        return
    said = _SAID.get(last.state, last.state.value)
    supersede = f"jobstate resolve --episode {episode_id} --step {step} --supersede --by NAME --reason TEXT"
    if last.state == AttemptState.ACCEPTED:
        # supersede refuses an accepted attempt (its task may still charge): collect it first
        advice = (
            "the vendor accepted it, so collect it first by running the recorded request again (it resumes the "
            f"task, never resubmits); then open a new attempt for the changed one with: {supersede}"
        )
    elif last.state == AttemptState.INTENT:
        # supersede refuses an unknown attempt too (exit 6): whether the vendor took it is settled first
        settle = f"jobstate resolve --episode {episode_id} --step {step} (--accepted REF | --not-submitted) ..."
        advice = (
            f"its acceptance is unknown: run the recorded request again, or settle it first with: {settle}; "
            "settled as not submitted, the changed request then runs; settled as accepted, the recorded request "
            f"collects it, and then: {supersede}"
        )
    else:
        advice = f"run the recorded request again, or open a new attempt for the changed one with: {supersede}"
    raise FingerprintMismatch(
        f"step {step} of {episode_id} attempt {last.number} is {said} for request {recorded}, "
        f"but this run's request is {fingerprint}: nothing was run; {advice}"
    )


def reserve(
    store: Store, episode: Episode, step: str, max_cost: str | None, notices: list[str]
) -> dict[str, str] | None:
    """The reservation a new attempt records, after checking the budget (exit 8 when it does not fit).

    Call under the lock, before the intent is written: spend and open reservations are read here.
    """
    budget = store.config.budget
    if max_cost is None:
        if budget is not None:
            raise UsageError(
                f"{store.root} has a budget: declare step {step}'s maximum cost, e.g. --max-cost '12.40 USD' "
                "(max_cost= in the API); nothing was run"
            )
        return None
    amount, currency = parse_max_cost(max_cost)
    reservation = {"amount": format(amount, "f"), "currency": currency}
    if budget is None:
        return reservation
    if currency not in budget.limits:
        raise UsageError(
            f"budget.limits in jobstate.yaml has no cap for {currency}: add one before paying in {currency}; "
            "nothing was run"
        )
    period = budget_period(parse_period(episode.period_id), budget.per).id
    refuse_uncommitted_inputs(store, episode_periods(period, store.config.period))
    current = budget_usage(store, budget, period)[currency]
    check_reservation(current, amount)
    if crosses_warning(current, amount, budget.warn_at):
        used = current.spent + current.reserved + amount
        notices.append(
            f"warning: budget {period} is at {used} of {current.cap} {currency} with this step's reservation"
        )
    return reservation


def refuse_uncommitted_inputs(store: Store, periods: list[str], *exact: str) -> None:
    """The budget decision reads committed state only: an edit of the cap or of a ledger in the period
    that nobody committed is refused (exit 2), never taken as the truth; so is any difference from HEAD
    at the ``exact`` paths, an untracked file included (the command rewrites them whole)."""
    specs = [CONFIG_FILE, *exact, *(f"{period_dir(p)}/*/{name}" for p in periods for name in (COSTS, SUBMISSIONS))]
    for code, path in store.git.status(*specs):
        if code != "??" or path in exact:
            raise DirtyState(
                f"{path} has uncommitted changes and the budget decision reads it: "
                f"{advice.commit_or_restore(path, code)}; nothing was run"
            )


def settle(attempt: Attempt, spent: dict[str, Decimal]) -> dict[str, str] | None:
    """What the attempt's reservation settled to, per the currency it reserved; charges in other
    currencies are named as unreserved. None when it reserved nothing."""
    if attempt.reservation is None:
        return None
    currency = attempt.reservation.currency
    reserved = Decimal(attempt.reservation.amount)
    used = spent.get(currency, Decimal(0))
    out = {"spent": format(used, "f"), "reserved": format(reserved, "f")}
    if used > reserved:
        out["overrun"] = format(used - reserved, "f")
    others = {c: a for c, a in sorted(spent.items()) if c != currency and a}
    if others:
        out["unreserved"] = ", ".join(f"{format(a, 'f')} {c}" for c, a in others.items())
    return out
