"""The nightly retrain in PyTorch: two DDP workers (``framework: pytorch``) on the day's digits partition.

``tony_nightly_retrain``'s twin in PyTorch, on the same data: scheduled on the ``digits`` data
asset, each partition ``tony_digits_partition`` lands on HDFS
(``<base_path>/data/digits/dt=<day>``) starts a run that trains on exactly that partition,
declared as the same two inputs (``digits_train`` dealt between the workers by ``sharding:
shard``, the held-out ``digits_eval`` read by both), checked before submitting and staged to
each worker's disk. ``training/digits_torch.py`` reads the TFRecords without TensorFlow
(``training/tfrecords.py``); the job ships ``training/`` as its ``src_dir``. A manual run (or
``airflow dags test``) without an event trains on the partition of its logical date, in the
DAG's timezone.

The model (``model.pt``, a ``state_dict``, and ``model.json``) goes to
``<base_path>/models/digits_torch/<day>``, published only when its ``accuracy`` on the held-out
file is at least that of the last published PyTorch model (the record
``models/digits_torch/published.json``; the first model passes). A worse one (try
``tony_digits_partition`` with ``degrade``) is kept aside as ``<day>.rejected-<application id>``
and fails the task with ``QualityGateFailed``, not retried. Retries back off exponentially and
resume from the run's last checkpoint on HDFS (``checkpoints/digits_torch/<day>``). Each
published model emits an event on the ``digits_torch`` model asset; the OpenLineage events name
the partition read and the model folder, as the TensorFlow DAG's do.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import DAG, task

from airflow_provider_tony.assets import data_asset, model_asset
from airflow_provider_tony.operators.tony import TonyOperator

TZ = "Europe/Amsterdam"
DIGITS_DATA = data_asset("digits")
# The partition's day, from the task below: the triggering event's, else the logical date's.
DAY = "ti.xcom_pull(task_ids='partition_day')"
BASE = "{{ (conn.tony_yarn_default.extra_dejson.base_path or '/user/airflow/tony') }}"
PARTITION = BASE + "/data/digits/dt={{ " + DAY + " }}"

with DAG(
    dag_id="tony_nightly_retrain_torch",
    schedule=[DIGITS_DATA],
    start_date=pendulum.datetime(2026, 1, 1, tz=TZ),
    catchup=False,
    max_active_runs=1,
    default_args={
        "retries": 2,
        "retry_delay": timedelta(minutes=1),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=20),
    },
    tags=["tony", "training", "pytorch"],
    doc_md=__doc__,
) as dag:

    @task
    def partition_day(**context: Any) -> str:
        """The day of the partition to train on: the newest data event's, else the run's logical date."""
        events = context["triggering_asset_events"].get(DIGITS_DATA) or []
        if events:
            return str(events[-1].extra["day"])
        when = context["logical_date"] or context["dag_run"].run_after
        return str(when.in_timezone(TZ).to_date_string())

    train = TonyOperator(
        task_id="train",
        execution_timeout=timedelta(hours=2),
        model_asset=model_asset("digits_torch"),
        checkpoint_dir=BASE + "/checkpoints/digits_torch/{{ " + DAY + " }}",
        job={
            "queue": "default",
            "framework": "pytorch",
            "src_dir": "training",  # beside this file: digits_torch.py with tfrecords.py and digits_data.py
            "roles": {
                "worker": {
                    "instances": 2,
                    "memory": "2 GiB",  # a CPU torch process with gloo takes about 1.3 GiB
                    "vcores": 1,
                    "script": "digits_torch.py",
                    "args": [
                        "--epochs",
                        "3",
                        "--steps-per-epoch",
                        "25",
                        "--partition",
                        "{{ " + DAY + " }}",
                        "--input",
                        "digits_train",
                        "--eval-input",
                        "digits_eval",
                    ],
                },
            },
            "heartbeat_timeout": 60,
            "deadline": 3600,
            "checkpoint": {"model_dir": BASE + "/models/digits_torch/{{ " + DAY + " }}"},
            "quality_gate": {
                "metric": "accuracy",
                "mode": "max",
                "record": BASE + "/models/digits_torch/published.json",
            },
            "inputs": {
                "digits_train": {"path": PARTITION + "/train", "sharding": "shard"},
                "digits_eval": {"path": PARTITION + "/eval"},
            },
        },
    )
    partition_day() >> train
