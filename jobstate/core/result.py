"""The result protocol's one object (``$JOBSTATE_RESULT``), checked at the edge before anything of
it is recorded. Pure: the parsed JSON in, a refusal or nothing out.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping

from jobstate.core.names import validate_artifact_path, validate_remote_ref
from jobstate.errors import UsageError

REPORT_FIELDS = ("remote_ref", "submitted", "error", "cost", "artifacts")
COST_FIELDS = ("amount", "currency", "charge_id")


def check_report(report: Mapping[str, object], source: str) -> None:
    """Refuse (UsageError, exit 2) a report whose fields are malformed or contradict each other.

    ``remote_ref`` must be a task reference (an empty one is no reference at all), ``submitted`` a
    boolean, and a report may not say both that the vendor accepted a task and that nothing was
    submitted: recording either half of a contradiction could pay twice or lose a task.
    """
    ref = report.get("remote_ref")
    if ref is not None:
        try:
            validate_remote_ref(ref)
        except UsageError as exc:
            raise UsageError(f"{source}: remote_ref: {exc}") from None
    submitted = report.get("submitted")
    if submitted is not None and not isinstance(submitted, bool):
        raise UsageError(f"{source}: submitted must be true or false, not {reprlib.repr(submitted)}")
    if ref is not None and submitted is False:
        raise UsageError(
            f"{source}: contradicts itself: remote_ref says the vendor accepted task {ref}, "
            '"submitted": false says it accepted nothing'
        )
    error = report.get("error")
    if error is not None and not isinstance(error, str):
        raise UsageError(f"{source}: error must be a text, not {reprlib.repr(error)}")
    artifacts = report.get("artifacts")
    if artifacts is not None and not (isinstance(artifacts, list) and all(isinstance(a, str) for a in artifacts)):
        raise UsageError(f"{source}: artifacts must be a list of paths")
    for path in artifacts or []:
        try:
            validate_artifact_path(path)  # at report time: before the reference or a charge is committed
        except UsageError as exc:
            raise UsageError(f"{source}: artifacts: {exc}") from None
