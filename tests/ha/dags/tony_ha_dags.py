"""The HA tests' DAG: a real MultiWorkerMirroredStrategy job with checkpoints, no Airflow retry.

No retry: a task that succeeds succeeded on its first try. ``deferrable`` follows ``[operators]
default_deferrable`` (``AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE``), so one DAG serves both modes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pendulum
from airflow.sdk import DAG

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integration" / "dags"))
from training_jobs import strategy_job  # noqa: E402

from airflow_provider_tony.operators.tony import TonyOperator  # noqa: E402

#: Long enough that an RM failover (seconds) and a restart of the other RM fit inside training.
HA_STEPS = 300


def ha_job() -> dict:
    """Two MWMS workers on the one NodeManager (no spread), checkpoints every 10 steps."""
    job = strategy_job("mwms-loop", max_restarts=0, name="pytest-ha-follow")
    worker = job["roles"]["worker"]
    worker.pop("placement", None)
    worker["instances"] = 2
    args = worker["args"]
    args[args.index("--steps") + 1] = str(HA_STEPS)
    return job


with DAG("tony_ha_follow", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False):
    TonyOperator(task_id="train", job=ha_job(), poll_interval=1.0)
