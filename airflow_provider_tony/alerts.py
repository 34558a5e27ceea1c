"""Deadline alerts for training DAGs: a run not done in time is reported, not silently late.

Airflow 3.1+ deadline alerts (``DAG(deadline=DeadlineAlert(...))``) call an awaitable in the
triggerer when a run is still not done by its deadline. :func:`log_missed_deadline` is the
default callback: it says so in the triggerer's log, naming the run; a platform team points
the alert at its pager or chat instead. :func:`run_deadline` builds the alert.

Why :func:`run_deadline` leaves it out under ``airflow dags test``: Airflow 3.3's test run
hands the scheduler loop the DAG's deadlines as their serialized form, and storing them fails
(``StatementError: 'dict' object has no attribute 'hex'`` in ``DagRun.update_state``) when the
run succeeds, so every ``dags test`` of the DAG would fail. A test run is not one whose lateness
anyone is paged for; the scheduler's runs (``airflow scheduler``, the UI, asset events) carry
the alert.
"""

from __future__ import annotations

import logging
import sys
from datetime import timedelta
from typing import Any

__all__ = ["log_missed_deadline", "run_deadline"]

log = logging.getLogger(__name__)


async def log_missed_deadline(*, what: str = "the DAG run", context: Any = None, **kwargs: Any) -> None:
    """Log a missed deadline with what Airflow says about the run (its DAG and id), as a warning."""
    run = (context or {}).get("dag_run") if isinstance(context, dict) else None
    where = f"{getattr(run, 'dag_id', '?')} {getattr(run, 'run_id', '?')}" if run is not None else "a DAG run"
    log.warning("deadline missed: %s is not done (%s)", what, where)


def _in_dags_test(argv: list[str]) -> bool:
    """Whether this process is ``airflow dags test`` (the DAG file is parsed in the command's own process)."""
    words = [w for w in argv[1:] if not w.startswith("-")]
    return len(words) >= 2 and words[:2] == ["dags", "test"] and argv[0].endswith("airflow")


def run_deadline(interval: timedelta, what: str, *, argv: list[str] | None = None) -> Any:
    """A deadline alert ``interval`` after the run was queued, calling :func:`log_missed_deadline`;
    None under ``airflow dags test`` (see the module's docstring)."""
    if _in_dags_test(sys.argv if argv is None else argv):
        return None
    # airflow.sdk exports these (its __all__ and lazy __getattr__), but its __init__.pyi (task SDK 1.3) leaves them out.
    from airflow.sdk import AsyncCallback, DeadlineAlert, DeadlineReference  # type: ignore[attr-defined]

    return DeadlineAlert(
        reference=DeadlineReference.DAGRUN_QUEUED_AT,
        interval=interval,
        callback=AsyncCallback(log_missed_deadline, kwargs={"what": what}),
    )
