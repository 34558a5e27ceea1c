"""The chaos tests' DAG: three counting workers that may restart their gang inside the application."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG

from airflow_provider_tony.operators.tony import TonyOperator

COUNT_STEPS = str(Path(__file__).resolve().parents[2] / "integration" / "jobs" / "count_steps.py")

with DAG(
    "tony_chaos_restart",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 1, "retry_delay": timedelta(seconds=1)},
):
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
                }
            },
            "python": {"interpreter": sys.executable},
            "heartbeat_interval": 1.0,
            "heartbeat_timeout": 30,
            "max_restarts": 2,
            "checkpoint": {"poll_interval": 0.5, "keep": 20},
        },
    )
