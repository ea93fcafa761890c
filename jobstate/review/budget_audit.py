"""verify's view of money controls: reservations well formed and settled, overruns named, and no
budget period whose spend plus open reservations exceeds its cap. Pure over collected facts."""

from __future__ import annotations

from decimal import Decimal

from jobstate.core.attempts import Attempt
from jobstate.core.budget import Budget, spent_and_held
from jobstate.core.episode_records import EpisodeRecords
from jobstate.core.records import AttemptState
from jobstate.review.problem import Problem


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


def check_budgets(budget: Budget | None, facts: dict[str, EpisodeRecords], problems: list[Problem]) -> None:
    """Spend plus open reservations of every budget period within its caps (errors name period and currency)."""
    if budget is None:
        return
    episodes = ((f.period_id, f.costs, f.steps) for f in facts.values())
    used = {slot: spent + held for slot, (spent, held) in spent_and_held(episodes, budget.per).items()}
    for (period, currency), total in sorted(used.items()):
        cap = budget.limits.get(currency)
        if cap is None:
            problems.append(
                Problem(
                    "jobstate.yaml",
                    f"budget {period}: {total} {currency} charged or reserved in a currency budget.limits does not "
                    f"cap (capped: {', '.join(sorted(budget.limits))}); add a cap for {currency}",
                )
            )
        elif total > Decimal(cap):
            problems.append(
                Problem("jobstate.yaml", f"budget {period} {currency}: spent and reserved {total}, over the cap {cap}")
            )
