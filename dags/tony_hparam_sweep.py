"""A learning-rate sweep: one YARN application per mapped task, two at a time, one publication.

Dynamic task mapping expands one ``TonyOperator`` over the rates; each mapped
task's application carries its map index in its YARN tags, so a retry of
``train[1]`` re-attaches to ``train[1]``'s application and no other; Airflow's
UI names each mapped task by its job's name (``map_index_template``).

The trials run with ``publish=False``: each model waits as a candidate beside
``models/digits-sweep`` and nothing is judged per trial. ``publish_best`` then
sends the best trial (highest ``val_accuracy``) through the quality gate, against
the last published sweep model, and emits one event on the ``digits-sweep`` model
asset; the other trials' models stay candidates, listed in its XCom.

Each trial opts into the median-stopping rule (``early_stopping``): a trial whose
``loss`` at a step is worse than the median of the finished trials' at that step
stops itself (its application ends SUCCEEDED with no model; the stop is in its XCom
and in ``publish_best``'s ``stopped``). Two trials run at a time, so the third, the
smallest rate, starts once one has finished and is judged against it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow.sdk import DAG

from airflow_provider_tony.assets import model_asset
from airflow_provider_tony.operators.publish_best import TonyPublishBestOperator
from airflow_provider_tony.operators.tony import TonyOperator

TRAINING = Path(__file__).resolve().parent / "training"
LEARNING_RATES = [0.2, 0.05, 0.002]
BASE = "{{ (conn.tony_yarn_default.extra_dejson.base_path or '/user/airflow/tony') }}"
# What every trial shares, and what publish_best reads: where the models go and how they are judged.
SWEEP: dict[str, Any] = {
    "checkpoint": {"model_dir": BASE + "/models/digits-sweep"},
    "quality_gate": {"metric": "val_accuracy", "mode": "max"},
    # The finished trials' loss curves, one folder per DAG run (HDFS names allow no ':').
    "early_stopping": {
        "rule": "median",
        "metric": "loss",
        "mode": "min",
        "sweep": BASE + "/sweeps/digits/{{ run_id | replace(':', '-') | replace('+', '-') }}",
        "grace_steps": 20,
    },
}


def job(learning_rate: float) -> dict[str, Any]:
    return {
        "name": f"digits-sweep-lr{learning_rate}",
        "roles": {
            "worker": {
                "instances": 2,
                "memory": "1 GiB",
                "script": str(TRAINING / "digits_mwms.py"),
                "args": ["--epochs", "4", "--steps-per-epoch", "100", "--learning-rate", str(learning_rate)],
            }
        },
        "heartbeat_interval": 2,  # the AM sees the curve, and judges it, every 2 s
        "heartbeat_timeout": 60,
        "deadline": 3600,
        **SWEEP,
    }


with DAG(dag_id="tony_hparam_sweep", schedule=None, catchup=False, tags=["tony", "sweep"], doc_md=__doc__) as dag:
    # The grid and the task list name each trial by its job (digits-sweep-lr0.05), not train[1].
    train = TonyOperator.partial(
        task_id="train",
        max_active_tis_per_dag=2,
        poll_interval=2.0,
        map_index_template="{{ task.job['name'] }}",
        publish=False,
    ).expand(job=[job(lr) for lr in LEARNING_RATES])
    # Any trial's job says where and how to publish: they share SWEEP's model_dir and quality_gate.
    TonyPublishBestOperator(
        task_id="publish_best", trials=train.output, job=job(LEARNING_RATES[0]), model_asset=model_asset("digits-sweep")
    )
