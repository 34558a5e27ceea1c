"""Retrain when a partition lands on HDFS, whoever wrote it: an asset watcher on the folder.

The nightly retrain runs on events that an Airflow task (``tony_digits_partition``)
emits. Data that a Spark or Hive job writes outside Airflow emits none, so this
DAG's asset has a watcher instead: ``HdfsPartitionTrigger`` runs in the
triggerer, lists ``<base_path>/data/digits-landed/dt=*`` through the
``tony_yarn`` connection, and fires once for each new folder as soon as its
``_SUCCESS`` marker is there (what Spark and Hive write last). Each event starts
one run, with the partition in the event's ``extra["payload"]``
(``partition``, ``values: {"dt": ...}``); the partitions already fired are kept
in Airflow's asset state store, so a restarted triggerer does not fire them
again, and the ones there when the watcher first started are not fired at all.

To try it: copy a day that ``tony_digits_partition`` wrote
(``hdfs dfs -cp <base_path>/data/digits/dt=2026-11-02 <base_path>/data/digits-landed/``),
or write one with any tool, ``_SUCCESS`` last.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import DAG, Asset, AssetWatcher, task

from airflow_provider_tony.operators.tony import TonyOperator
from airflow_provider_tony.triggers.hdfs_partition import HdfsPartitionTrigger

TRAINING = Path(__file__).resolve().parent / "training"
BASE = "{{ conn.tony_yarn_default.extra_dejson.base_path or '/user/airflow/tony' }}"
LANDED = Asset(
    name="tony_data_digits_landed",
    uri="tony-data://digits-landed",
    watchers=[
        AssetWatcher(
            name="tony_digits_landed_partitions",
            trigger=HdfsPartitionTrigger(path="data/digits-landed/dt=*", poll_interval=10.0),
        )
    ],
)
PARTITION = "ti.xcom_pull(task_ids='landed_partition')"

with DAG(
    dag_id="tony_retrain_on_landing",
    schedule=[LANDED],
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=1)},
    tags=["tony", "training", "watcher"],
    doc_md=__doc__,
) as dag:

    @task
    def landed_partition(**context: Any) -> str:
        """The folder the watcher found (the newest event's, when several came at once)."""
        events = context["triggering_asset_events"].get(LANDED) or []
        if not events:
            raise ValueError("tony_retrain_on_landing runs on its watcher's events: land a partition instead")
        return str(events[-1].extra["payload"]["partition"])

    train = TonyOperator(
        task_id="train",
        execution_timeout=timedelta(hours=1),
        checkpoint_dir=BASE + "/checkpoints/digits-landed/{{ " + PARTITION + ".rsplit('=', 1)[-1] }}",
        job={
            "roles": {
                "worker": {
                    "instances": 1,
                    "memory": "1 GiB",
                    "script": str(TRAINING / "digits_mwms.py"),
                    "args": ["--epochs", "1", "--steps-per-epoch", "10", "--input", "digits_train"],
                },
            },
            "heartbeat_timeout": 60,
            "deadline": 1800,
            "inputs": {"digits_train": {"path": "{{ " + PARTITION + " }}/train"}},
        },
    )
    landed_partition() >> train
