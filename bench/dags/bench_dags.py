"""The DAGs the benchmarks run through TonyOperator (``airflow dags test``).

bench_train: the example training script, for the training-overhead benchmark.
bench_start: one short worker, for the operator's own start-up.
bench_fail: two workers, one of which hangs or dies on request, for the time
from the failure to the Airflow task failing.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import DAG, Param, task

from airflow_provider_tony.operators.tony import TonyOperator

REPO = Path(__file__).resolve().parents[2]
SCRIPT = str(REPO / "dags" / "training" / "digits_mwms.py")
BEHAVE = str(REPO / "tests" / "integration" / "jobs" / "behave.py")
START = pendulum.datetime(2026, 1, 1, tz="UTC")
PARAMS = {"args": Param([], type="array", items={"type": "string"})}


@task
def with_args(job: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, Any]:
    """``job`` with the run's ``args`` as its worker's arguments.

    Built in a task, not templated: a template may give a job field its value,
    never a list (the operator refuses a job whose shape a param could change).
    """
    assert params is not None
    worker = {**job["roles"]["worker"], "args": [str(a) for a in params["args"]]}
    return {**job, "roles": {**job["roles"], "worker": worker}}


with DAG(
    "bench_train", schedule=None, start_date=START, catchup=False, render_template_as_native_obj=True, params=PARAMS
):
    TonyOperator(
        task_id="train",
        job=with_args(
            {
                "roles": {"worker": {"instances": 2, "memory": "1 GiB", "script": SCRIPT}},
                "python": {"interpreter": sys.executable},
                "heartbeat_timeout": 60,
            }
        ),
    )

with DAG(
    "bench_fail", schedule=None, start_date=START, catchup=False, render_template_as_native_obj=True, params=PARAMS
):
    # Heartbeat every 1 s, silence > 5 s is a hang; the operator polls every 1 s.
    TonyOperator(
        task_id="train",
        poll_interval=1.0,
        retries=0,
        job=with_args(
            {
                "roles": {"worker": {"instances": 2, "memory": "256 MiB", "script": BEHAVE}},
                "python": {"interpreter": sys.executable},
                "heartbeat_interval": 1,
                "heartbeat_timeout": 5,
            }
        ),
    )

with DAG("bench_start", schedule=None, start_date=START, catchup=False):
    # One worker that reports and exits: the operator's own start-up before YARN.
    TonyOperator(
        task_id="train",
        retries=0,
        job={
            "roles": {"worker": {"instances": 1, "memory": "256 MiB", "script": BEHAVE, "args": ["ok"]}},
            "python": {"interpreter": sys.executable},
        },
    )
