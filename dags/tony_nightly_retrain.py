"""Nightly retraining: two tf-keras workers (MultiWorkerMirroredStrategy) on YARN.

Each night trains on the partition of the data interval that just closed and
publishes the model to HDFS under the run's date. Retries back off
exponentially; a retry re-attaches to a still-running application instead of
submitting a second one, or resumes from the run's last checkpoint on HDFS.
With ``warm_start`` (default on) a run that has no checkpoint yet starts from
yesterday's weights. Each published model emits an event on the ``digits`` model
asset, which schedules ``tony_score_new_model``.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG, Param

from airflow_provider_tony.assets import model_asset
from airflow_provider_tony.operators.tony import TonyOperator

TRAINING = Path(__file__).resolve().parent / "training"
TZ = "Europe/Amsterdam"
DAY = "data_interval_start.in_timezone('Europe/Amsterdam')"
BASE_EXPR = "(conn.tony_yarn_default.extra_dejson.base_path or '/user/airflow/tony')"
BASE = "{{ " + BASE_EXPR + " }}"

with DAG(
    dag_id="tony_nightly_retrain",
    schedule="30 2 * * *",
    start_date=pendulum.datetime(2026, 1, 1, tz=TZ),
    catchup=False,
    max_active_runs=1,
    default_args={
        "retries": 2,
        "retry_delay": timedelta(minutes=1),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=20),
    },
    tags=["tony", "training"],
    doc_md=__doc__,
    params={"warm_start": Param(True, type="boolean", title="Warm start from yesterday's checkpoint")},
) as dag:
    TonyOperator(
        task_id="train",
        execution_timeout=timedelta(hours=2),
        model_asset=model_asset("digits"),  # each new model schedules tony_score_new_model
        checkpoint_dir=BASE + "/checkpoints/digits/{{ " + DAY + ".to_date_string() }}",
        warm_start_from="{{ ("
        + BASE_EXPR
        + " ~ '/checkpoints/digits/' ~ "
        + DAY
        + ".subtract(days=1).to_date_string()) if params.warm_start else '' }}",
        job={
            "queue": "default",
            "roles": {
                "worker": {
                    "instances": 2,
                    "memory": "1 GiB",
                    "vcores": 1,
                    "script": str(TRAINING / "digits_mwms.py"),
                    "args": [
                        "--epochs",
                        "3",
                        "--steps-per-epoch",
                        "25",
                        "--partition",
                        "{{ " + DAY + ".to_date_string() }}",
                    ],
                },
            },
            "heartbeat_timeout": 60,
            "deadline": 3600,
            "checkpoint": {"model_dir": BASE + "/models/digits/{{ " + DAY + ".to_date_string() }}"},
        },
    )
