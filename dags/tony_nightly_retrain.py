"""Nightly retraining: two tf-keras workers (MultiWorkerMirroredStrategy) on YARN.

Each night trains on the partition of the data interval that just closed and
publishes the model to HDFS under the run's date. Retries back off
exponentially; a retry re-attaches to a still-running application instead of
submitting a second one.
"""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG

from airflow_provider_tony.operators.tony import TonyOperator

TRAINING = Path(__file__).resolve().parent / "training"

with DAG(
    dag_id="tony_nightly_retrain",
    schedule="30 2 * * *",
    start_date=pendulum.datetime(2026, 1, 1, tz="Europe/Amsterdam"),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=1), "retry_exponential_backoff": True,
                  "max_retry_delay": timedelta(minutes=20)},
    tags=["tony", "training"],
    doc_md=__doc__,
) as dag:
    TonyOperator(
        task_id="train",
        execution_timeout=timedelta(hours=2),
        job={
            "queue": "default",
            "roles": {
                "worker": {
                    "instances": 2, "memory": "1 GiB", "vcores": 1,
                    "script": str(TRAINING / "digits_mwms.py"),
                    "args": ["--epochs", "3", "--steps-per-epoch", "25",
                             "--partition", "{{ data_interval_start.in_timezone('Europe/Amsterdam').to_date_string() }}"],
                },
            },
            "heartbeat_timeout": 60,
            "deadline": 3600,
            "checkpoint": {
                "model_dir": "/user/{{ conn.tony_yarn_default.extra_dejson.webhdfs_user or 'airflow' }}/tony/models/"
                             "digits/{{ data_interval_start.in_timezone('Europe/Amsterdam').to_date_string() }}",
            },
        },
    )
