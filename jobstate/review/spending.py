"""What a revision spent and holds against its budget, as reviewers see it: the rows ``report`` and
``diff`` show, and verify's checks (reservations settled, overruns named, no budget period over its
cap). Pure: values in, values out; the sums are core.budget.spent_and_held.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from jobstate.core.attempts import Attempt
from jobstate.core.budget import Acknowledgement, Budget, budget_period, cap_verdict, spent_and_held
from jobstate.core.episode_records import EpisodeRecords
from jobstate.core.periods import parse_period
from jobstate.core.records import AttemptState
from jobstate.errors import UsageError
from jobstate.review.problem import Problem

if TYPE_CHECKING:
    from jobstate.review.revision import StateView


def budget_use(
    state: StateView, periods: Iterable[str] | None = None, *, also: Iterable[str] = ()
) -> list[dict[str, Any]]:
    """Cap, spent, open reservations and remaining per budget period and currency; with ``periods``
    (episode periods), only the budget periods those fall in, and the budget periods in ``also``.
    Empty without a budget."""
    budget: Budget | None = state.budget
    if budget is None:
        return []
    wanted = None if periods is None else {_budget_period(p, budget) for p in periods} | set(also)
    used = spent_and_held(((v.period_id, v.costs, v.steps) for v in state.episodes.values()), budget.per)
    spent = {slot: s for slot, (s, _r) in used.items() if wanted is None or slot[0] in wanted}
    held = {slot: r for slot, (_s, r) in used.items() if wanted is None or slot[0] in wanted}
    out = []
    for bp, currency in sorted(set(spent) | set(held)):
        cap = budget.limits.get(currency)
        s, r = spent.get((bp, currency), Decimal(0)), held.get((bp, currency), Decimal(0))
        row: dict[str, Any] = {"period": bp, "currency": currency, "spent": str(s), "reserved": str(r)}
        if cap is None:
            row.update(cap=None, remaining=None, use=f"spent {s}, reserved {r} {currency}; no cap for {currency}")
        else:
            left = Decimal(cap) - s - r
            share = f" ({(s + r) * 100 / Decimal(cap):.0f}%)" if Decimal(cap) else ""
            verdict, ack = cap_verdict(budget, state.acknowledgements, bp, currency, s + r)
            if ack is not None:
                over_text = f" over the cap, acknowledged by {ack.by} at {ack.at}: {ack.reason}"
            elif verdict == "not judged":
                over_text = f" over the cap, before budget.since {budget.since}: not judged"
            else:
                over_text = " OVER THE CAP" if verdict == "over" else ""
            row.update(
                cap=cap,
                remaining=str(left),
                use=f"spent {s} + reserved {r} of {cap} {currency}{share}, {left} left{over_text}",
            )
        row["name"] = f"{bp} {currency}"
        out.append(row)
    return out


def _budget_period(period_id: str, budget: Budget) -> str | None:
    try:
        return budget_period(parse_period(period_id), budget.per).id
    except UsageError:
        return None  # a legacy or malformed name: not counted


def check_settlement(attempt: Attempt, path: str, problems: list[Problem]) -> None:
    """A completed attempt that reserved must say what it settled to; an overrun is a warning."""
    if attempt.reservation is None:
        return
    amount, currency = attempt.reservation
    where = f"step {attempt.step!r} attempt {attempt.number}"
    settled = attempt.settled
    if attempt.state == AttemptState.COMPLETED and settled is None:
        problems.append(Problem(path, f"{where}: completed but not settled"))
    elif settled is not None and settled.get("overrun") is not None:
        problems.append(
            Problem(
                path,
                f"{where} cost {settled.get('spent')} {currency}, {settled.get('overrun')} over its reservation "
                f"of {amount}",
                "warning",
            )
        )


def check_budgets(
    budget: Budget | None,
    facts: dict[str, EpisodeRecords],
    problems: list[Problem],
    acknowledgements: Sequence[Acknowledgement] = (),
) -> None:
    """Spend plus open reservations of every budget period within its caps (errors name period and currency);
    a period before ``budget.since``, and an overrun a person acknowledged, are not held against it."""
    if budget is None:
        return
    episodes = ((f.period_id, f.costs, f.steps) for f in facts.values())
    used = {slot: spent + held for slot, (spent, held) in spent_and_held(episodes, budget.per).items()}
    for (period, currency), total in sorted(used.items()):
        verdict, _ack = cap_verdict(budget, acknowledgements, period, currency, total)
        if verdict == "no cap" and budget.judges(period):
            problems.append(
                Problem(
                    "jobstate.yaml",
                    f"budget {period}: {total} {currency} charged or reserved in a currency budget.limits does not "
                    f"cap (capped: {', '.join(sorted(budget.limits))}); add a cap for {currency}",
                )
            )
        elif verdict == "over":
            problems.append(
                Problem(
                    "jobstate.yaml",
                    f"budget {period} {currency}: spent and reserved {total}, over the cap "
                    f"{budget.limits[currency]}; once reviewed: "
                    f"jobstate budget acknowledge --period {period} --by NAME --reason TEXT",
                )
            )
