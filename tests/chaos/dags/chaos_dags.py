"""The chaos tests' DAGs: three counting workers, restarted inside the application or by Airflow's retry."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG

from airflow_provider_tony.operators.tony import TonyOperator

COUNT_STEPS = str(Path(__file__).resolve().parents[2] / "integration" / "jobs" / "count_steps.py")


def chaos_dag(dag_id: str, max_restarts: int) -> DAG:
    """Three counting workers, one per node (``spread``), checkpointing every 10 steps."""
    with DAG(
        dag_id,
        schedule=None,
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        default_args={"retries": 1, "retry_delay": timedelta(seconds=1)},
    ) as dag:
        TonyOperator(
            task_id="train",
            poll_interval=1.0,
            job={
                "roles": {
                    "worker": {
                        "instances": 3,
                        "memory": "768 MiB",
                        "script": COUNT_STEPS,
                        "args": ["--steps", "150", "--every", "10", "--sleep", "0.2"],
                        "placement": "spread",
                    }
                },
                "python": {"interpreter": sys.executable},
                "heartbeat_interval": 1.0,
                "heartbeat_timeout": 30,
                "max_restarts": max_restarts,
                "checkpoint": {"poll_interval": 0.5, "keep": 20},
            },
        )
    return dag


# The gang restarts inside the application; the worker dying meanwhile re-attaches.
restart_dag = chaos_dag("tony_chaos_restart", max_restarts=2)
# No in-application restart: Airflow's retry (a new application) resumes from the checkpoint.
retry_dag = chaos_dag("tony_chaos_retry", max_restarts=0)
