"""What a missed deadline does by default: say so in the triggerer's log, naming the DAG run.

Airflow 3.1+ deadline alerts (``DAG(deadline=DeadlineAlert(...))``) call an awaitable in the
triggerer when a run is still not done by its deadline. A platform team points the alert at its
pager or chat; the example nightly DAG uses this one, which needs nothing but the log, so the
example runs anywhere.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["log_missed_deadline"]

log = logging.getLogger(__name__)


async def log_missed_deadline(*, what: str = "the DAG run", context: Any = None, **kwargs: Any) -> None:
    """Log a missed deadline with what Airflow says about the run (its id and DAG), as a warning."""
    run = (context or {}).get("dag_run") if isinstance(context, dict) else None
    where = f"{getattr(run, 'dag_id', '?')} {getattr(run, 'run_id', '?')}" if run is not None else "a DAG run"
    log.warning("deadline missed: %s is not done (%s)", what, where)
